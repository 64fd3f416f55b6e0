/* The CUDA column of the op table: ge2_cuda_kernels[op] for every op.
 *
 * Designated initializers keyed by op, so a row cannot land on the wrong op;
 * tests/gpu/op_agreement_test.c iterates the table and fails on an empty row.
 * Family launchers serve several rows and read the op from the launch.
 */
#include "kernels/cuda/cuda_kernels.h"

#define GE2_CUDA_SIMPLE(fn) {NULL, fn, NULL, NULL}
#define GE2_CUDA_ELEMENTWISE(fn) {NULL, fn, NULL, ge2_cuda_elementwise_describe}
#define GE2_CUDA_REDUCE {NULL, ge2_cuda_reduce_launch, NULL, ge2_cuda_reduce_describe}
#define GE2_CUDA_GEMM(name) \
    {ge2_cuda_##name##_prepare, ge2_cuda_##name##_launch, ge2_cuda_##name##_release, ge2_cuda_##name##_describe}

#define GE2_CUDA_GEMM_BACKWARD(name) \
    {ge2_cuda_##name##_prepare, ge2_cuda_##name##_launch, ge2_cuda_linear_release, ge2_cuda_linear_describe}

const ge2_cuda_kernel ge2_cuda_kernels[GE2_OP_COUNT] = {
    [GE2_OP_LINEAR] = GE2_CUDA_GEMM(linear),
    [GE2_OP_MATMUL] = GE2_CUDA_GEMM(matmul),
    [GE2_OP_ADD] = GE2_CUDA_ELEMENTWISE(ge2_cuda_binary_launch),
    [GE2_OP_SUB] = GE2_CUDA_ELEMENTWISE(ge2_cuda_binary_launch),
    [GE2_OP_MUL] = GE2_CUDA_ELEMENTWISE(ge2_cuda_binary_launch),
    [GE2_OP_SCALE] = GE2_CUDA_ELEMENTWISE(ge2_cuda_scale_launch),
    [GE2_OP_ACTIVATION] = GE2_CUDA_ELEMENTWISE(ge2_cuda_activation_launch),
    [GE2_OP_SOFTMAX] = GE2_CUDA_SIMPLE(ge2_cuda_softmax_launch),
    [GE2_OP_LOG_SOFTMAX] = GE2_CUDA_SIMPLE(ge2_cuda_softmax_launch),
    [GE2_OP_SUM] = GE2_CUDA_REDUCE,
    [GE2_OP_MEAN] = GE2_CUDA_REDUCE,
    [GE2_OP_RESHAPE] = GE2_CUDA_SIMPLE(ge2_cuda_reshape_launch),
    [GE2_OP_TRANSPOSE] = GE2_CUDA_SIMPLE(ge2_cuda_transpose_launch),
    [GE2_OP_CONCAT] = GE2_CUDA_SIMPLE(ge2_cuda_concat_launch),
    [GE2_OP_SLICE] = GE2_CUDA_SIMPLE(ge2_cuda_slice_launch),
    [GE2_OP_EXPAND] = GE2_CUDA_ELEMENTWISE(ge2_cuda_expand_launch),
    [GE2_OP_REDUCE_TO] = GE2_CUDA_REDUCE,
    [GE2_OP_CROSS_ENTROPY] = GE2_CUDA_SIMPLE(ge2_cuda_cross_entropy_launch),
    [GE2_OP_MSE_LOSS] = GE2_CUDA_SIMPLE(ge2_cuda_mse_loss_launch),
    [GE2_OP_ACCURACY] = GE2_CUDA_SIMPLE(ge2_cuda_accuracy_launch),
    [GE2_OP_ACTIVATION_BACKWARD] = GE2_CUDA_ELEMENTWISE(ge2_cuda_activation_backward_launch),
    [GE2_OP_SOFTMAX_BACKWARD] = GE2_CUDA_SIMPLE(ge2_cuda_softmax_backward_launch),
    [GE2_OP_LOG_SOFTMAX_BACKWARD] = GE2_CUDA_SIMPLE(ge2_cuda_softmax_backward_launch),
    [GE2_OP_SLICE_BACKWARD] = GE2_CUDA_SIMPLE(ge2_cuda_slice_backward_launch),
    [GE2_OP_LINEAR_GRAD_INPUT] = GE2_CUDA_GEMM_BACKWARD(linear_grad_input),
    [GE2_OP_LINEAR_GRAD_WEIGHT] = GE2_CUDA_GEMM_BACKWARD(linear_grad_weight),
    [GE2_OP_GRAD_NORM] = GE2_CUDA_SIMPLE(ge2_cuda_grad_norm_launch),
    [GE2_OP_OPTIMIZER_UPDATE] = {NULL, ge2_cuda_optimizer_update_launch, NULL, ge2_cuda_optimizer_update_describe},
};
