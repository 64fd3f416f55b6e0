/* Backward of ATTENTION: dq from one op, dk and dv from the other, both
 * recomputing the scores from the saved log-sum-exp. */
#include "ops/attention/attention.h"

ge2_status ge2_backward_attention(ge2_autograd *ag, const ge2_node *node, const int *dy)
{
    const int q = node->inputs[0], k = node->inputs[1], v = node->inputs[2];
    int d;
    GE2_TRY(ge2_ag_dy_tensor(ag, dy[0], &d));
    int in[6] = {d, q, k, v, node->outputs[0], node->outputs[1]};
    if (ge2_ag_wants(ag, q)) {
        int dq;
        GE2_TRY(ge2_ag_emit(ag, GE2_OP_ATTENTION_GRAD_Q, in, 6, &node->attrs, &dq));
        GE2_TRY(ge2_ag_accumulate(ag, q, dq));
    }
    if (ge2_ag_wants(ag, k) || ge2_ag_wants(ag, v)) {
        int kv[2];
        GE2_TRY(ge2_ag_emit_n(ag, GE2_OP_ATTENTION_GRAD_KV, in, 6, 2, &node->attrs, kv));
        if (ge2_ag_wants(ag, k))
            GE2_TRY(ge2_ag_accumulate(ag, k, kv[0]));
        if (ge2_ag_wants(ag, v))
            GE2_TRY(ge2_ag_accumulate(ag, v, kv[1]));
    }
    return GE2_OK;
}
