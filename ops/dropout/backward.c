/* Backward of DROPOUT: the same mask (same p, same stream, same step)
 * applied to dy; plus, the optional addend, takes dy itself. */
#include "ops/dropout/dropout.h"

ge2_status ge2_backward_dropout(ge2_autograd *ag, const ge2_node *node, const int *dy)
{
    int d, g;
    GE2_TRY(ge2_ag_dy_tensor(ag, dy[0], &d));
    if (node->n_inputs > 1 && ge2_ag_wants(ag, node->inputs[1]))
        GE2_TRY(ge2_ag_accumulate(ag, node->inputs[1], d));
    if (!ge2_ag_wants(ag, node->inputs[0]))
        return GE2_OK;
    GE2_TRY(ge2_ag_emit(ag, GE2_OP_DROPOUT_BACKWARD, &d, 1, &node->attrs, &g));
    return ge2_ag_accumulate(ag, node->inputs[0], g);
}
