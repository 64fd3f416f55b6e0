/* The broadcasting binaries (ADD, SUB, MUL), SCALE, and the activation
 * forward and backward. */
#include "kernels/activation_math.h"
#include "kernels/cpu/cpu_util.h"
#include "ops/elementwise/elementwise.h"

/* in: a, b (broadcast against each other); out: y [broadcast shape] */
#define BINARY(T, SUF)                                                                                            \
    static ge2_status binary_##SUF(const ge2_launch *l)                                                         \
    {                                                                                                           \
        const T *a = l->in[0].data, *b = l->in[1].data;                                                         \
        T *y = l->out[0].data;                                                                                  \
        if (!y)                                                                                                 \
            return GE2_OK;                                                                                      \
        int64_t n = ge2_shape_numel(l->out[0].shape);                                                           \
        ge2_cpu_odometer o;                                                                                     \
        ge2_cpu_odometer_init(&o, l->out[0].shape, l->in[0].shape, l->in[1].shape);                             \
        ge2_op op = l->node->op;                                                                                \
        for (int64_t i = 0; i < n; i++, ge2_cpu_odometer_next(&o)) {                                            \
            T u = a[o.off[0]], v = b[o.off[1]];                                                                 \
            y[i] = op == GE2_OP_ADD ? u + v : op == GE2_OP_SUB ? u - v : u * v;                                 \
        }                                                                                                       \
        return GE2_OK;                                                                                          \
    }

/* in: x; out: y [x's shape] = alpha * x */
#define SCALE(T, SUF)                                                                                             \
    static ge2_status scale_##SUF(const ge2_launch *l)                                                          \
    {                                                                                                           \
        const T *x = l->in[0].data;                                                                             \
        T *y = l->out[0].data, alpha = (T)GE2_ATTRS(ge2_scale_attrs, l->node->attrs)->alpha;                                           \
        int64_t n = ge2_shape_numel(l->in[0].shape);                                                            \
        for (int64_t i = 0; y && i < n; i++)                                                                    \
            y[i] = alpha * x[i];                                                                                \
        return GE2_OK;                                                                                          \
    }

/* in: z; out: y [z's shape] = act(z) */
#define ACTIVATION(T, SUF)                                                                                        \
    static ge2_status activation_##SUF(const ge2_launch *l)                                                     \
    {                                                                                                           \
        const T *z = l->in[0].data;                                                                             \
        T *y = l->out[0].data;                                                                                  \
        const ge2_act_attrs *at = GE2_ATTRS(ge2_act_attrs, l->node->attrs);                                                          \
        int64_t n = ge2_shape_numel(l->in[0].shape);                                                            \
        for (int64_t i = 0; y && i < n; i++)                                                                    \
            y[i] = ge2_act_##SUF(at->act, z[i], at->slope);                                                     \
        return GE2_OK;                                                                                          \
    }

/* in: dy, saved (z, or y when from_output), same shape; out: dz = dy * act'(z) */
#define ACTIVATION_BACKWARD(T, SUF)                                                                               \
    static ge2_status activation_backward_##SUF(const ge2_launch *l)                                            \
    {                                                                                                           \
        const T *dy = l->in[0].data, *saved = l->in[1].data;                                                    \
        T *dz = l->out[0].data;                                                                                 \
        const ge2_act_attrs *at = GE2_ATTRS(ge2_act_attrs, l->node->attrs);                                                          \
        int64_t n = ge2_shape_numel(l->in[0].shape);                                                            \
        for (int64_t i = 0; dz && i < n; i++)                                                                   \
            dz[i] = dy[i] * ge2_act_grad_##SUF(at->act, saved[i], at->from_output, at->slope);                  \
        return GE2_OK;                                                                                          \
    }

GE2_CPU_DEFINE_BOTH(BINARY)
GE2_CPU_DEFINE_BOTH(SCALE)
GE2_CPU_DEFINE_BOTH(ACTIVATION)
GE2_CPU_DEFINE_BOTH(ACTIVATION_BACKWARD)

ge2_status ge2_cpu_binary(const ge2_launch *l) { return GE2_CPU_DISPATCH(binary, l, l->in[0].dtype); }
ge2_status ge2_cpu_scale(const ge2_launch *l) { return GE2_CPU_DISPATCH(scale, l, l->in[0].dtype); }
ge2_status ge2_cpu_activation(const ge2_launch *l) { return GE2_CPU_DISPATCH(activation, l, l->in[0].dtype); }
ge2_status ge2_cpu_activation_backward(const ge2_launch *l)
{
    return GE2_CPU_DISPATCH(activation_backward, l, l->in[0].dtype);
}
