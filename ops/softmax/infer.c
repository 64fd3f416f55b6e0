/* Inference of the softmax family (over the last axis) and its backward ops. */
#include "ops/softmax/softmax.h"

ge2_status ge2_infer_SOFTMAX(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    GE2_TRY(ge2_infer_need_float(node, &in[0], "x"));
    if (in[0].shape.ndim < 1)
        return ge2_error(GE2_ERR_SHAPE, GE2_OP_PREFIX "%s: '%s' needs at least one axis, is a scalar",
                         ge2_op_name(node->op), in[0].name);
    out[0] = (ge2_desc){in[0].dtype, in[0].shape, NULL};
    return GE2_OK;
}

ge2_status ge2_infer_LOG_SOFTMAX(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    return ge2_infer_SOFTMAX(node, in, out);
}

/* dy, y -> dx, all the shape of y. */
ge2_status ge2_infer_SOFTMAX_BACKWARD(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    GE2_TRY(ge2_infer_need_same_dtype(node, &in[0], &in[1]));
    GE2_TRY(ge2_infer_need_same_shape(node, &in[0], &in[1]));
    return ge2_infer_SOFTMAX(node, in, out);
}

ge2_status ge2_infer_LOG_SOFTMAX_BACKWARD(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    return ge2_infer_SOFTMAX_BACKWARD(node, in, out);
}
