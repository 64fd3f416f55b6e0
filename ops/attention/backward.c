/* Backward of ATTENTION: one ATTENTION_GRAD node makes dq, dk and dv,
 * recomputing the scores from the saved log-sum-exp. */
#include "ops/attention/attention.h"

ge2_status ge2_backward_attention(ge2_autograd *ag, const ge2_node *node, const int *dy)
{
    const int q = node->inputs[0], k = node->inputs[1], v = node->inputs[2];
    if (!ge2_ag_wants(ag, q) && !ge2_ag_wants(ag, k) && !ge2_ag_wants(ag, v))
        return GE2_OK;
    int d, grads[3];
    GE2_TRY(ge2_ag_dy_tensor(ag, dy[0], &d));
    const int in[6] = {d, q, k, v, node->outputs[0], node->outputs[1]};
    GE2_TRY(ge2_ag_emit_n(ag, GE2_OP_ATTENTION_GRAD, in, 6, 3, &node->attrs, grads));
    for (int i = 0; i < 3; i++)
        if (ge2_ag_wants(ag, node->inputs[i]))
            GE2_TRY(ge2_ag_accumulate(ag, node->inputs[i], grads[i]));
    return GE2_OK;
}
