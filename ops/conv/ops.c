/* The definitions of the convolution family's ops: one struct per op. */
#include "ops/conv/conv.h"

/* Under precision BF16 each op multiplies bf16 operands with fp32 sums and
 * rounds its convolution to bf16, as cuDNN's bf16 engines write it
 * (docs/mixed-precision.md); the bias and its gradient stay fp32. */

/* x, w[, b] */
const ge2_op_def ge2_op_def_conv2d = {
    .name = "conv2d",
    .min_inputs = 2,
    .max_inputs = 3,
    .max_outputs = 1,
    .flags = GE2_OPF_BF16_OPERANDS,
    .infer = ge2_infer_CONV2D,
    .backward = ge2_backward_conv2d,
    .cpu = ge2_cpu_conv2d,
    .cuda = {ge2_cuda_conv2d_prepare, ge2_cuda_conv2d_launch, ge2_cuda_conv2d_release,
             ge2_cuda_conv2d_describe, ge2_cuda_conv2d_bf16_scratch_bytes},
    /* y in bf16 where only bf16 readers read it (batch norm, the next
     * convolution): cuDNN writes it there itself, the bias added after */
    .stores_bf16 = ge2_stores_bf16_output0,
};

/* dy, x (shape only), w */
const ge2_op_def ge2_op_def_conv2d_grad_input = {
    .name = "conv2d_grad_input",
    .min_inputs = 3,
    .max_inputs = 3,
    .max_outputs = 1,
    .flags = GE2_OPF_LIKE1 | GE2_OPF_BF16_OPERANDS,
    .operands = 1u << 0 | 1u << 2,
    .infer = ge2_infer_CONV2D_GRAD_INPUT,
    .backward = NULL,
    .cpu = ge2_cpu_conv2d_grad_input,
    .cuda = {ge2_cuda_conv2d_grad_input_prepare, ge2_cuda_conv2d_launch, ge2_cuda_conv2d_release,
             ge2_cuda_conv2d_describe, ge2_cuda_conv2d_bf16_scratch_bytes},
};

/* dy, w (shape only), x -> dw[, db] */
const ge2_op_def ge2_op_def_conv2d_grad_weight = {
    .name = "conv2d_grad_weight",
    .min_inputs = 3,
    .max_inputs = 3,
    .max_outputs = 2,
    .flags = GE2_OPF_LIKE1 | GE2_OPF_BF16_OPERANDS,
    .operands = 1u << 0 | 1u << 2,
    .infer = ge2_infer_CONV2D_GRAD_WEIGHT,
    .backward = NULL,
    .cpu = ge2_cpu_conv2d_grad_weight,
    .cuda = {ge2_cuda_conv2d_grad_weight_prepare, ge2_cuda_conv2d_launch, ge2_cuda_conv2d_release,
             ge2_cuda_conv2d_describe, ge2_cuda_conv2d_bf16_scratch_bytes},
};
