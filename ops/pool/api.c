/* The public builders of the pooling family: ge2_max_pool2d, ge2_avg_pool2d
 * and ge2_global_avg_pool2d (RESHAPE and MEAN: no op of its own). */
#include <string.h>

#include "ops/pool/pool.h"

ge2_pool2d_params ge2_pool2d_square(int kernel, int stride, int padding)
{
    int s = stride > 0 ? stride : kernel;
    ge2_pool2d_params p = {{kernel, kernel}, {s, s}, {padding, padding}};
    return p;
}

static ge2_status pool(ge2_graph *graph, ge2_op op, const char *fn, ge2_tensor *x, const ge2_pool2d_params *params,
                       ge2_tensor **y)
{
    static const char *const what[1] = {"x"};
    if (!params)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "%s: params is NULL", fn);
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    memcpy(GE2_ATTRS(ge2_pool2d_attrs, a)->kernel, params->kernel, sizeof GE2_ATTRS(ge2_pool2d_attrs, a)->kernel);
    memcpy(GE2_ATTRS(ge2_pool2d_attrs, a)->stride, params->stride, sizeof GE2_ATTRS(ge2_pool2d_attrs, a)->stride);
    memcpy(GE2_ATTRS(ge2_pool2d_attrs, a)->padding, params->padding, sizeof GE2_ATTRS(ge2_pool2d_attrs, a)->padding);
    return ge2_graph_add_forward(graph, op, fn, &x, what, 1, 1, &a, y);
}

ge2_status ge2_max_pool2d(ge2_graph *graph, ge2_tensor *x, const ge2_pool2d_params *params, ge2_tensor **y)
{
    return pool(graph, GE2_OP_MAX_POOL2D, "ge2_max_pool2d", x, params, y);
}

ge2_status ge2_avg_pool2d(ge2_graph *graph, ge2_tensor *x, const ge2_pool2d_params *params, ge2_tensor **y)
{
    return pool(graph, GE2_OP_AVG_POOL2D, "ge2_avg_pool2d", x, params, y);
}

ge2_status ge2_global_avg_pool2d(ge2_graph *graph, ge2_tensor *x, ge2_tensor **y)
{
    if (!x || !y)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_global_avg_pool2d: x and y must not be NULL");
    if (x->shape.ndim != 4) {
        char buf[64];
        return ge2_error(GE2_ERR_SHAPE, "ge2_global_avg_pool2d: '%s' must be 4-D [N,C,H,W], is %s", x->name,
                         ge2_shape_str(x->shape, buf, sizeof buf));
    }
    ge2_tensor *rows;
    GE2_TRY(ge2_reshape(graph, x, ge2_shape3(-1, x->shape.dim[1], x->shape.dim[2] * x->shape.dim[3]), &rows));
    return ge2_mean(graph, rows, 2, y);
}
