/* Reductions: SUM and MEAN over one axis or all elements, and the
 * broadcast pair EXPAND / REDUCE_TO that their backward (and broadcasting
 * ops' backward) use. Sums accumulate in double. */
#include "kernels/cpu/cpu_util.h"
#include "ops/reduce/reduce.h"

/* in: x; out: y [x without axis] or [] (GE2_AXIS_ALL) */
#define REDUCE(T, SUF)                                                                                            \
    static ge2_status reduce_##SUF(const ge2_launch *l)                                                         \
    {                                                                                                           \
        const T *x = l->in[0].data;                                                                             \
        T *y = l->out[0].data;                                                                                  \
        if (!y)                                                                                                 \
            return GE2_OK;                                                                                      \
        ge2_shape s = l->in[0].shape;                                                                           \
        int axis = GE2_ATTRS(ge2_reduce_attrs, l->node->attrs)->axis;                                                                  \
        int64_t outer = 1, len = ge2_shape_numel(s), inner = 1;                                                 \
        if (axis != GE2_AXIS_ALL)                                                                               \
            ge2_cpu_split_axis(s, axis, &outer, &len, &inner);                                                  \
        double scale = l->node->op == GE2_OP_MEAN ? 1.0 / (double)len : 1.0;                                    \
        for (int64_t o = 0; o < outer; o++)                                                                     \
            for (int64_t i = 0; i < inner; i++) {                                                               \
                double acc = 0;                                                                                 \
                for (int64_t k = 0; k < len; k++)                                                               \
                    acc += x[(o * len + k) * inner + i];                                                        \
                y[o * inner + i] = (T)(acc * scale);                                                            \
            }                                                                                                   \
        return GE2_OK;                                                                                          \
    }

/* scale, divided by the broadcast factor numel(big) / numel(small) when attrs.mean */
static double expand_scale(const ge2_launch *l, ge2_shape small, ge2_shape big)
{
    const ge2_expand_attrs *a = GE2_ATTRS(ge2_expand_attrs, l->node->attrs);
    return a->mean ? a->scale * (double)ge2_shape_numel(small) / (double)ge2_shape_numel(big) : a->scale;
}

/* in: x (broadcasts to like), like (shape only); out: y [like's shape] = x broadcast * scale */
#define EXPAND(T, SUF)                                                                                            \
    static ge2_status expand_##SUF(const ge2_launch *l)                                                         \
    {                                                                                                           \
        const T *x = l->in[0].data;                                                                             \
        T *y = l->out[0].data;                                                                                  \
        if (!y)                                                                                                 \
            return GE2_OK;                                                                                      \
        ge2_shape so = l->out[0].shape;                                                                         \
        int64_t n = ge2_shape_numel(so);                                                                        \
        ge2_cpu_odometer o;                                                                                     \
        ge2_cpu_odometer_init(&o, so, l->in[0].shape, so);                                                      \
        T scale = (T)expand_scale(l, l->in[0].shape, so);                                                       \
        for (int64_t i = 0; i < n; i++, ge2_cpu_odometer_next(&o))                                              \
            y[i] = x[o.off[0]] * scale;                                                                         \
        return GE2_OK;                                                                                          \
    }

/* in: x, like (broadcasts to x; shape only); out: y [like's shape] = x summed over the broadcast dims * scale */
#define REDUCE_TO(T, SUF)                                                                                         \
    static ge2_status reduce_to_##SUF(const ge2_launch *l)                                                      \
    {                                                                                                           \
        const T *x = l->in[0].data;                                                                             \
        T *y = l->out[0].data;                                                                                  \
        if (!y)                                                                                                 \
            return GE2_OK;                                                                                      \
        ge2_shape sx = l->in[0].shape, so = l->out[0].shape;                                                    \
        int64_t n = ge2_shape_numel(sx), m = ge2_shape_numel(so);                                               \
        ge2_cpu_odometer o;                                                                                     \
        ge2_cpu_odometer_init(&o, sx, so, sx);                                                                  \
        T scale = (T)expand_scale(l, so, sx);                                                                   \
        for (int64_t j = 0; j < m; j++)                                                                         \
            y[j] = 0;                                                                                           \
        for (int64_t i = 0; i < n; i++, ge2_cpu_odometer_next(&o))                                              \
            y[o.off[0]] += x[i];                                                                                \
        for (int64_t j = 0; j < m; j++)                                                                         \
            y[j] *= scale;                                                                                      \
        return GE2_OK;                                                                                          \
    }

GE2_CPU_DEFINE_BOTH(REDUCE)
GE2_CPU_DEFINE_BOTH(EXPAND)
GE2_CPU_DEFINE_BOTH(REDUCE_TO)

ge2_status ge2_cpu_reduce(const ge2_launch *l) { return GE2_CPU_DISPATCH(reduce, l, l->in[0].dtype); }
ge2_status ge2_cpu_expand(const ge2_launch *l) { return GE2_CPU_DISPATCH(expand, l, l->in[0].dtype); }
ge2_status ge2_cpu_reduce_to(const ge2_launch *l) { return GE2_CPU_DISPATCH(reduce_to, l, l->in[0].dtype); }
