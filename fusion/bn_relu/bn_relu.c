/* The bn_relu fusion's three ops (bn_relu.h): definitions, inference and
 * CPU kernels, registered when the library loads through the extension
 * API's ge2_op_register, as a user's op would be. Each is the batch norm
 * op's, with the relu (ops/norm/norm.h: the *_with kernels). */
#include <string.h>

#include "fusion/bn_relu/bn_relu.h"
#include "graph/error.h"
#include "ops/elementwise/elementwise.h"

/* The backward ops' relu'd y (input `at`, the last) is like x (input 1) */
static ge2_status check_relu_y(const ge2_node *node, const ge2_desc *in, int at)
{
    GE2_TRY(ge2_infer_need_same_dtype(node, &in[1], &in[at]));
    return ge2_infer_need_same_shape(node, &in[1], &in[at]);
}

static ge2_status infer_grad_params(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    GE2_TRY(check_relu_y(node, in, 3));
    return ge2_infer_BATCH_NORM_GRAD_PARAMS(node, in, out);
}

static ge2_status infer_grad_input(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    GE2_TRY(check_relu_y(node, in, 6));
    return ge2_infer_BATCH_NORM_GRAD_INPUT(node, in, out);
}

/* relu'(dy) from the relu'd y, then the batch norm's backward: the graph
 * the rewrite replaced (the fuse pass makes the op after autograd, but a
 * gradient check differentiates it too) */
static ge2_status backward(ge2_autograd *ag, const ge2_node *node, const int *dy)
{
    int d;
    GE2_TRY(ge2_ag_dy_tensor(ag, dy[0], &d));
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    GE2_ATTRS(ge2_act_attrs, a)->act = GE2_ACT_RELU;
    GE2_ATTRS(ge2_act_attrs, a)->from_output = true;
    GE2_TRY(ge2_ag_emit2(ag, GE2_OP_ACTIVATION_BACKWARD, d, node->outputs[0], &a, &d));
    return ge2_backward_batch_norm_from(ag, node, d);
}

static ge2_status cpu(const ge2_launch *l) { return ge2_cpu_batch_norm_with(l, true); }
static ge2_status cpu_grad_params(const ge2_launch *l) { return ge2_cpu_batch_norm_grad_params_with(l, l->in[3].data); }
static ge2_status cpu_grad_input(const ge2_launch *l) { return ge2_cpu_batch_norm_grad_input_with(l, l->in[6].data); }

/* x, weight, bias, running_mean, running_var[, num_batches_tracked] -> y, saved */
static const ge2_op_def batch_norm_relu_def = {
    .name = "batch_norm_relu",
    .min_inputs = 5,
    .max_inputs = 6,
    .max_outputs = 2,
    .flags = 0,
    .infer = ge2_infer_BATCH_NORM,
    .backward = backward,
    .cpu = cpu,
    .cuda = {NULL, ge2_cuda_batch_norm_relu_launch, NULL, NULL},
    .reads_bf16 = ge2_reads_bf16_input0, /* x: a convolution's output stored in bf16 */
};

/* dy, x, saved, y -> dweight, dbias */
static const ge2_op_def batch_norm_relu_grad_params_def = {
    .name = "batch_norm_relu_grad_params",
    .min_inputs = 4,
    .max_inputs = 4,
    .max_outputs = 2,
    .flags = 0,
    .infer = infer_grad_params,
    .backward = NULL,
    .cpu = cpu_grad_params,
    .cuda = {NULL, ge2_cuda_batch_norm_relu_grad_params_launch, NULL, NULL},
    .reads_bf16 = ge2_reads_bf16_input1, /* x */
};

/* dy, x, weight, saved, dweight, dbias, y -> dx */
static const ge2_op_def batch_norm_relu_grad_input_def = {
    .name = "batch_norm_relu_grad_input",
    .min_inputs = 7,
    .max_inputs = 7,
    .max_outputs = 1,
    .flags = 0,
    .infer = infer_grad_input,
    .backward = NULL,
    .cpu = cpu_grad_input,
    .cuda = {NULL, ge2_cuda_batch_norm_relu_grad_input_launch, NULL, NULL},
    .stores_bf16 = ge2_stores_bf16_output0, /* dx, when only the convolution's backward GEMMs read it */
    .reads_bf16 = ge2_reads_bf16_input1,    /* x */
};

static ge2_op batch_norm_relu_op = -1, grad_params_op = -1, grad_input_op = -1;

ge2_op ge2_op_batch_norm_relu(void) { return batch_norm_relu_op; }
ge2_op ge2_op_batch_norm_relu_grad_params(void) { return grad_params_op; }
ge2_op ge2_op_batch_norm_relu_grad_input(void) { return grad_input_op; }

/* After the built-in ops (their ids come first); a failure leaves the ids
 * -1 and the rewrite fails naming the pattern */
__attribute__((constructor(GE2_OP_CANDIDATES_PRIORITY))) static void register_bn_relu(void)
{
    if (ge2_op_register(&batch_norm_relu_def, &batch_norm_relu_op) != GE2_OK ||
        ge2_op_register(&batch_norm_relu_grad_params_def, &grad_params_op) != GE2_OK ||
        ge2_op_register(&batch_norm_relu_grad_input_def, &grad_input_op) != GE2_OK)
        batch_norm_relu_op = grad_params_op = grad_input_op = -1;
}
