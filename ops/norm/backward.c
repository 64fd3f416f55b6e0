/* Backward of BATCH_NORM (train mode: the batch statistics depend on x).
 * The parameter gradients are the two per-channel sums the input gradient
 * needs as well, so they are made first and fed to it. */
#include "ops/norm/norm.h"

ge2_status ge2_backward_batch_norm(ge2_autograd *ag, const ge2_node *node, const int *dy)
{
    int d;
    GE2_TRY(ge2_ag_dy_tensor(ag, dy[0], &d));
    return ge2_backward_batch_norm_from(ag, node, d);
}

ge2_status ge2_backward_batch_norm_from(ge2_autograd *ag, const ge2_node *node, int d)
{
    int x = node->inputs[0], weight = node->inputs[1], bias = node->inputs[2], saved = node->outputs[1];
    int in[6] = {d, x, saved}, params[2];
    GE2_TRY(ge2_ag_emit_n(ag, GE2_OP_BATCH_NORM_GRAD_PARAMS, in, 3, 2, NULL, params));
    if (ge2_ag_wants(ag, weight))
        GE2_TRY(ge2_ag_accumulate(ag, weight, params[0]));
    if (ge2_ag_wants(ag, bias))
        GE2_TRY(ge2_ag_accumulate(ag, bias, params[1]));
    if (!ge2_ag_wants(ag, x))
        return GE2_OK;
    int grad_in[6] = {d, x, weight, saved, params[0], params[1]}, dx;
    GE2_TRY(ge2_ag_emit(ag, GE2_OP_BATCH_NORM_GRAD_INPUT, grad_in, 6, NULL, &dx));
    return ge2_ag_accumulate(ag, x, dx);
}

/* Backward of LAYER_NORM: the parameter gradients are sums over the rows,
 * the input gradient stays within each row. */
ge2_status ge2_backward_layer_norm(ge2_autograd *ag, const ge2_node *node, const int *dy)
{
    int x = node->inputs[0], weight = node->inputs[1], bias = node->n_inputs > 2 ? node->inputs[2] : -1;
    int saved = node->outputs[1], d;
    GE2_TRY(ge2_ag_dy_tensor(ag, dy[0], &d));
    if (ge2_ag_wants(ag, weight) || (bias >= 0 && ge2_ag_wants(ag, bias))) {
        int in[3] = {d, x, saved}, params[2];
        GE2_TRY(ge2_ag_emit_n(ag, GE2_OP_LAYER_NORM_GRAD_PARAMS, in, 3, 2, NULL, params));
        if (ge2_ag_wants(ag, weight))
            GE2_TRY(ge2_ag_accumulate(ag, weight, params[0]));
        if (bias >= 0 && ge2_ag_wants(ag, bias))
            GE2_TRY(ge2_ag_accumulate(ag, bias, params[1]));
    }
    if (!ge2_ag_wants(ag, x))
        return GE2_OK;
    int in[4] = {d, x, weight, saved}, dx;
    GE2_TRY(ge2_ag_emit(ag, GE2_OP_LAYER_NORM_GRAD_INPUT, in, 4, NULL, &dx));
    return ge2_ag_accumulate(ag, x, dx);
}
