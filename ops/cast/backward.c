/* Backward of CAST: dy straight through, cast back to x's dtype (cast.h
 * says why not the rounding's own derivative); a dy already in x's dtype
 * (a cast to the dtype x has) goes as it is. */
#include "ops/cast/cast.h"

ge2_status ge2_backward_cast(ge2_autograd *ag, const ge2_node *node, const int *dy)
{
    int d, g;
    GE2_TRY(ge2_ag_dy_tensor(ag, dy[0], &d));
    const ge2_dtype x_dtype = ag->graph->tensors[node->inputs[0]]->dtype;
    if (ag->graph->tensors[d]->dtype == x_dtype)
        return ge2_ag_accumulate(ag, node->inputs[0], d);
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    const ge2_cast_attrs back = {x_dtype};
    memcpy(a.bytes, &back, sizeof back);
    GE2_TRY(ge2_ag_emit(ag, GE2_OP_CAST, &d, 1, &a, &g));
    return ge2_ag_accumulate(ag, node->inputs[0], g);
}
