/* The definitions of the attention family's ops: one struct per op. */
#include "ops/attention/attention.h"

/* q, k, v (inputs 0-2 of the forward, 1-3 of the backward) and the
 * backward's y (input 4) may be bf16 tensors: cuDNN's attention reads them
 * in place, the fp32 kernels widen them into the scratch, the CPU's read
 * widened copies */
bool ge2_attention_reads_bf16(const ge2_node *node, int input)
{
    const bool backward = node->op == GE2_OP_ATTENTION_GRAD;
    const int q = backward ? 1 : 0;
    return (input >= q && input < q + 3) || (backward && input == 4);
}

/* q, k, v -> y, lse */
const ge2_op_def ge2_op_def_attention = {
    .name = "attention",
    .min_inputs = 3,
    .max_inputs = 3,
    .max_outputs = 2,
    .flags = 0,
    .infer = ge2_infer_ATTENTION,
    .backward = ge2_backward_attention,
    .cpu = ge2_cpu_attention,
    .cuda = {ge2_cuda_attention_prepare, ge2_cuda_attention_launch, ge2_cudnn_attention_release,
             ge2_cuda_attention_describe, ge2_cuda_attention_scratch_bytes},
    .stores_bf16 = ge2_stores_bf16_output0, /* y: cuDNN writes bf16 anyway, the fp32 kernels round after */
    .reads_bf16 = ge2_attention_reads_bf16,
};

/* dy, q, k, v, y, lse -> dq, dk, dv */
const ge2_op_def ge2_op_def_attention_grad = {
    .name = "attention_grad",
    .min_inputs = 6,
    .max_inputs = 6,
    .max_outputs = 3,
    .flags = 0,
    .infer = ge2_infer_ATTENTION_GRAD,
    .backward = NULL,
    .cpu = ge2_cpu_attention_grad,
    .cuda = {ge2_cuda_attention_prepare, ge2_cuda_attention_grad_launch, ge2_cudnn_attention_release,
             ge2_cuda_attention_describe, ge2_cuda_attention_scratch_bytes},
    .reads_bf16 = ge2_attention_reads_bf16,
};
