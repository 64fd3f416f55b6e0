/* Inference of the reduce family: SUM and MEAN over all elements (scalar) or
 * one axis (dropped), and the broadcasts the backward emits (EXPAND,
 * REDUCE_TO), whose output shape comes from a `like` input so that a graph
 * key can re-run this with another batch. */
#include "ops/reduce/reduce.h"

ge2_status ge2_infer_SUM(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    GE2_TRY(ge2_infer_need_float(node, &in[0], "x"));
    int axis = GE2_ATTRS(ge2_reduce_attrs, node->attrs)->axis;
    if (axis == GE2_AXIS_ALL) {
        out[0] = (ge2_desc){in[0].dtype, ge2_shape0(), NULL};
        return GE2_OK;
    }
    /* attrs are normalized by the builder; a raw negative axis here is a bug or a bad graph */
    int a;
    GE2_TRY(ge2_infer_axis(node, &in[0], axis, &a));
    ge2_shape s = ge2_shape0();
    for (int i = 0; i < in[0].shape.ndim; i++)
        if (i != a)
            s.dim[s.ndim++] = in[0].shape.dim[i];
    out[0] = (ge2_desc){in[0].dtype, s, NULL};
    return GE2_OK;
}

ge2_status ge2_infer_MEAN(const ge2_node *node, const ge2_desc *in, ge2_desc *out) { return ge2_infer_SUM(node, in, out); }

/* EXPAND and REDUCE_TO: out is like's shape; `small` must broadcast to `big`. */
static ge2_status broadcast_like(const ge2_node *node, const ge2_desc *in, const ge2_desc *small, const ge2_desc *big,
                                 ge2_desc *out)
{
    GE2_TRY(ge2_infer_need_float(node, &in[0], "x"));
    /* zeroed attrs would silently produce zeros: a plain broadcast or sum says scale 1 */
    if (GE2_ATTRS(ge2_expand_attrs, node->attrs)->scale == 0.0)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, GE2_OP_PREFIX "%s: ge2_expand_attrs.scale is 0 (1 for a plain %s)",
                         ge2_op_name(node->op), node->op == GE2_OP_EXPAND ? "broadcast" : "sum");
    if (!ge2_shape_broadcasts_to(small->shape, big->shape))
        return ge2_error(GE2_ERR_SHAPE, GE2_OP_PREFIX "%s: '%s' %s does not broadcast to '%s' %s",
                         ge2_op_name(node->op), small->name, GE2_SHAPE_STR(small->shape), big->name,
                         GE2_SHAPE_STR(big->shape));
    out[0] = (ge2_desc){in[0].dtype, in[1].shape, NULL};
    return GE2_OK;
}

/* x, like -> like's shape: x broadcast up. */
ge2_status ge2_infer_EXPAND(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    return broadcast_like(node, in, &in[0], &in[1], out);
}

/* x, like -> like's shape: x summed down over the broadcast dims. */
ge2_status ge2_infer_REDUCE_TO(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    return broadcast_like(node, in, &in[1], &in[0], out);
}
