/* Backward of CONV2D: the input gradient and the weight (and bias)
 * gradients are separate ops, each emitted only when wanted. */
#include "ops/conv/conv.h"

ge2_status ge2_backward_conv2d(ge2_autograd *ag, const ge2_node *node, const int *dy)
{
    int x = node->inputs[0], w = node->inputs[1], b = node->n_inputs > 2 ? node->inputs[2] : -1, d;
    GE2_TRY(ge2_ag_dy_tensor(ag, dy[0], &d));
    if (ge2_ag_wants(ag, x)) {
        int in[3] = {d, x, w}, dx;
        GE2_TRY(ge2_ag_emit(ag, GE2_OP_CONV2D_GRAD_INPUT, in, 3, &node->attrs, &dx));
        GE2_TRY(ge2_ag_accumulate(ag, x, dx));
    }
    bool want_b = b >= 0 && ge2_ag_wants(ag, b);
    if (ge2_ag_wants(ag, w) || want_b) {
        int in[3] = {d, w, x}, grads[2];
        GE2_TRY(ge2_ag_emit_n(ag, GE2_OP_CONV2D_GRAD_WEIGHT, in, 3, b >= 0 ? 2 : 1, &node->attrs, grads));
        if (ge2_ag_wants(ag, w))
            GE2_TRY(ge2_ag_accumulate(ag, w, grads[0]));
        if (want_b)
            GE2_TRY(ge2_ag_accumulate(ag, b, grads[1]));
    }
    return GE2_OK;
}
