/* Backward of ATTENTION: one ATTENTION_GRAD node makes dq, dk and dv (or,
 * packed, dqkv), recomputing the scores from the saved log-sum-exp. */
#include "ops/attention/attention.h"

ge2_status ge2_backward_attention(ge2_autograd *ag, const ge2_node *node, const int *dy)
{
    const int n = node->n_inputs; /* q, k, v; packed: qkv */
    bool wanted = false;
    for (int i = 0; i < n; i++)
        wanted |= ge2_ag_wants(ag, node->inputs[i]);
    if (!wanted)
        return GE2_OK;
    int d, grads[3], in[6], m = 0;
    GE2_TRY(ge2_ag_dy_tensor(ag, dy[0], &d));
    in[m++] = d;
    for (int i = 0; i < n; i++)
        in[m++] = node->inputs[i];
    in[m++] = node->outputs[0];
    in[m++] = node->outputs[1];
    GE2_TRY(ge2_ag_emit_n(ag, GE2_OP_ATTENTION_GRAD, in, m, n, &node->attrs, grads));
    for (int i = 0; i < n; i++)
        if (ge2_ag_wants(ag, node->inputs[i]))
            GE2_TRY(ge2_ag_accumulate(ag, node->inputs[i], grads[i]));
    return GE2_OK;
}
