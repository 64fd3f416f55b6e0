/* SOFTMAX and LOG_SOFTMAX over the last axis, and their backward ops. */
#include <math.h>

#include "kernels/cpu/cpu_util.h"
#include "ops/softmax/softmax.h"

/* in: x [..., C]; out: y [..., C] (softmax, or log-softmax) */
#define SOFTMAX(T, SUF)                                                                                           \
    static ge2_status softmax_##SUF(const ge2_launch *l)                                                        \
    {                                                                                                           \
        const T *x = l->in[0].data;                                                                             \
        T *y = l->out[0].data;                                                                                  \
        ge2_shape s = l->in[0].shape;                                                                           \
        int64_t c = s.dim[s.ndim - 1], rows = ge2_shape_numel(s) / c;                                           \
        bool log_out = l->node->op == GE2_OP_LOG_SOFTMAX;                                                       \
        for (int64_t r = 0; y && r < rows; r++) {                                                               \
            const T *xr = x + r * c;                                                                            \
            T *yr = y + r * c;                                                                                  \
            T mx = xr[0];                                                                                       \
            for (int64_t i = 1; i < c; i++)                                                                     \
                mx = xr[i] > mx ? xr[i] : mx;                                                                   \
            double sum = 0;                                                                                     \
            for (int64_t i = 0; i < c; i++)                                                                     \
                sum += exp((double)(xr[i] - mx));                                                               \
            T lse = (T)log(sum);                                                                                \
            for (int64_t i = 0; i < c; i++)                                                                     \
                yr[i] = log_out ? xr[i] - mx - lse : (T)(exp((double)(xr[i] - mx)) / sum);                      \
        }                                                                                                       \
        return GE2_OK;                                                                                          \
    }

/* in: dy [..., C], y [..., C] (the forward output); out: dx [..., C]
 * softmax:     dx = y * (dy - sum(dy * y))
 * log_softmax: dx = dy - exp(y) * sum(dy) */
#define SOFTMAX_BACKWARD(T, SUF)                                                                                  \
    static ge2_status softmax_backward_##SUF(const ge2_launch *l)                                               \
    {                                                                                                           \
        const T *dy = l->in[0].data, *y = l->in[1].data;                                                        \
        T *dx = l->out[0].data;                                                                                 \
        ge2_shape s = l->in[0].shape;                                                                           \
        int64_t c = s.dim[s.ndim - 1], rows = ge2_shape_numel(s) / c;                                           \
        bool log_out = l->node->op == GE2_OP_LOG_SOFTMAX_BACKWARD;                                              \
        for (int64_t r = 0; dx && r < rows; r++) {                                                              \
            const T *dyr = dy + r * c, *yr = y + r * c;                                                         \
            double dot = 0;                                                                                     \
            for (int64_t i = 0; i < c; i++)                                                                     \
                dot += log_out ? (double)dyr[i] : (double)dyr[i] * yr[i];                                       \
            for (int64_t i = 0; i < c; i++)                                                                     \
                dx[r * c + i] = log_out ? dyr[i] - (T)(exp((double)yr[i]) * dot) : yr[i] * (dyr[i] - (T)dot);  \
        }                                                                                                       \
        return GE2_OK;                                                                                          \
    }

GE2_CPU_DEFINE_BOTH(SOFTMAX)
GE2_CPU_DEFINE_BOTH(SOFTMAX_BACKWARD)

ge2_status ge2_cpu_softmax(const ge2_launch *l) { return GE2_CPU_DISPATCH(softmax, l, l->in[0].dtype); }
ge2_status ge2_cpu_softmax_backward(const ge2_launch *l)
{
    return GE2_CPU_DISPATCH(softmax_backward, l, l->in[0].dtype);
}
