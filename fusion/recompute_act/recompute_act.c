/* The recompute pattern's op (recompute_act.h): its definition, registered
 * when the library loads through the extension API's ge2_op_register, as a
 * user's op would be. Every part is the linear family's, with act(z) made
 * again into the last output. */
#include "fusion/recompute_act/recompute_act.h"

/* act(z) is the last output: after dx, or after dx and db */
static int again_of(const ge2_node *node) { return node->n_outputs - 1; }

static ge2_status infer(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    return ge2_infer_linear_grad_input_with(node, in, out, again_of(node));
}

static bool stores_bf16(const ge2_node *node, int output)
{
    return ge2_linear_grad_input_stores_bf16_with(node, output, again_of(node));
}

static int over_z(const ge2_graph *graph, const ge2_node *node)
{
    return ge2_linear_grad_input_over_z_with(graph, node, again_of(node));
}

static ge2_status cpu(const ge2_launch *l) { return ge2_cpu_linear_grad_input_with(l, l->n_out - 1); }

static ge2_status cuda_prepare(ge2_launch *l) { return ge2_cuda_linear_grad_input_prepare_with(l, l->n_out - 1); }

/* dz [B,out], w [out,in], z [B,in] -> (dz·w) ⊙ act'(z) [B,in][, its column sums [in]], act(z) [B,in] */
static const ge2_op_def linear_grad_input_recompute_def = {
    .name = "linear_grad_input_recompute",
    .min_inputs = 3,
    .max_inputs = 3,
    .max_outputs = 3,
    .flags = GE2_OPF_BF16_OPERANDS,
    .infer = infer,
    .backward = NULL, /* a backward op */
    .cpu = cpu,
    .cuda = {cuda_prepare, ge2_cuda_linear_grad_input_launch, ge2_cuda_linear_release, ge2_cuda_linear_describe,
             ge2_cuda_gemm_bf16_scratch_bytes},
    .stores_bf16 = stores_bf16,
    .reads_bf16 = ge2_reads_bf16_input2, /* z */
    .output_over_input = over_z,
};

static ge2_op recompute_op = -1;

ge2_op ge2_op_linear_grad_input_recompute(void) { return recompute_op; }

/* After the built-in ops (their ids come first); a failure leaves the id
 * -1 and the rewrite fails naming the pattern */
__attribute__((constructor(GE2_OP_CANDIDATES_PRIORITY))) static void register_recompute_act(void)
{
    if (ge2_op_register(&linear_grad_input_recompute_def, &recompute_op) != GE2_OK)
        recompute_op = -1;
}
