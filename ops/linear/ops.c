/* The definitions of the linear family's ops: one struct per op. */
#include "ops/linear/linear.h"

bool ge2_linear_stores_bf16(const ge2_node *node, int output)
{
    const ge2_linear_attrs *a = GE2_ATTRS(ge2_linear_attrs, node->attrs);
    const bool stash = node->n_outputs > 1, z = ge2_linear_stash_of(a->act, a->slope) == GE2_STASH_Z;
    return (output == 0 && (!stash || z)) || (output == 1 && stash && z); /* (relu's bit-mask: y stays f32) */
}

/* x, w[, b] -> y[, stash] (ge2_linear_stash_of: z, or relu's bit-mask) */
const ge2_op_def ge2_op_def_linear = {
    .name = "linear",
    .min_inputs = 2,
    .max_inputs = 3,
    .max_outputs = 2,
    .flags = GE2_OPF_BF16_OPERANDS,
    .infer = ge2_infer_LINEAR,
    .backward = ge2_backward_linear,
    .cpu = ge2_cpu_linear,
    .cuda = {ge2_cuda_linear_prepare, ge2_cuda_linear_launch, ge2_cuda_linear_release, ge2_cuda_linear_describe,
             ge2_cuda_gemm_bf16_scratch_bytes},
    .stores_bf16 = ge2_linear_stores_bf16,
    .reads_bf16 = ge2_reads_bf16_input2, /* the bias, where the GEMM writes bf16 */
    .bf16_with_outputs = 1u << 2,        /* ... which is where y (and z) are bf16: ge2_linear_d_bf16 */
};

/* a, b -> op(a)·op(b) */
const ge2_op_def ge2_op_def_matmul = {
    .name = "matmul",
    .min_inputs = 2,
    .max_inputs = 2,
    .max_outputs = 1,
    .flags = GE2_OPF_BF16_OPERANDS,
    .infer = ge2_infer_MATMUL,
    .backward = ge2_backward_matmul,
    .cpu = ge2_cpu_matmul,
    .cuda = {ge2_cuda_matmul_prepare, ge2_cuda_matmul_launch, ge2_cuda_matmul_release, ge2_cuda_matmul_describe,
             ge2_cuda_gemm_bf16_scratch_bytes},
    .stores_bf16 = ge2_stores_bf16_output0, /* y, where every reader reads it in bf16 (a tied head's logits) */
};

/* dx, and act(z) when made again: the post step rounds them */
bool ge2_linear_grad_input_stores_bf16_with(const ge2_node *node, int output, int again)
{
    (void)node;
    return output == 0 || output == again;
}

static bool grad_input_stores_bf16(const ge2_node *node, int output)
{
    return ge2_linear_grad_input_stores_bf16_with(node, output, -1);
}

/* With act(z) made again, dx may take over z's memory where z is read
 * last: the kernels write dz·w into act(z)'s tensor first (the CPU's GEMM
 * and cuBLASLt's), then read z, dz·w beside it, and write dx and act(z)
 * element by element. The three must share a dtype (one size, and the
 * GEMM's result fits act(z)'s tensor), and act(z) must have memory in the
 * key (the planner checks). In a GPT this is the MLP's widest tensor, live
 * at the backward's peak. */
int ge2_linear_grad_input_over_z_with(const ge2_graph *graph, const ge2_node *node, int again)
{
    if (again < 0 || node->n_inputs < 3)
        return -1;
    const ge2_dtype dx = graph->tensors[node->outputs[0]]->dtype;
    const bool same = graph->tensors[node->inputs[2]]->dtype == dx && graph->tensors[node->outputs[again]]->dtype == dx;
    return same ? 2 : -1;
}

/* dz [B,out], w [out,in][, saved] -> (dz·w) ⊙ act'(saved) [B,in][, its column sums [in]] */
const ge2_op_def ge2_op_def_linear_grad_input = {
    .name = "linear_grad_input",
    .min_inputs = 2,
    .max_inputs = 3,
    .max_outputs = 2,
    .flags = GE2_OPF_BF16_OPERANDS,
    .infer = ge2_infer_LINEAR_GRAD_INPUT,
    .backward = NULL,
    .cpu = ge2_cpu_linear_grad_input,
    .cuda = {ge2_cuda_linear_grad_input_prepare, ge2_cuda_linear_grad_input_launch, ge2_cuda_linear_release, ge2_cuda_linear_describe,
             ge2_cuda_gemm_bf16_scratch_bytes},
    .stores_bf16 = grad_input_stores_bf16,
    .reads_bf16 = ge2_reads_bf16_input2, /* the saved z or y (not relu's bit-mask) */
};

/* dz [B,out], x [B,in] -> dzᵀ·x [out,in][, column sums of dz [out]] */
const ge2_op_def ge2_op_def_linear_grad_weight = {
    .name = "linear_grad_weight",
    .min_inputs = 2,
    .max_inputs = 2,
    .max_outputs = 2,
    .flags = GE2_OPF_BF16_OPERANDS,
    .infer = ge2_infer_LINEAR_GRAD_WEIGHT,
    .backward = NULL,
    .cpu = ge2_cpu_linear_grad_weight,
    .cuda = {ge2_cuda_linear_grad_weight_prepare, ge2_cuda_linear_grad_weight_launch, ge2_cuda_linear_release, ge2_cuda_linear_describe,
             ge2_cuda_gemm_bf16_scratch_bytes},
};
