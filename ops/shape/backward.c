/* Backward of the shape family: each moves dy back to where x's elements
 * came from. Shapes come from x (a like input) or from attrs that do not
 * depend on the batch. */
#include <string.h>

#include "ops/shape/shape.h"

static ge2_status unary(ge2_autograd *ag, const ge2_node *node, const int *dy, ge2_op op, bool like_x,
                        const ge2_attrs *attrs)
{
    int d, g;
    GE2_TRY(ge2_ag_dy_tensor(ag, dy[0], &d));
    int in[2] = {d, node->inputs[0]};
    GE2_TRY(ge2_ag_emit(ag, op, in, like_x ? 2 : 1, attrs, &g));
    return ge2_ag_accumulate(ag, node->inputs[0], g);
}

ge2_status ge2_backward_reshape(ge2_autograd *ag, const ge2_node *node, const int *dy)
{
    return unary(ag, node, dy, GE2_OP_RESHAPE, true, NULL);
}

ge2_status ge2_backward_transpose(ge2_autograd *ag, const ge2_node *node, const int *dy)
{
    return unary(ag, node, dy, GE2_OP_TRANSPOSE, false, NULL);
}

/* PERMUTE: dy permuted back by the inverse permutation */
ge2_status ge2_backward_permute(ge2_autograd *ag, const ge2_node *node, const int *dy)
{
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    const int n = ag->graph->tensors[node->inputs[0]]->shape.ndim;
    for (int i = 0; i < n; i++)
        a.permute.perm[node->attrs.permute.perm[i]] = i;
    return unary(ag, node, dy, GE2_OP_PERMUTE, false, &a);
}

/* SLICE: dy is x's gradient in the slice's window, zeros elsewhere; autograd
 * holds it back to join x's other windows (a CONCAT when they tile x). */
ge2_status ge2_backward_slice(ge2_autograd *ag, const ge2_node *node, const int *dy)
{
    int d;
    GE2_TRY(ge2_ag_dy_tensor(ag, dy[0], &d));
    return ge2_ag_accumulate_window(ag, node->inputs[0], d, &node->attrs.slice);
}

/* SLICE_BACKWARD(dy, like): its input gets the window of the gradient back. */
ge2_status ge2_backward_slice_backward(ge2_autograd *ag, const ge2_node *node, const int *dy)
{
    return unary(ag, node, dy, GE2_OP_SLICE, false, &node->attrs);
}

/* CONCAT: input i gets its window of dy along the axis. */
ge2_status ge2_backward_concat(ge2_autograd *ag, const ge2_node *node, const int *dy)
{
    int d;
    GE2_TRY(ge2_ag_dy_tensor(ag, dy[0], &d));
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    a.slice.axis = node->attrs.concat.axis;
    for (int i = 0; i < node->n_inputs; i++) {
        int x = node->inputs[i], g;
        a.slice.end = a.slice.start + ag->graph->tensors[x]->shape.dim[a.slice.axis];
        if (ge2_ag_wants(ag, x)) {
            GE2_TRY(ge2_ag_emit(ag, GE2_OP_SLICE, &d, 1, &a, &g));
            GE2_TRY(ge2_ag_accumulate(ag, x, g));
        }
        a.slice.start = a.slice.end;
    }
    return GE2_OK;
}
