/* Inference of the elementwise family: broadcasting binaries, SCALE, and the
 * activation forward and backward. */
#include "ops/elementwise/elementwise.h"

static ge2_status binary(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    GE2_TRY(ge2_infer_need_float(node, &in[0], "a"));
    GE2_TRY(ge2_infer_need_same_dtype(node, &in[0], &in[1]));
    ge2_shape s;
    if (!ge2_shape_broadcast(in[0].shape, in[1].shape, &s))
        return ge2_error(GE2_ERR_SHAPE, GE2_OP_PREFIX "%s: shapes do not broadcast: %s is %s, %s is %s",
                         ge2_op_name(node->op), in[0].name, GE2_SHAPE_STR(in[0].shape), in[1].name,
                         GE2_SHAPE_STR(in[1].shape));
    out[0] = (ge2_desc){in[0].dtype, s, NULL};
    return GE2_OK;
}

ge2_status ge2_infer_ADD(const ge2_node *node, const ge2_desc *in, ge2_desc *out) { return binary(node, in, out); }
ge2_status ge2_infer_SUB(const ge2_node *node, const ge2_desc *in, ge2_desc *out) { return binary(node, in, out); }
ge2_status ge2_infer_MUL(const ge2_node *node, const ge2_desc *in, ge2_desc *out) { return binary(node, in, out); }

ge2_status ge2_infer_SCALE(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    GE2_TRY(ge2_infer_need_float(node, &in[0], "x"));
    out[0] = (ge2_desc){in[0].dtype, in[0].shape, NULL};
    return GE2_OK;
}

ge2_status ge2_infer_ACTIVATION(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    if ((unsigned)GE2_ATTRS(ge2_act_attrs, node->attrs)->act >= GE2_ACT_COUNT)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, GE2_OP_PREFIX "%s: unknown activation %d", ge2_op_name(node->op),
                         (int)GE2_ATTRS(ge2_act_attrs, node->attrs)->act);
    return ge2_infer_SCALE(node, in, out);
}

ge2_status ge2_infer_ACTIVATION_BACKWARD(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    GE2_TRY(ge2_infer_need_float(node, &in[0], "dy"));
    GE2_TRY(ge2_infer_need_same_dtype(node, &in[0], &in[1]));
    GE2_TRY(ge2_infer_need_same_shape(node, &in[0], &in[1]));
    return ge2_infer_ACTIVATION(node, in, out);
}
