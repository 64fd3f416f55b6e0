/* DROPOUT and DROPOUT_BACKWARD on the CPU: the same masking (a train
 * step's; an eval step copies), plus the forward's optional addend. */
#include <string.h>

#include "kernels/cpu/cpu_util.h"
#include "ops/dropout/dropout.h"

#define DROPOUT(T, SUF)                                                                                           \
    static ge2_status dropout_##SUF(const ge2_launch *l)                                                        \
    {                                                                                                           \
        const T *x = l->in[0].data, *plus = l->n_in > 1 ? l->in[1].data : NULL;                                 \
        T *y = l->out[0].data;                                                                                  \
        const int64_t n = ge2_shape_numel(l->in[0].shape);                                                      \
        const ge2_dropout_attrs *a = GE2_ATTRS(ge2_dropout_attrs, l->node->attrs);                                                   \
        if (!y)                                                                                                 \
            return GE2_OK;                                                                                      \
        if (ge2_dropout_step_p(l) == 0) {                                                                       \
            for (int64_t i = 0; plus && i < n; i++)                                                             \
                y[i] = plus[i] + x[i];                                                                          \
            if (!plus && y != x)                                                                                \
                memmove(y, x, sizeof(T) * (size_t)n);                                                           \
            return GE2_OK;                                                                                      \
        }                                                                                                       \
        const uint64_t seed = l->control->rng_seed, offset = l->control->rng_offset;                            \
        const float p = (float)a->p, scale = ge2_dropout_scale(a->p);                                           \
        for (int64_t g = 0; 4 * g < n; g++) {                                                                   \
            const ge2_philox4 r = ge2_philox_step_draw(seed, offset, a->stream, (uint64_t)g);                       \
            for (int64_t i = 4 * g; i < n && i < 4 * g + 4; i++) {                                              \
                const T kept = ge2_dropout_kept(r.v[i % 4], p) ? (T)(x[i] * (T)scale) : (T)0;                  \
                y[i] = plus ? plus[i] + kept : kept; /* the masked value rounded first, as alone */            \
            }                                                                                                   \
        }                                                                                                       \
        return GE2_OK;                                                                                          \
    }

GE2_CPU_DEFINE_BOTH(DROPOUT)

ge2_status ge2_cpu_dropout(const ge2_launch *l)
{
    if (l->training && !l->control)
        return ge2_error(GE2_ERR_STATE, "ge2_%s (node %d): a train step without the control block",
                         ge2_op_name(l->node->op), l->node->id);
    return GE2_CPU_DISPATCH(dropout, l, l->in[0].dtype);
}
