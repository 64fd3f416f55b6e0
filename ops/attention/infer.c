/* Inference of the attention family. */
#include "ops/attention/attention.h"

/* q, k, v: float, same dtype and shape [..., T, D] (heads_inner: [..., T, H, D]) */
static ge2_status check_qkv(const ge2_node *node, const ge2_desc *q, const ge2_desc *k, const ge2_desc *v)
{
    GE2_TRY(ge2_infer_need_float(node, q, "q"));
    const bool inner = GE2_ATTRS(ge2_attention_attrs, node->attrs)->heads_inner;
    if (q->shape.ndim < (inner ? 3 : 2))
        return ge2_error(GE2_ERR_SHAPE, GE2_OP_PREFIX "%s: q %s is %s, expected %s", ge2_op_name(node->op), q->name,
                         GE2_SHAPE_STR(q->shape), inner ? "[..., T, H, D]" : "[..., T, D]");
    GE2_TRY(ge2_infer_need_same_dtype(node, q, k));
    GE2_TRY(ge2_infer_need_same_dtype(node, q, v));
    GE2_TRY(ge2_infer_need_same_shape(node, q, k));
    GE2_TRY(ge2_infer_need_same_shape(node, q, v));
    return GE2_OK;
}

/* packed: qkv float [..., T, 3H, D] */
static ge2_status check_packed(const ge2_node *node, const ge2_desc *qkv)
{
    GE2_TRY(ge2_infer_need_float(node, qkv, "qkv"));
    if (qkv->shape.ndim < 3 || qkv->shape.dim[qkv->shape.ndim - 2] % 3 != 0)
        return ge2_error(GE2_ERR_SHAPE, GE2_OP_PREFIX "%s: qkv %s is %s, expected [..., T, 3H, D] (q's H heads, "
                         "k's, v's)", ge2_op_name(node->op), qkv->name, GE2_SHAPE_STR(qkv->shape));
    return GE2_OK;
}

/* y's shape (dy's): q's, or packed, qkv's with H heads for its 3H */
static ge2_shape y_shape(const ge2_node *node, ge2_shape q)
{
    if (GE2_ATTRS(ge2_attention_attrs, node->attrs)->packed)
        q.dim[q.ndim - 2] /= 3;
    return q;
}

/* lse [..., T]: y's shape less its last dim */
static ge2_shape lse_shape(ge2_shape y)
{
    y.ndim--;
    return y;
}

ge2_status ge2_infer_ATTENTION(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    GE2_TRY(ge2_infer_need_outputs(node, 1, 2));
    const bool packed = GE2_ATTRS(ge2_attention_attrs, node->attrs)->packed;
    if (node->n_inputs != (packed ? 1 : 3))
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, GE2_OP_PREFIX "%s: %d inputs; it takes %s",
                         ge2_op_name(node->op), node->n_inputs, packed ? "one, qkv (packed)" : "q, k and v");
    GE2_TRY(packed ? check_packed(node, &in[0]) : check_qkv(node, &in[0], &in[1], &in[2]));
    const ge2_shape y = y_shape(node, in[0].shape);
    out[0] = (ge2_desc){in[0].dtype, y, NULL};
    if (node->n_outputs > 1)
        out[1] = (ge2_desc){in[0].dtype, lse_shape(y), NULL};
    return GE2_OK;
}

/* dy, q, k, v, y: one shape (packed: dy, qkv, y, lse; dy and y qkv's with
 * H for its 3H); lse: y's less its last dim */
static ge2_status check_grad_inputs(const ge2_node *node, const ge2_desc *in)
{
    const bool packed = GE2_ATTRS(ge2_attention_attrs, node->attrs)->packed;
    if (node->n_inputs != (packed ? 4 : 6))
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, GE2_OP_PREFIX "%s: %d inputs; it takes %s", ge2_op_name(node->op),
                         node->n_inputs, packed ? "dy, qkv, y and lse (packed)" : "dy, q, k, v, y and lse");
    GE2_TRY(packed ? check_packed(node, &in[1]) : check_qkv(node, &in[1], &in[2], &in[3]));
    const ge2_shape y = y_shape(node, in[1].shape);
    const int dy = 0, y_at = packed ? 2 : 4, lse = packed ? 3 : 5;
    const int rows[2] = {dy, y_at};
    for (int i = 0; i < 2; i++) {
        const ge2_desc *t = &in[rows[i]];
        GE2_TRY(ge2_infer_need_same_dtype(node, &in[1], t));
        if (!ge2_shape_equal(t->shape, y))
            return ge2_error(GE2_ERR_SHAPE, GE2_OP_PREFIX "%s: %s %s is %s, expected %s", ge2_op_name(node->op),
                             i ? "y" : "dy", t->name, GE2_SHAPE_STR(t->shape), GE2_SHAPE_STR(y));
    }
    GE2_TRY(ge2_infer_need_same_dtype(node, &in[1], &in[lse]));
    if (!ge2_shape_equal(in[lse].shape, lse_shape(y)))
        return ge2_error(GE2_ERR_SHAPE, GE2_OP_PREFIX "%s: lse %s is %s, expected %s less its last dim",
                         ge2_op_name(node->op), in[lse].name, GE2_SHAPE_STR(in[lse].shape), GE2_SHAPE_STR(y));
    return GE2_OK;
}

ge2_status ge2_infer_ATTENTION_GRAD(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    const int n = GE2_ATTRS(ge2_attention_attrs, node->attrs)->packed ? 1 : 3;
    GE2_TRY(ge2_infer_need_outputs(node, n, n));
    GE2_TRY(check_grad_inputs(node, in));
    for (int i = 0; i < n; i++)
        out[i] = (ge2_desc){in[1].dtype, in[1].shape, NULL};
    return GE2_OK;
}
