/* BATCH_NORM, LAYER_NORM and their backward ops on the CPU; sums in double. */
#include <math.h>

#include "kernels/cpu/cpu_util.h"
#include "ops/norm/norm.h"

/* in: x [N, C, inner], weight [C], bias [C], running_mean [C], running_var [C][, num_batches_tracked i64]
 * out: y [N, C, inner] (max(0, ·) with relu), saved [2, C] (mean, rstd). A train step also updates the
 * running statistics. */
#define BATCH_NORM(T, SUF)                                                                                        \
    static ge2_status batch_norm_##SUF(const ge2_launch *l, bool relu)                                          \
    {                                                                                                           \
        const T *x = l->in[0].data, *w = l->in[1].data, *b = l->in[2].data;                                     \
        T *run_mean = l->in[3].data, *run_var = l->in[4].data;                                                  \
        T *y = l->out[0].data, *saved = l->n_out > 1 ? l->out[1].data : NULL;                                   \
        ge2_bn_geom g = ge2_bn_geom_of(l->in[0].shape);                                                         \
        double eps = GE2_ATTRS(ge2_batch_norm_attrs, l->node->attrs)->eps, momentum = GE2_ATTRS(ge2_batch_norm_attrs, l->node->attrs)->momentum;              \
        for (int64_t c = 0; c < g.c; c++) {                                                                     \
            double mean, var;                                                                                   \
            if (l->training) {                                                                                  \
                double s = 0, ss = 0;                                                                           \
                for (int64_t n = 0; n < g.n; n++)                                                               \
                    for (int64_t i = 0; i < g.inner; i++)                                                       \
                        s += x[(n * g.c + c) * g.inner + i];                                                    \
                mean = s / (double)g.m;                                                                         \
                for (int64_t n = 0; n < g.n; n++)                                                               \
                    for (int64_t i = 0; i < g.inner; i++) {                                                     \
                        double d = x[(n * g.c + c) * g.inner + i] - mean;                                       \
                        ss += d * d;                                                                            \
                    }                                                                                           \
                var = ss / (double)g.m;                                                                         \
                run_mean[c] = (T)((1 - momentum) * run_mean[c] + momentum * mean);                              \
                run_var[c] = (T)((1 - momentum) * run_var[c] + momentum * var * ge2_bn_unbias(g.m));            \
            } else {                                                                                            \
                mean = run_mean[c];                                                                             \
                var = run_var[c];                                                                               \
            }                                                                                                   \
            double rstd = 1.0 / sqrt(var + eps);                                                                \
            if (saved) {                                                                                        \
                saved[c] = (T)mean;                                                                             \
                saved[g.c + c] = (T)rstd;                                                                       \
            }                                                                                                   \
            for (int64_t n = 0; y && n < g.n; n++)                                                              \
                for (int64_t i = 0; i < g.inner; i++) {                                                         \
                    int64_t at = (n * g.c + c) * g.inner + i;                                                   \
                    double v = (x[at] - mean) * rstd * w[c] + b[c];                                             \
                    y[at] = (T)(relu && !(v > 0) ? 0 : v);                                                      \
                }                                                                                               \
        }                                                                                                       \
        if (l->training && l->n_in > 5) /* unsigned: a checkpoint's huge count wraps, defined */             \
            *(int64_t *)l->in[5].data = (int64_t)((uint64_t) * (int64_t *)l->in[5].data + 1u);                 \
        return GE2_OK;                                                                                          \
    }

/* dy where the relu'd y (fusion/bn_relu's ops give it) is positive, else 0 */
#define GE2_BN_DY(dy, y, at) ((y) && !((y)[at] > 0) ? 0.0 : (double)(dy)[at])

/* in: dy [N, C, inner], x [N, C, inner], saved [2, C]; out: dweight [C] = Σ dy·x̂, dbias [C] = Σ dy
 * (dy taken where relu_y > 0 when relu_y is given) */
#define BATCH_NORM_GRAD_PARAMS(T, SUF)                                                                            \
    static ge2_status batch_norm_grad_params_##SUF(const ge2_launch *l, const void *relu_y)                     \
    {                                                                                                           \
        const T *dy = l->in[0].data, *x = l->in[1].data, *saved = l->in[2].data, *y = relu_y;                  \
        T *dw = l->out[0].data, *db = l->out[1].data;                                                           \
        ge2_bn_geom g = ge2_bn_geom_of(l->in[1].shape);                                                         \
        for (int64_t c = 0; c < g.c; c++) {                                                                     \
            double sw = 0, sb = 0;                                                                              \
            for (int64_t n = 0; n < g.n; n++)                                                                   \
                for (int64_t i = 0; i < g.inner; i++) {                                                         \
                    int64_t at = (n * g.c + c) * g.inner + i;                                                   \
                    double d = GE2_BN_DY(dy, y, at);                                                            \
                    sw += d * ((double)x[at] - saved[c]) * saved[g.c + c];                                      \
                    sb += d;                                                                                    \
                }                                                                                               \
            if (dw)                                                                                             \
                dw[c] = (T)sw;                                                                                  \
            if (db)                                                                                             \
                db[c] = (T)sb;                                                                                  \
        }                                                                                                       \
        return GE2_OK;                                                                                          \
    }

/* in: dy, x [N, C, inner], weight [C], saved [2, C], dweight [C], dbias [C]; out: dx [N, C, inner]
 * dx = weight · rstd / m · (m · dy - dbias - x̂ · dweight) (dy taken where relu_y > 0 when given) */
#define BATCH_NORM_GRAD_INPUT(T, SUF)                                                                             \
    static ge2_status batch_norm_grad_input_##SUF(const ge2_launch *l, const void *relu_y)                      \
    {                                                                                                           \
        const T *dy = l->in[0].data, *x = l->in[1].data, *w = l->in[2].data, *saved = l->in[3].data;            \
        const T *dw = l->in[4].data, *db = l->in[5].data, *y = relu_y;                                          \
        T *dx = l->out[0].data;                                                                                 \
        ge2_bn_geom g = ge2_bn_geom_of(l->in[1].shape);                                                         \
        for (int64_t n = 0; dx && n < g.n; n++)                                                                 \
            for (int64_t c = 0; c < g.c; c++) {                                                                 \
                double mean = saved[c], rstd = saved[g.c + c], k = (double)w[c] * rstd / (double)g.m;           \
                for (int64_t i = 0; i < g.inner; i++) {                                                         \
                    int64_t at = (n * g.c + c) * g.inner + i;                                                   \
                    double xhat = ((double)x[at] - mean) * rstd;                                                \
                    dx[at] = (T)(k * ((double)g.m * GE2_BN_DY(dy, y, at) - db[c] - xhat * dw[c]));               \
                }                                                                                               \
            }                                                                                                   \
        return GE2_OK;                                                                                          \
    }

/* in: x [rows, C], weight [C][, bias [C]]; out: y, saved [2, rows] (mean, rstd) */
#define LAYER_NORM(T, SUF)                                                                                        \
    static ge2_status layer_norm_##SUF(const ge2_launch *l)                                                     \
    {                                                                                                           \
        const T *x = l->in[0].data, *w = l->in[1].data, *b = l->n_in > 2 ? l->in[2].data : NULL;                \
        T *y = l->out[0].data, *saved = l->n_out > 1 ? l->out[1].data : NULL;                                   \
        ge2_ln_geom g = ge2_ln_geom_of(l->in[0].shape);                                                         \
        const double eps = GE2_ATTRS(ge2_layer_norm_attrs, l->node->attrs)->eps;                                                       \
        for (int64_t r = 0; r < g.rows; r++) {                                                                  \
            const T *xr = x + r * g.c;                                                                          \
            double mean = 0, var = 0;                                                                           \
            for (int64_t i = 0; i < g.c; i++)                                                                   \
                mean += xr[i];                                                                                  \
            mean /= (double)g.c;                                                                                \
            for (int64_t i = 0; i < g.c; i++)                                                                   \
                var += ((double)xr[i] - mean) * ((double)xr[i] - mean);                                         \
            const double rstd = 1.0 / sqrt(var / (double)g.c + eps);                                            \
            for (int64_t i = 0; y && i < g.c; i++)                                                              \
                y[r * g.c + i] = (T)(((double)xr[i] - mean) * rstd * w[i] + (b ? (double)b[i] : 0.0));          \
            if (saved) {                                                                                        \
                saved[r] = (T)mean;                                                                             \
                saved[g.rows + r] = (T)rstd;                                                                    \
            }                                                                                                   \
        }                                                                                                       \
        return GE2_OK;                                                                                          \
    }

/* in: dy, x [rows, C], saved [2, rows]; out: dweight [C] = Σ_rows dy·x̂, dbias [C] = Σ_rows dy */
#define LAYER_NORM_GRAD_PARAMS(T, SUF)                                                                            \
    static ge2_status layer_norm_grad_params_##SUF(const ge2_launch *l)                                         \
    {                                                                                                           \
        const T *dy = l->in[0].data, *x = l->in[1].data, *saved = l->in[2].data;                                \
        T *dw = l->out[0].data, *db = l->out[1].data;                                                           \
        ge2_ln_geom g = ge2_ln_geom_of(l->in[1].shape);                                                         \
        for (int64_t i = 0; i < g.c; i++) {                                                                     \
            double sw = 0, sb = 0;                                                                              \
            for (int64_t r = 0; r < g.rows; r++) {                                                              \
                const double d = dy[r * g.c + i];                                                               \
                sw += d * ((double)x[r * g.c + i] - saved[r]) * saved[g.rows + r];                              \
                sb += d;                                                                                        \
            }                                                                                                   \
            if (dw)                                                                                             \
                dw[i] = (T)sw;                                                                                  \
            if (db)                                                                                             \
                db[i] = (T)sb;                                                                                  \
        }                                                                                                       \
        return GE2_OK;                                                                                          \
    }

/* in: dy, x [rows, C], weight [C], saved [2, rows]; out: dx = rstd · (g - mean(g) - x̂ · mean(g·x̂)), g = dy·w */
#define LAYER_NORM_GRAD_INPUT(T, SUF)                                                                             \
    static ge2_status layer_norm_grad_input_##SUF(const ge2_launch *l)                                          \
    {                                                                                                           \
        const T *dy = l->in[0].data, *x = l->in[1].data, *w = l->in[2].data, *saved = l->in[3].data;            \
        const T *plus = l->n_in > 4 ? l->in[4].data : NULL;                                                     \
        T *dx = l->out[0].data;                                                                                 \
        ge2_ln_geom g = ge2_ln_geom_of(l->in[1].shape);                                                         \
        for (int64_t r = 0; dx && r < g.rows; r++) {                                                            \
            const double mean = saved[r], rstd = saved[g.rows + r];                                             \
            double sg = 0, sgx = 0;                                                                             \
            for (int64_t i = 0; i < g.c; i++) {                                                                 \
                const double gi = (double)dy[r * g.c + i] * w[i], xh = ((double)x[r * g.c + i] - mean) * rstd;  \
                sg += gi;                                                                                       \
                sgx += gi * xh;                                                                                 \
            }                                                                                                   \
            for (int64_t i = 0; i < g.c; i++) {                                                                 \
                const double gi = (double)dy[r * g.c + i] * w[i], xh = ((double)x[r * g.c + i] - mean) * rstd;  \
                const T v = (T)(rstd * (gi - sg / (double)g.c - xh * sgx / (double)g.c));                       \
                dx[r * g.c + i] = plus ? plus[r * g.c + i] + v : v; /* v rounded first, as apart */             \
            }                                                                                                   \
        }                                                                                                       \
        return GE2_OK;                                                                                          \
    }

GE2_CPU_DEFINE_BOTH(BATCH_NORM)
GE2_CPU_DEFINE_BOTH(BATCH_NORM_GRAD_PARAMS)
GE2_CPU_DEFINE_BOTH(BATCH_NORM_GRAD_INPUT)
GE2_CPU_DEFINE_BOTH(LAYER_NORM)
GE2_CPU_DEFINE_BOTH(LAYER_NORM_GRAD_PARAMS)
GE2_CPU_DEFINE_BOTH(LAYER_NORM_GRAD_INPUT)

ge2_status ge2_cpu_batch_norm_with(const ge2_launch *l, bool relu)
{
    const ge2_dtype t = l->in[0].dtype;
    return t == GE2_F64 ? batch_norm_f64(l, relu) : t == GE2_F32 ? batch_norm_f32(l, relu) : ge2_cpu_bad_dtype(l, t);
}
ge2_status ge2_cpu_batch_norm_grad_params_with(const ge2_launch *l, const void *relu_y)
{
    const ge2_dtype t = l->in[1].dtype;
    return t == GE2_F64   ? batch_norm_grad_params_f64(l, relu_y)
           : t == GE2_F32 ? batch_norm_grad_params_f32(l, relu_y)
                          : ge2_cpu_bad_dtype(l, t);
}
ge2_status ge2_cpu_batch_norm_grad_input_with(const ge2_launch *l, const void *relu_y)
{
    const ge2_dtype t = l->in[1].dtype;
    return t == GE2_F64   ? batch_norm_grad_input_f64(l, relu_y)
           : t == GE2_F32 ? batch_norm_grad_input_f32(l, relu_y)
                          : ge2_cpu_bad_dtype(l, t);
}
ge2_status ge2_cpu_batch_norm(const ge2_launch *l) { return ge2_cpu_batch_norm_with(l, false); }
ge2_status ge2_cpu_batch_norm_grad_params(const ge2_launch *l) { return ge2_cpu_batch_norm_grad_params_with(l, NULL); }
ge2_status ge2_cpu_batch_norm_grad_input(const ge2_launch *l) { return ge2_cpu_batch_norm_grad_input_with(l, NULL); }
ge2_status ge2_cpu_layer_norm(const ge2_launch *l) { return GE2_CPU_DISPATCH(layer_norm, l, l->in[0].dtype); }
ge2_status ge2_cpu_layer_norm_grad_params(const ge2_launch *l)
{
    return GE2_CPU_DISPATCH(layer_norm_grad_params, l, l->in[1].dtype);
}
ge2_status ge2_cpu_layer_norm_grad_input(const ge2_launch *l)
{
    return GE2_CPU_DISPATCH(layer_norm_grad_input, l, l->in[1].dtype);
}
