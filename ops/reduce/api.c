/* The public builders of the reduce family: ge2_sum, ge2_mean and their _all forms. Each checks its
 * arguments, fills the op's attrs and appends one node (which runs the
 * inference). */
#include <string.h>

#include "ops/reduce/reduce.h"

static const char *const unary_what[1] = {"x"};

/* axis is normalized here so the node (and every backend) sees [0, ndim). */
static ge2_status reduce(ge2_graph *graph, ge2_op op, const char *fn, ge2_tensor *x, int axis, ge2_tensor **y)
{
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    GE2_ATTRS(ge2_reduce_attrs, a)->axis = axis;
    if (axis != GE2_AXIS_ALL && x && axis < 0)
        GE2_ATTRS(ge2_reduce_attrs, a)->axis = axis + x->shape.ndim;
    if (axis != GE2_AXIS_ALL && x && (GE2_ATTRS(ge2_reduce_attrs, a)->axis < 0 || GE2_ATTRS(ge2_reduce_attrs, a)->axis >= x->shape.ndim)) {
        char buf[64];
        return ge2_error(GE2_ERR_SHAPE, "%s: axis %d out of range for '%s' %s", fn, axis, x->name,
                         ge2_shape_str(x->shape, buf, sizeof buf));
    }
    return ge2_graph_add_forward(graph, op, fn, &x, unary_what, 1, 1, &a, y);
}

ge2_status ge2_sum_all(ge2_graph *graph, ge2_tensor *x, ge2_tensor **y)
{
    return reduce(graph, GE2_OP_SUM, "ge2_sum_all", x, GE2_AXIS_ALL, y);
}

ge2_status ge2_mean_all(ge2_graph *graph, ge2_tensor *x, ge2_tensor **y)
{
    return reduce(graph, GE2_OP_MEAN, "ge2_mean_all", x, GE2_AXIS_ALL, y);
}

ge2_status ge2_sum(ge2_graph *graph, ge2_tensor *x, int axis, ge2_tensor **y)
{
    return reduce(graph, GE2_OP_SUM, "ge2_sum", x, axis, y);
}

ge2_status ge2_mean(ge2_graph *graph, ge2_tensor *x, int axis, ge2_tensor **y)
{
    return reduce(graph, GE2_OP_MEAN, "ge2_mean", x, axis, y);
}
