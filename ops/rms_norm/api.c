/* The RMS norm family's public builders: ge2_rms_norm over given tensors,
 * and ge2_rms_norm_layer, which makes its weight parameter. */
#include <stdio.h>
#include <string.h>

#include "graph/error.h"
#include "ops/rms_norm/rms_norm.h"

ge2_status ge2_rms_norm(ge2_graph *graph, ge2_tensor *x, ge2_tensor *weight, double eps, ge2_tensor **y)
{
    static const char *const what[2] = {"x", "weight"};
    ge2_tensor *ts[2] = {x, weight};
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    GE2_ATTRS(ge2_rms_norm_attrs, a)->eps = eps;
    return ge2_graph_add_forward(graph, GE2_OP_RMS_NORM, "ge2_rms_norm", ts, what, 2, 2, &a, y);
}

ge2_status ge2_rms_norm_layer(ge2_graph *graph, const char *prefix, ge2_tensor *x, double eps, ge2_tensor **y)
{
    if (!graph || !prefix || !x || !y)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_rms_norm_layer: graph, prefix, x and y must not be NULL");
    if (x->shape.ndim < 1)
        return ge2_error(GE2_ERR_SHAPE, "ge2_rms_norm_layer: '%s' is a scalar; it normalizes over its last dim",
                         x->name);
    char name[GE2_NAME_MAX];
    if (snprintf(name, sizeof name, "%s.weight", prefix) >= (int)sizeof name)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_rms_norm_layer: prefix '%s' is too long", prefix);
    ge2_tensor *w;
    GE2_TRY(ge2_parameter(graph, name, x->dtype, ge2_shape1(x->shape.dim[x->shape.ndim - 1]),
                          (ge2_init){GE2_INIT_CONSTANT, 1.0, 0.0, 0}, &w));
    return ge2_rms_norm(graph, x, w, eps, y);
}
