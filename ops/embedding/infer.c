/* Inference of the embedding family. */
#include "ops/embedding/embedding.h"

/* ids: i32 with room for one more dim */
static ge2_status check_ids(const ge2_node *node, const ge2_desc *ids)
{
    if (ids->dtype != GE2_I32)
        return ge2_error(GE2_ERR_DTYPE, GE2_OP_PREFIX "%s: ids %s is %s, expected i32", ge2_op_name(node->op),
                         ids->name, ge2_dtype_name(ids->dtype));
    if (ids->shape.ndim >= GE2_MAX_DIMS)
        return ge2_error(GE2_ERR_SHAPE, GE2_OP_PREFIX "%s: ids %s is %s; at most %d dims (the rows add one)",
                         ge2_op_name(node->op), ids->name, GE2_SHAPE_STR(ids->shape), GE2_MAX_DIMS - 1);
    return GE2_OK;
}

/* ids's shape and one more dim c */
static ge2_shape rows_of(ge2_shape ids, int64_t c)
{
    ids.dim[ids.ndim++] = c;
    return ids;
}

ge2_status ge2_infer_EMBEDDING(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    GE2_TRY(ge2_infer_need_outputs(node, 1, 1));
    GE2_TRY(ge2_infer_need_float(node, &in[0], "table"));
    if (in[0].shape.ndim != 2)
        return ge2_error(GE2_ERR_SHAPE, "ge2_embedding: table %s is %s, expected [V, C]", in[0].name,
                         GE2_SHAPE_STR(in[0].shape));
    GE2_TRY(check_ids(node, &in[1]));
    out[0] = (ge2_desc){in[0].dtype, rows_of(in[1].shape, in[0].shape.dim[1]), NULL};
    return GE2_OK;
}

/* dy [ids..., C], ids -> [rows, C] */
ge2_status ge2_infer_EMBEDDING_BACKWARD(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    GE2_TRY(ge2_infer_need_outputs(node, 1, 1));
    GE2_TRY(ge2_infer_need_float(node, &in[0], "dy"));
    GE2_TRY(check_ids(node, &in[1]));
    const int64_t rows = GE2_ATTRS(ge2_embedding_attrs, node->attrs)->rows, c = in[0].shape.dim[in[0].shape.ndim - 1];
    if (in[0].shape.ndim < 1 || !ge2_shape_equal(rows_of(in[1].shape, c), in[0].shape))
        return ge2_error(GE2_ERR_SHAPE, GE2_OP_PREFIX "%s: dy %s is %s, expected ids %s %s and one more dim",
                         ge2_op_name(node->op), in[0].name, GE2_SHAPE_STR(in[0].shape), in[1].name,
                         GE2_SHAPE_STR(in[1].shape));
    if (rows < 1)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, GE2_OP_PREFIX "%s: %lld table rows", ge2_op_name(node->op),
                         (long long)rows);
    out[0] = (ge2_desc){in[0].dtype, ge2_shape2(rows, c), NULL};
    return GE2_OK;
}
