/* The definitions of the attention family's ops: one struct per op. */
#include "ops/attention/attention.h"

/* q, k, v or qkv (from input 0 of the forward, 1 of the backward) and the
 * backward's y may be bf16 tensors: cuDNN's attention reads them
 * in place, the fp32 kernels widen them into the scratch, the CPU's read
 * widened copies */
bool ge2_attention_reads_bf16(const ge2_node *node, int input)
{
    const ge2_attn_slots s = ge2_attn_slots_of(node, (ge2_attn_geom){0});
    return input == s.q || input == s.k || input == s.v || (node->op == GE2_OP_ATTENTION_GRAD && input == s.y);
}

/* packed, dqkv: the GEMMs of the projection read it, cuDNN writes it in
 * bf16 anyway and the fp32 kernels round after (three tensors dq, dk, dv
 * go to a concat, which reads f32) */
static bool attention_grad_stores_bf16(const ge2_node *node, int output)
{
    return GE2_ATTRS(ge2_attention_attrs, node->attrs)->packed && output == 0;
}

/* with dropout on, both ops draw the step's masks (attention.h) */
static bool attention_draws_random(const ge2_node *node) { return GE2_ATTRS(ge2_attention_attrs, node->attrs)->dropout > 0; }

/* q, k, v (packed: qkv) -> y, lse */
const ge2_op_def ge2_op_def_attention = {
    .name = "attention",
    .min_inputs = 1,
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
    .draws_random = attention_draws_random,
};

/* dy, q, k, v, y, lse -> dq, dk, dv (packed: dy, qkv, y, lse -> dqkv) */
const ge2_op_def ge2_op_def_attention_grad = {
    .name = "attention_grad",
    .min_inputs = 4,
    .max_inputs = 6,
    .max_outputs = 3,
    .flags = 0,
    .infer = ge2_infer_ATTENTION_GRAD,
    .backward = NULL,
    .cpu = ge2_cpu_attention_grad,
    .cuda = {ge2_cuda_attention_prepare, ge2_cuda_attention_grad_launch, ge2_cudnn_attention_release,
             ge2_cuda_attention_describe, ge2_cuda_attention_scratch_bytes},
    .stores_bf16 = attention_grad_stores_bf16,
    .reads_bf16 = ge2_attention_reads_bf16,
    .draws_random = attention_draws_random,
};
