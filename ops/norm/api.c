/* The public builders of the normalization family: ge2_batch_norm and
 * ge2_layer_norm over given tensors, and their _layer forms, which make them
 * with PyTorch's names and first values. */
#include <stdio.h>
#include <string.h>

#include "ops/norm/norm.h"

ge2_status ge2_batch_norm(ge2_graph *graph, ge2_tensor *x, ge2_tensor *weight, ge2_tensor *bias,
                          ge2_tensor *running_mean, ge2_tensor *running_var, ge2_tensor *num_batches_tracked,
                          double momentum, double eps, ge2_tensor **y)
{
    static const char *const what[6] = {"x", "weight", "bias", "running_mean", "running_var", "num_batches_tracked"};
    ge2_tensor *ts[6] = {x, weight, bias, running_mean, running_var, num_batches_tracked};
    int n = num_batches_tracked ? 6 : 5;
    /* the step writes these in place: they must outlive it, as buffers do */
    for (int i = 3; i < n; i++)
        if (ts[i] && ts[i]->role != GE2_ROLE_BUFFER)
            return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_batch_norm: %s '%s' is a %s; it must be a persistent "
                             "buffer (ge2_buffer)", what[i], ts[i]->name, ge2_role_name(ts[i]->role));
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    GE2_ATTRS(ge2_batch_norm_attrs, a)->momentum = momentum;
    GE2_ATTRS(ge2_batch_norm_attrs, a)->eps = eps;
    return ge2_graph_add_forward(graph, GE2_OP_BATCH_NORM, "ge2_batch_norm", ts, what, n, 2, &a, y);
}

ge2_status ge2_batch_norm_layer(ge2_graph *graph, const char *prefix, ge2_tensor *x, double momentum, double eps,
                                ge2_tensor **y)
{
    if (!graph || !prefix || !x || !y)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_batch_norm_layer: graph, prefix, x and y must not be NULL");
    if (x->shape.ndim < 2) {
        char s[64];
        return ge2_error(GE2_ERR_SHAPE, "ge2_batch_norm_layer: '%s' is %s; it needs a channel dim [N,C,...]", x->name,
                         ge2_shape_str(x->shape, s, sizeof s));
    }
    static const char *const suffix[5] = {"weight", "bias", "running_mean", "running_var", "num_batches_tracked"};
    char names[5][GE2_NAME_MAX];
    for (int i = 0; i < 5; i++)
        if (snprintf(names[i], sizeof names[i], "%s.%s", prefix, suffix[i]) >= (int)sizeof names[i])
            return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_batch_norm_layer: prefix '%s' is too long", prefix);
    ge2_shape c = ge2_shape1(x->shape.dim[1]);
    ge2_init ones = {GE2_INIT_CONSTANT, 1.0, 0.0, 0}, zeros = {GE2_INIT_ZEROS, 0.0, 0.0, 0};
    ge2_tensor *weight, *bias, *mean, *var, *count;
    GE2_TRY(ge2_parameter(graph, names[0], x->dtype, c, ones, &weight));
    GE2_TRY(ge2_parameter(graph, names[1], x->dtype, c, zeros, &bias));
    GE2_TRY(ge2_buffer(graph, names[2], x->dtype, c, zeros, &mean));
    GE2_TRY(ge2_buffer(graph, names[3], x->dtype, c, ones, &var));
    GE2_TRY(ge2_buffer(graph, names[4], GE2_I64, ge2_shape0(), zeros, &count));
    return ge2_batch_norm(graph, x, weight, bias, mean, var, count, momentum, eps, y);
}

ge2_status ge2_layer_norm(ge2_graph *graph, ge2_tensor *x, ge2_tensor *weight, ge2_tensor *bias, double eps,
                          ge2_tensor **y)
{
    static const char *const what[3] = {"x", "weight", "bias"};
    ge2_tensor *ts[3] = {x, weight, bias};
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    GE2_ATTRS(ge2_layer_norm_attrs, a)->eps = eps;
    return ge2_graph_add_forward(graph, GE2_OP_LAYER_NORM, "ge2_layer_norm", ts, what, bias ? 3 : 2, 2, &a, y);
}

ge2_status ge2_layer_norm_layer(ge2_graph *graph, const char *prefix, ge2_tensor *x, bool bias, double eps,
                                ge2_tensor **y)
{
    if (!graph || !prefix || !x || !y)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_layer_norm_layer: graph, prefix, x and y must not be NULL");
    if (x->shape.ndim < 1)
        return ge2_error(GE2_ERR_SHAPE, "ge2_layer_norm_layer: '%s' is a scalar; it normalizes over its last dim",
                         x->name);
    char wn[GE2_NAME_MAX], bn[GE2_NAME_MAX];
    if (snprintf(wn, sizeof wn, "%s.weight", prefix) >= (int)sizeof wn ||
        snprintf(bn, sizeof bn, "%s.bias", prefix) >= (int)sizeof bn)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_layer_norm_layer: prefix '%s' is too long", prefix);
    ge2_shape c = ge2_shape1(x->shape.dim[x->shape.ndim - 1]);
    ge2_tensor *w, *b = NULL;
    GE2_TRY(ge2_parameter(graph, wn, x->dtype, c, (ge2_init){GE2_INIT_CONSTANT, 1.0, 0.0, 0}, &w));
    if (bias)
        GE2_TRY(ge2_parameter(graph, bn, x->dtype, c, (ge2_init){GE2_INIT_ZEROS, 0.0, 0.0, 0}, &b));
    return ge2_layer_norm(graph, x, w, b, eps, y);
}
