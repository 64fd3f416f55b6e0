/* The definitions of the loss family's ops: one struct per op. */
#include "ops/loss/loss.h"

/* dlogits: rounded at the store where both backward GEMMs read them in
 * bf16, so no cast pass over [B, C] runs (the loss stays f32) */
static bool cross_entropy_stores_bf16(const ge2_node *node, int output)
{
    (void)node;
    return output == 1;
}

/* The logits (input 0) are written over by their gradient (output 1,
 * ge2_op_def.over_output) where rows are vocabulary-wide: every kernel reads
 * a row's logits, the label's among them, before it writes that row's
 * gradient, thread by thread over the same columns. Narrower rows keep
 * their own buffers (a classifier's few columns save nothing, and the
 * fused heads read theirs). */
static int logits_over(const ge2_graph *graph, const ge2_node *node)
{
    const ge2_tensor *logits = graph->tensors[node->inputs[0]];
    return node->n_outputs > 1 && logits->shape.ndim == 2 && logits->shape.dim[1] >= GE2_LOSS_WIDE_COLS ? 0 : -1;
}

/* logits, labels -> loss[], dlogits of the mean loss; the logits may be a
 * GEMM's bf16 output (the softmax and the loss are f32 either way) */
const ge2_op_def ge2_op_def_cross_entropy = {
    .name = "cross_entropy",
    .min_inputs = 2,
    .max_inputs = 2,
    .max_outputs = 2,
    .flags = GE2_OPF_LOSS,
    .infer = ge2_infer_CROSS_ENTROPY,
    .backward = ge2_backward_cross_entropy,
    .cpu = ge2_cpu_cross_entropy,
    .cuda = {NULL, ge2_cuda_cross_entropy_launch, NULL, NULL},
    .stores_bf16 = cross_entropy_stores_bf16,
    .reads_bf16 = ge2_reads_bf16_input0,
    .output_over_input = logits_over,
    .over_output = 1,
};

const ge2_op_def ge2_op_def_mse_loss = {
    .name = "mse_loss",
    .min_inputs = 2,
    .max_inputs = 2,
    .max_outputs = 1,
    .flags = GE2_OPF_LOSS,
    .infer = ge2_infer_MSE_LOSS,
    .backward = ge2_backward_mse_loss,
    .cpu = ge2_cpu_mse_loss,
    .cuda = {NULL, ge2_cuda_mse_loss_launch, NULL, NULL},
};

/* logits, labels -> correct count [] */
const ge2_op_def ge2_op_def_accuracy = {
    .name = "accuracy",
    .min_inputs = 2,
    .max_inputs = 2,
    .max_outputs = 1,
    .flags = GE2_OPF_NO_GRAD,
    .infer = ge2_infer_ACCURACY,
    .backward = NULL,
    .cpu = ge2_cpu_accuracy,
    .cuda = {NULL, ge2_cuda_accuracy_launch, NULL, NULL},
};

/* -> the seed [] (no inputs: the control block's loss_scale) */
const ge2_op_def ge2_op_def_loss_scale = {
    .name = "loss_scale",
    .min_inputs = 0,
    .max_inputs = 0,
    .max_outputs = 1,
    .flags = GE2_OPF_NO_GRAD,
    .infer = ge2_infer_LOSS_SCALE,
    .backward = NULL,
    .cpu = ge2_cpu_loss_scale,
    .cuda = {NULL, ge2_cuda_loss_scale_launch, NULL, NULL},
};
