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
        GE2_ATTRS(ge2_permute_attrs, a)->perm[GE2_ATTRS(ge2_permute_attrs, node->attrs)->perm[i]] = i;
    return unary(ag, node, dy, GE2_OP_PERMUTE, false, &a);
}

/* Do windows w[0..k) (sorted by start) cover x's axis exactly, without overlap? */
static bool windows_tile(const ge2_graph *g, int x, const ge2_slice_attrs *w, int k)
{
    if (k < 2 || w[0].start != 0)
        return false;
    for (int i = 1; i < k; i++)
        if (w[i].axis != w[0].axis || w[i].start != w[i - 1].end)
            return false;
    return w[k - 1].end == g->tensors[x]->shape.dim[w[0].axis];
}

/* x's slice gradients (autograd's parts, in the order they came): one
 * CONCAT when their windows tile x's axis, else a SLICE_BACKWARD each. */
static ge2_status merge_windows(ge2_autograd *ag, int x, const ge2_ag_part *parts, int n)
{
    if (n >= 2 && n <= GE2_MAX_INPUTS) {
        ge2_slice_attrs w[GE2_MAX_INPUTS];
        int dys[GE2_MAX_INPUTS];
        for (int i = 0; i < n; i++) { /* insertion sort by start: n is small */
            int j = i;
            for (; j > 0 && w[j - 1].start > GE2_ATTRS(ge2_slice_attrs, parts[i].attrs)->start; j--) {
                w[j] = w[j - 1];
                dys[j] = dys[j - 1];
            }
            w[j] = (*GE2_ATTRS(ge2_slice_attrs, parts[i].attrs));
            dys[j] = parts[i].dy;
        }
        if (windows_tile(ag->graph, x, w, n)) {
            ge2_attrs a;
            memset(&a, 0, sizeof a);
            GE2_ATTRS(ge2_concat_attrs, a)->axis = w[0].axis;
            int g;
            GE2_TRY(ge2_ag_emit(ag, GE2_OP_CONCAT, dys, n, &a, &g));
            return ge2_ag_accumulate(ag, x, g);
        }
    }
    for (int i = 0; i < n; i++) {
        int in[2] = {parts[i].dy, x}, g;
        GE2_TRY(ge2_ag_emit(ag, GE2_OP_SLICE_BACKWARD, in, 2, &parts[i].attrs, &g));
        GE2_TRY(ge2_ag_accumulate(ag, x, g));
    }
    return GE2_OK;
}

/* SLICE: dy is x's gradient in the slice's window, zeros elsewhere. It waits
 * (a gradient part) for x's other windows: q, k and v cut from one packed
 * projection get one CONCAT, which writes x's size once instead of the
 * 2k - 1 times of k zero-padded windows and their sums. */
ge2_status ge2_backward_slice(ge2_autograd *ag, const ge2_node *node, const int *dy)
{
    int d;
    GE2_TRY(ge2_ag_dy_tensor(ag, dy[0], &d));
    return ge2_ag_accumulate_part(ag, node->inputs[0], d, &node->attrs, merge_windows);
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
    GE2_ATTRS(ge2_slice_attrs, a)->axis = GE2_ATTRS(ge2_concat_attrs, node->attrs)->axis;
    for (int i = 0; i < node->n_inputs; i++) {
        int x = node->inputs[i], g;
        GE2_ATTRS(ge2_slice_attrs, a)->end = GE2_ATTRS(ge2_slice_attrs, a)->start + ag->graph->tensors[x]->shape.dim[GE2_ATTRS(ge2_slice_attrs, a)->axis];
        if (ge2_ag_wants(ag, x)) {
            GE2_TRY(ge2_ag_emit(ag, GE2_OP_SLICE, &d, 1, &a, &g));
            GE2_TRY(ge2_ag_accumulate(ag, x, g));
        }
        GE2_ATTRS(ge2_slice_attrs, a)->start = GE2_ATTRS(ge2_slice_attrs, a)->end;
    }
    return GE2_OK;
}
