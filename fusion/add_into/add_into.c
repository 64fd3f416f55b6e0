/* The add-into pattern's ops (add_into.h): their definitions, registered
 * when the library loads through the extension API's ge2_op_register, as a
 * user's op would be. Every part is the op family's, whose functions take
 * the addend as their last input. */
#include "fusion/add_into/add_into.h"
#include "ops/dropout/dropout.h"
#include "ops/norm/norm.h"

/* x, plus -> plus + dropout(x); the backward: dropout's of dy for x, dy for plus */
static const ge2_op_def dropout_add_def = {
    .name = "dropout_add",
    .min_inputs = 2,
    .max_inputs = 2,
    .max_outputs = 1,
    .flags = GE2_OPF_ELEMENTWISE | GE2_OPF_RANDOM,
    .infer = ge2_infer_DROPOUT,
    .backward = ge2_backward_dropout,
    .cpu = ge2_cpu_dropout,
    .cuda = {NULL, ge2_cuda_dropout_launch, NULL, NULL},
    .stores_bf16 = ge2_stores_bf16_output0,
};

/* dy, x, weight, saved, plus -> dx + plus */
static const ge2_op_def layer_norm_grad_input_add_def = {
    .name = "layer_norm_grad_input_add",
    .min_inputs = 5,
    .max_inputs = 5,
    .max_outputs = 1,
    .flags = 0,
    .infer = ge2_infer_LAYER_NORM_GRAD_INPUT,
    .backward = NULL, /* a backward op */
    .cpu = ge2_cpu_layer_norm_grad_input,
    .cuda = {NULL, ge2_cuda_layer_norm_grad_input_launch, NULL, NULL},
};

static ge2_op dropout_add_op = -1, layer_norm_grad_input_add_op = -1;

ge2_op ge2_op_dropout_add(void) { return dropout_add_op; }
ge2_op ge2_op_layer_norm_grad_input_add(void) { return layer_norm_grad_input_add_op; }

/* After the built-in ops (their ids come first); a failure leaves the ids
 * -1 and the rewrite fails naming the pattern */
__attribute__((constructor(GE2_OP_CANDIDATES_PRIORITY))) static void register_add_into(void)
{
    if (ge2_op_register(&dropout_add_def, &dropout_add_op) != GE2_OK ||
        ge2_op_register(&layer_norm_grad_input_add_def, &layer_norm_grad_input_add_op) != GE2_OK)
        dropout_add_op = layer_norm_grad_input_add_op = -1;
}
