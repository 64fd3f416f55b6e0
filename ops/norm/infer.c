/* Inference of the normalization family. */
#include "ops/norm/norm.h"

/* x [N, C, ...] with 2..4 dims, float */
static ge2_status check_x(const ge2_node *node, const ge2_desc *x)
{
    GE2_TRY(ge2_infer_need_float(node, x, "x"));
    if (x->shape.ndim < 2)
        return ge2_error(GE2_ERR_SHAPE, GE2_OP_PREFIX "%s: %s must be [N,C], [N,C,L] or [N,C,H,W], is %s",
                         ge2_op_name(node->op), x->name, GE2_SHAPE_STR(x->shape));
    return GE2_OK;
}

/* t is [C] in x's dtype */
static ge2_status check_channels(const ge2_node *node, const ge2_desc *x, const ge2_desc *t, const char *what)
{
    GE2_TRY(ge2_infer_need_same_dtype(node, x, t));
    if (t->shape.ndim != 1 || t->shape.dim[0] != x->shape.dim[1])
        return ge2_error(GE2_ERR_SHAPE, GE2_OP_PREFIX "%s: %s %s is %s, expected [%lld] for %s %s",
                         ge2_op_name(node->op), what, t->name, GE2_SHAPE_STR(t->shape), (long long)x->shape.dim[1],
                         x->name, GE2_SHAPE_STR(x->shape));
    return GE2_OK;
}

/* saved [2, C] in x's dtype */
static ge2_status check_saved(const ge2_node *node, const ge2_desc *x, const ge2_desc *saved)
{
    GE2_TRY(ge2_infer_need_same_dtype(node, x, saved));
    if (saved->shape.ndim != 2 || saved->shape.dim[0] != 2 || saved->shape.dim[1] != x->shape.dim[1])
        return ge2_error(GE2_ERR_SHAPE, GE2_OP_PREFIX "%s: saved %s is %s, expected [2,%lld]", ge2_op_name(node->op),
                         saved->name, GE2_SHAPE_STR(saved->shape), (long long)x->shape.dim[1]);
    return GE2_OK;
}

ge2_status ge2_infer_BATCH_NORM(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    static const char *const what[5] = {"x", "weight", "bias", "running_mean", "running_var"};
    GE2_TRY(ge2_infer_need_outputs(node, 1, 2));
    GE2_TRY(check_x(node, &in[0]));
    for (int i = 1; i < 5; i++)
        GE2_TRY(check_channels(node, &in[0], &in[i], what[i]));
    if (node->n_inputs > 5 && (in[5].dtype != GE2_I64 || in[5].shape.ndim != 0))
        return ge2_error(GE2_ERR_SHAPE, "ge2_batch_norm: num_batches_tracked %s is %s %s, expected an i64 scalar",
                         in[5].name, ge2_dtype_name(in[5].dtype), GE2_SHAPE_STR(in[5].shape));
    const ge2_batch_norm_attrs *a = GE2_ATTRS(ge2_batch_norm_attrs, node->attrs);
    if (!(a->eps > 0) || !(a->momentum >= 0 && a->momentum <= 1))
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_batch_norm: eps %g must be > 0 and momentum %g in [0, 1]",
                         a->eps, a->momentum);
    out[0] = (ge2_desc){in[0].dtype, in[0].shape, NULL};
    if (node->n_outputs > 1)
        out[1] = (ge2_desc){in[0].dtype, ge2_shape2(2, in[0].shape.dim[1]), NULL};
    return GE2_OK;
}

/* dy, x, saved[, y] -> dweight [C], dbias [C] */
ge2_status ge2_infer_BATCH_NORM_GRAD_PARAMS(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    GE2_TRY(ge2_infer_need_outputs(node, 2, 2));
    GE2_TRY(check_x(node, &in[1]));
    GE2_TRY(ge2_infer_need_same_dtype(node, &in[0], &in[1]));
    GE2_TRY(ge2_infer_need_same_shape(node, &in[0], &in[1]));
    GE2_TRY(check_saved(node, &in[1], &in[2]));
    out[0] = out[1] = (ge2_desc){in[1].dtype, ge2_shape1(in[1].shape.dim[1]), NULL};
    return GE2_OK;
}

/* dy, x, weight, saved, dweight, dbias[, y] -> dx */
ge2_status ge2_infer_BATCH_NORM_GRAD_INPUT(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    GE2_TRY(check_x(node, &in[1]));
    GE2_TRY(ge2_infer_need_same_dtype(node, &in[0], &in[1]));
    GE2_TRY(ge2_infer_need_same_shape(node, &in[0], &in[1]));
    GE2_TRY(check_channels(node, &in[1], &in[2], "weight"));
    GE2_TRY(check_saved(node, &in[1], &in[3]));
    GE2_TRY(check_channels(node, &in[1], &in[4], "dweight"));
    GE2_TRY(check_channels(node, &in[1], &in[5], "dbias"));
    out[0] = (ge2_desc){in[1].dtype, in[1].shape, NULL};
    return GE2_OK;
}

ge2_status ge2_norm_check_row_vector(const ge2_node *node, const ge2_desc *x, const ge2_desc *t, const char *what)
{
    GE2_TRY(ge2_infer_need_same_dtype(node, x, t));
    const int64_t c = x->shape.dim[x->shape.ndim - 1];
    if (t->shape.ndim != 1 || t->shape.dim[0] != c)
        return ge2_error(GE2_ERR_SHAPE, GE2_OP_PREFIX "%s: %s %s is %s, expected [%lld] (the last dim of %s %s)",
                         ge2_op_name(node->op), what, t->name, GE2_SHAPE_STR(t->shape), (long long)c, x->name,
                         GE2_SHAPE_STR(x->shape));
    return GE2_OK;
}

ge2_status ge2_norm_check_rows_x(const ge2_node *node, const ge2_desc *x)
{
    GE2_TRY(ge2_infer_need_float(node, x, "x"));
    if (x->shape.ndim < 1)
        return ge2_error(GE2_ERR_SHAPE, GE2_OP_PREFIX "%s: %s is a scalar; it normalizes over its last dim",
                         ge2_op_name(node->op), x->name);
    return GE2_OK;
}

/* saved [2, rows] in x's dtype */
static ge2_status check_row_saved(const ge2_node *node, const ge2_desc *x, const ge2_desc *saved)
{
    GE2_TRY(ge2_infer_need_same_dtype(node, x, saved));
    const int64_t rows = ge2_ln_geom_of(x->shape).rows;
    if (saved->shape.ndim != 2 || saved->shape.dim[0] != 2 || saved->shape.dim[1] != rows)
        return ge2_error(GE2_ERR_SHAPE, GE2_OP_PREFIX "%s: saved %s is %s, expected [2,%lld]", ge2_op_name(node->op),
                         saved->name, GE2_SHAPE_STR(saved->shape), (long long)rows);
    return GE2_OK;
}

ge2_status ge2_infer_LAYER_NORM(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    GE2_TRY(ge2_infer_need_outputs(node, 1, 2));
    GE2_TRY(ge2_norm_check_rows_x(node, &in[0]));
    GE2_TRY(ge2_norm_check_row_vector(node, &in[0], &in[1], "weight"));
    if (node->n_inputs > 2)
        GE2_TRY(ge2_norm_check_row_vector(node, &in[0], &in[2], "bias"));
    if (!(GE2_ATTRS(ge2_layer_norm_attrs, node->attrs)->eps > 0))
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_layer_norm: eps %g must be > 0", GE2_ATTRS(ge2_layer_norm_attrs, node->attrs)->eps);
    out[0] = (ge2_desc){in[0].dtype, in[0].shape, NULL};
    if (node->n_outputs > 1)
        out[1] = (ge2_desc){in[0].dtype, ge2_shape2(2, ge2_ln_geom_of(in[0].shape).rows), NULL};
    return GE2_OK;
}

/* dy, x, saved -> dweight [C], dbias [C] */
ge2_status ge2_infer_LAYER_NORM_GRAD_PARAMS(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    GE2_TRY(ge2_infer_need_outputs(node, 2, 2));
    GE2_TRY(ge2_norm_check_rows_x(node, &in[1]));
    GE2_TRY(ge2_infer_need_same_dtype(node, &in[0], &in[1]));
    GE2_TRY(ge2_infer_need_same_shape(node, &in[0], &in[1]));
    GE2_TRY(check_row_saved(node, &in[1], &in[2]));
    out[0] = out[1] = (ge2_desc){in[1].dtype, ge2_shape1(in[1].shape.dim[in[1].shape.ndim - 1]), NULL};
    return GE2_OK;
}

/* dy, x, weight, saved[, plus] -> dx (+ plus) */
ge2_status ge2_infer_LAYER_NORM_GRAD_INPUT(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    GE2_TRY(ge2_norm_check_rows_x(node, &in[1]));
    GE2_TRY(ge2_infer_need_same_dtype(node, &in[0], &in[1]));
    GE2_TRY(ge2_infer_need_same_shape(node, &in[0], &in[1]));
    if (node->n_inputs > 4) {
        GE2_TRY(ge2_infer_need_same_dtype(node, &in[4], &in[1]));
        GE2_TRY(ge2_infer_need_same_shape(node, &in[4], &in[1]));
    }
    GE2_TRY(ge2_norm_check_row_vector(node, &in[1], &in[2], "weight"));
    GE2_TRY(check_row_saved(node, &in[1], &in[3]));
    out[0] = (ge2_desc){in[1].dtype, in[1].shape, NULL};
    return GE2_OK;
}
