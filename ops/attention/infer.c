/* Inference of the attention family. */
#include "ops/attention/attention.h"

/* q, k, v: float, same dtype and shape [..., T, D] (heads_inner: [..., T, H, D]) */
static ge2_status check_qkv(const ge2_node *node, const ge2_desc *q, const ge2_desc *k, const ge2_desc *v)
{
    GE2_TRY(ge2_infer_need_float(node, q, "q"));
    const bool inner = node->attrs.attention.heads_inner;
    if (q->shape.ndim < (inner ? 3 : 2))
        return ge2_error(GE2_ERR_SHAPE, GE2_OP_PREFIX "%s: q %s is %s, expected %s", ge2_op_name(node->op), q->name,
                         GE2_SHAPE_STR(q->shape), inner ? "[..., T, H, D]" : "[..., T, D]");
    GE2_TRY(ge2_infer_need_same_dtype(node, q, k));
    GE2_TRY(ge2_infer_need_same_dtype(node, q, v));
    GE2_TRY(ge2_infer_need_same_shape(node, q, k));
    GE2_TRY(ge2_infer_need_same_shape(node, q, v));
    return GE2_OK;
}

/* lse [..., T]: q's shape less its last dim */
static ge2_shape lse_shape(ge2_shape q)
{
    q.ndim--;
    return q;
}

ge2_status ge2_infer_ATTENTION(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    GE2_TRY(ge2_infer_need_outputs(node, 1, 2));
    GE2_TRY(check_qkv(node, &in[0], &in[1], &in[2]));
    out[0] = (ge2_desc){in[0].dtype, in[0].shape, NULL};
    if (node->n_outputs > 1)
        out[1] = (ge2_desc){in[0].dtype, lse_shape(in[0].shape), NULL};
    return GE2_OK;
}

/* dy, q, k, v, y: one shape; lse: [..., T] */
static ge2_status check_grad_inputs(const ge2_node *node, const ge2_desc *in)
{
    GE2_TRY(check_qkv(node, &in[1], &in[2], &in[3]));
    for (int i = 0; i < 5; i += 4) {
        GE2_TRY(ge2_infer_need_same_dtype(node, &in[1], &in[i]));
        GE2_TRY(ge2_infer_need_same_shape(node, &in[1], &in[i]));
    }
    GE2_TRY(ge2_infer_need_same_dtype(node, &in[1], &in[5]));
    if (!ge2_shape_equal(in[5].shape, lse_shape(in[1].shape)))
        return ge2_error(GE2_ERR_SHAPE, GE2_OP_PREFIX "%s: lse %s is %s, expected %s less its last dim",
                         ge2_op_name(node->op), in[5].name, GE2_SHAPE_STR(in[5].shape), GE2_SHAPE_STR(in[1].shape));
    return GE2_OK;
}

ge2_status ge2_infer_ATTENTION_GRAD(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    GE2_TRY(ge2_infer_need_outputs(node, 3, 3));
    GE2_TRY(check_grad_inputs(node, in));
    out[0] = out[1] = out[2] = (ge2_desc){in[1].dtype, in[1].shape, NULL};
    return GE2_OK;
}
