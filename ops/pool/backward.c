/* Backward of the pooling ops: max pooling finds its maxima again in x
 * (no index tensor to keep alive), average pooling needs only x's shape. */
#include "ops/pool/pool.h"

ge2_status ge2_backward_pool2d(ge2_autograd *ag, const ge2_node *node, const int *dy)
{
    int d, g, x = node->inputs[0];
    GE2_TRY(ge2_ag_dy_tensor(ag, dy[0], &d));
    ge2_op back = node->op == GE2_OP_MAX_POOL2D ? GE2_OP_MAX_POOL2D_BACKWARD : GE2_OP_AVG_POOL2D_BACKWARD;
    GE2_TRY(ge2_ag_emit2(ag, back, d, x, &node->attrs, &g));
    return ge2_ag_accumulate(ag, x, g);
}
