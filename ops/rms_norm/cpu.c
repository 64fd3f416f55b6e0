/* CPU kernels of the RMS norm family, f32 and f64, sums in double. */
#include <math.h>

#include "kernels/cpu/cpu_util.h"
#include "ops/rms_norm/rms_norm.h"

/* in: x [rows, C], weight [C]; out: y, saved [rows] (rstd) */
#define RMS_NORM(T, SUF)                                                                                          \
    static ge2_status rms_norm_##SUF(const ge2_launch *l)                                                       \
    {                                                                                                           \
        const T *x = l->in[0].data, *w = l->in[1].data;                                                         \
        T *y = l->out[0].data, *saved = l->n_out > 1 ? l->out[1].data : NULL;                                   \
        const ge2_ln_geom g = ge2_ln_geom_of(l->in[0].shape);                                                   \
        const double eps = GE2_ATTRS(ge2_rms_norm_attrs, l->node->attrs)->eps;                                  \
        for (int64_t r = 0; r < g.rows; r++) {                                                                  \
            const T *xr = x + r * g.c;                                                                          \
            double ss = 0;                                                                                      \
            for (int64_t i = 0; i < g.c; i++)                                                                   \
                ss += (double)xr[i] * xr[i];                                                                    \
            const double rstd = 1.0 / sqrt(ss / (double)g.c + eps);                                             \
            for (int64_t i = 0; y && i < g.c; i++)                                                              \
                y[r * g.c + i] = (T)((double)xr[i] * rstd * w[i]);                                              \
            if (saved)                                                                                          \
                saved[r] = (T)rstd;                                                                             \
        }                                                                                                       \
        return GE2_OK;                                                                                          \
    }

/* in: dy, x [rows, C], weight [C], saved [rows]; out: dx = rstd · (g - x̂ · mean(g·x̂)), g = dy·w,
 * dweight [C] = Σ_rows dy·x̂ */
#define RMS_NORM_GRAD(T, SUF)                                                                                     \
    static ge2_status rms_norm_grad_##SUF(const ge2_launch *l)                                                  \
    {                                                                                                           \
        const T *dy = l->in[0].data, *x = l->in[1].data, *w = l->in[2].data, *saved = l->in[3].data;            \
        T *dx = l->out[0].data, *dw = l->out[1].data;                                                           \
        const ge2_ln_geom g = ge2_ln_geom_of(l->in[1].shape);                                                   \
        for (int64_t r = 0; dx && r < g.rows; r++) {                                                            \
            const double rstd = saved[r];                                                                       \
            double sgx = 0;                                                                                     \
            for (int64_t i = 0; i < g.c; i++)                                                                   \
                sgx += (double)dy[r * g.c + i] * w[i] * ((double)x[r * g.c + i] * rstd);                        \
            for (int64_t i = 0; i < g.c; i++) {                                                                 \
                const double gi = (double)dy[r * g.c + i] * w[i], xh = (double)x[r * g.c + i] * rstd;           \
                dx[r * g.c + i] = (T)(rstd * (gi - xh * sgx / (double)g.c));                                    \
            }                                                                                                   \
        }                                                                                                       \
        for (int64_t i = 0; dw && i < g.c; i++) {                                                               \
            double s = 0;                                                                                       \
            for (int64_t r = 0; r < g.rows; r++)                                                                \
                s += (double)dy[r * g.c + i] * x[r * g.c + i] * saved[r];                                       \
            dw[i] = (T)s;                                                                                       \
        }                                                                                                       \
        return GE2_OK;                                                                                          \
    }

GE2_CPU_DEFINE_BOTH(RMS_NORM)
GE2_CPU_DEFINE_BOTH(RMS_NORM_GRAD)

ge2_status ge2_cpu_rms_norm(const ge2_launch *l) { return GE2_CPU_DISPATCH(rms_norm, l, l->in[0].dtype); }
ge2_status ge2_cpu_rms_norm_grad(const ge2_launch *l) { return GE2_CPU_DISPATCH(rms_norm_grad, l, l->in[1].dtype); }
