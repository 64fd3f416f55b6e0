/* Backward of the reductions and of the broadcast pair EXPAND / REDUCE_TO.
 * Counts that depend on the batch (mean's 1/n) are never literals: EXPAND's
 * `mean` attr divides by the factor taken from the concrete shapes. */
#include <string.h>

#include "ops/reduce/reduce.h"
#include "ops/shape/shape.h"

static ge2_status expand_like(ge2_autograd *ag, ge2_op op, int x, int like, double scale, bool mean, int *out)
{
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    GE2_ATTRS(ge2_expand_attrs, a)->scale = scale;
    GE2_ATTRS(ge2_expand_attrs, a)->mean = mean;
    return ge2_ag_emit2(ag, op, x, like, &a, out);
}

/* SUM/MEAN: dy broadcast back over the reduced axis. Reducing axis 0 leaves
 * a shape that already broadcasts right-aligned; any other axis first gets
 * its size-1 dim back via RESHAPE, with -1 in dim 0 so the batch stays free. */
ge2_status ge2_backward_reduce(ge2_autograd *ag, const ge2_node *node, const int *dy)
{
    int d, x = node->inputs[0], axis = GE2_ATTRS(ge2_reduce_attrs, node->attrs)->axis;
    GE2_TRY(ge2_ag_dy_tensor(ag, dy[0], &d));
    if (axis != GE2_AXIS_ALL && axis != 0) {
        ge2_attrs a;
        memset(&a, 0, sizeof a);
        GE2_ATTRS(ge2_reshape_attrs, a)->shape = ag->graph->tensors[x]->shape;
        GE2_ATTRS(ge2_reshape_attrs, a)->shape.dim[axis] = 1;
        GE2_ATTRS(ge2_reshape_attrs, a)->shape.dim[0] = -1;
        GE2_TRY(ge2_ag_emit(ag, GE2_OP_RESHAPE, &d, 1, &a, &d));
    }
    int g;
    GE2_TRY(expand_like(ag, GE2_OP_EXPAND, d, x, 1.0, node->op == GE2_OP_MEAN, &g));
    return ge2_ag_accumulate(ag, x, g);
}

/* EXPAND and REDUCE_TO are each other's backward, with the same scale. */
ge2_status ge2_backward_expand(ge2_autograd *ag, const ge2_node *node, const int *dy)
{
    int d, g, x = node->inputs[0];
    GE2_TRY(ge2_ag_dy_tensor(ag, dy[0], &d));
    ge2_op back = node->op == GE2_OP_EXPAND ? GE2_OP_REDUCE_TO : GE2_OP_EXPAND;
    GE2_TRY(expand_like(ag, back, d, x, GE2_ATTRS(ge2_expand_attrs, node->attrs)->scale, GE2_ATTRS(ge2_expand_attrs, node->attrs)->mean, &g));
    return ge2_ag_accumulate(ag, x, g);
}

ge2_status ge2_backward_reduce_to(ge2_autograd *ag, const ge2_node *node, const int *dy)
{
    return ge2_backward_expand(ag, node, dy);
}
