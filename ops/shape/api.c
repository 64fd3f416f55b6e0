/* The public builders of the shape family: ge2_reshape, ge2_transpose, ge2_concat and ge2_slice. Each checks its
 * arguments, fills the op's attrs and appends one node (which runs the
 * inference). */
#include <string.h>

#include "ops/shape/shape.h"

static const char *const unary_what[1] = {"x"};

ge2_status ge2_reshape(ge2_graph *graph, ge2_tensor *x, ge2_shape shape, ge2_tensor **y)
{
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    GE2_ATTRS(ge2_reshape_attrs, a)->shape = shape;
    return ge2_graph_add_forward(graph, GE2_OP_RESHAPE, "ge2_reshape", &x, unary_what, 1, 1, &a, y);
}

ge2_status ge2_permute(ge2_graph *graph, ge2_tensor *x, const int *perm, int n, ge2_tensor **y)
{
    if (!perm || n < 1 || n > GE2_MAX_DIMS)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_permute: perm must hold 1 to %d dims, got %d%s", GE2_MAX_DIMS,
                         n, perm ? "" : " (NULL)");
    if (x && n != x->shape.ndim) {
        char s[64];
        return ge2_error(GE2_ERR_SHAPE, "ge2_permute: '%s' is %s; perm has %d dims", x->name,
                         ge2_shape_str(x->shape, s, sizeof s), n);
    }
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    memcpy(GE2_ATTRS(ge2_permute_attrs, a)->perm, perm, sizeof(int) * (size_t)n);
    return ge2_graph_add_forward(graph, GE2_OP_PERMUTE, "ge2_permute", &x, unary_what, 1, 1, &a, y);
}

ge2_status ge2_transpose(ge2_graph *graph, ge2_tensor *x, ge2_tensor **y)
{
    return ge2_graph_add_forward(graph, GE2_OP_TRANSPOSE, "ge2_transpose", &x, unary_what, 1, 1, NULL, y);
}

ge2_status ge2_concat(ge2_graph *graph, ge2_tensor *const *xs, int n, int axis, ge2_tensor **y)
{
    static const char *const what[GE2_MAX_INPUTS] = {"xs[0]", "xs[1]", "xs[2]", "xs[3]",
                                                     "xs[4]", "xs[5]", "xs[6]", "xs[7]"};
    if (!xs || n < 1 || n > GE2_MAX_INPUTS)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_concat: needs 1..%d tensors, got %d%s", GE2_MAX_INPUTS, n,
                         xs ? "" : " (xs is NULL)");
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    GE2_ATTRS(ge2_concat_attrs, a)->axis = axis;
    if (xs[0] && axis < 0)
        GE2_ATTRS(ge2_concat_attrs, a)->axis = axis + xs[0]->shape.ndim;
    return ge2_graph_add_forward(graph, GE2_OP_CONCAT, "ge2_concat", xs, what, n, 1, &a, y);
}

ge2_status ge2_slice(ge2_graph *graph, ge2_tensor *x, int axis, int64_t start, int64_t end, ge2_tensor **y)
{
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    GE2_ATTRS(ge2_slice_attrs, a)->axis = x && axis < 0 ? axis + x->shape.ndim : axis;
    GE2_ATTRS(ge2_slice_attrs, a)->start = start;
    GE2_ATTRS(ge2_slice_attrs, a)->end = end;
    return ge2_graph_add_forward(graph, GE2_OP_SLICE, "ge2_slice", &x, unary_what, 1, 1, &a, y);
}

/* x.flatten(1): the batch dim stays free (-1), so other batch sizes
 * specialize; NCHW order, so a LINEAR after it takes PyTorch's weights. */
ge2_status ge2_flatten(ge2_graph *graph, ge2_tensor *x, ge2_tensor **y)
{
    if (!x)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_flatten: x is NULL");
    if (x->shape.ndim < 1) {
        char buf[64];
        return ge2_error(GE2_ERR_SHAPE, "ge2_flatten: '%s' %s needs a batch dim", x->name,
                         ge2_shape_str(x->shape, buf, sizeof buf));
    }
    int64_t rest = 1;
    for (int i = 1; i < x->shape.ndim; i++)
        rest *= x->shape.dim[i];
    return ge2_reshape(graph, x, ge2_shape2(-1, rest), y);
}
