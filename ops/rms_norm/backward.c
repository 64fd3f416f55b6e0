/* The backward rule of RMS_NORM: one RMS_NORM_GRAD node for the input's
 * and the weight's gradients (its kernels skip an output nobody wants). */
#include "ops/rms_norm/rms_norm.h"

ge2_status ge2_backward_rms_norm(ge2_autograd *ag, const ge2_node *node, const int *dy)
{
    const int x = node->inputs[0], weight = node->inputs[1], saved = node->outputs[1];
    const bool want_x = ge2_ag_wants(ag, x), want_w = ge2_ag_wants(ag, weight);
    if (!want_x && !want_w)
        return GE2_OK;
    int d, grads[2];
    GE2_TRY(ge2_ag_dy_tensor(ag, dy[0], &d));
    int in[4] = {d, x, weight, saved};
    GE2_TRY(ge2_ag_emit_n(ag, GE2_OP_RMS_NORM_GRAD, in, 4, 2, NULL, grads));
    if (want_x)
        GE2_TRY(ge2_ag_accumulate(ag, x, grads[0]));
    if (want_w)
        GE2_TRY(ge2_ag_accumulate(ag, weight, grads[1]));
    return GE2_OK;
}
