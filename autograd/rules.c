/* The backward rule of every op (NULL: the op has none, see rules.h). */
#include "autograd/rules.h"

const ge2_backward_rule ge2_backward_rules[GE2_OP_COUNT] = {
    [GE2_OP_LINEAR] = ge2_backward_linear,
    [GE2_OP_MATMUL] = ge2_backward_matmul,
    [GE2_OP_ADD] = ge2_backward_add_sub,
    [GE2_OP_SUB] = ge2_backward_add_sub,
    [GE2_OP_MUL] = ge2_backward_mul,
    [GE2_OP_SCALE] = ge2_backward_scale,
    [GE2_OP_ACTIVATION] = ge2_backward_activation,
    [GE2_OP_SOFTMAX] = ge2_backward_softmax,
    [GE2_OP_LOG_SOFTMAX] = ge2_backward_softmax,
    [GE2_OP_SUM] = ge2_backward_reduce,
    [GE2_OP_MEAN] = ge2_backward_reduce,
    [GE2_OP_RESHAPE] = ge2_backward_reshape,
    [GE2_OP_TRANSPOSE] = ge2_backward_transpose,
    [GE2_OP_CONCAT] = ge2_backward_concat,
    [GE2_OP_SLICE] = ge2_backward_slice,
    [GE2_OP_EXPAND] = ge2_backward_expand,
    [GE2_OP_REDUCE_TO] = ge2_backward_reduce_to,
    [GE2_OP_CROSS_ENTROPY] = ge2_backward_cross_entropy,
    [GE2_OP_MSE_LOSS] = ge2_backward_mse_loss,
    [GE2_OP_SLICE_BACKWARD] = ge2_backward_slice_backward,
};
