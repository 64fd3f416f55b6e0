/* Backward of the softmax family. */
#include "ops/softmax/softmax.h"

/* SOFTMAX / LOG_SOFTMAX: their backward ops take the forward output. */
ge2_status ge2_backward_softmax(ge2_autograd *ag, const ge2_node *node, const int *dy)
{
    int d, g;
    GE2_TRY(ge2_ag_dy_tensor(ag, dy[0], &d));
    ge2_op op = node->op == GE2_OP_SOFTMAX ? GE2_OP_SOFTMAX_BACKWARD : GE2_OP_LOG_SOFTMAX_BACKWARD;
    GE2_TRY(ge2_ag_emit2(ag, op, d, node->outputs[0], NULL, &g));
    return ge2_ag_accumulate(ag, node->inputs[0], g);
}
