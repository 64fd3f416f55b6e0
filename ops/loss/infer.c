/* Inference of the losses and metrics: logits [B, C] with labels [B] i32,
 * and the mean squared error. */
#include "ops/loss/loss.h"

static ge2_status logits_labels(const ge2_node *node, const ge2_desc *in)
{
    const ge2_desc *logits = &in[0], *labels = &in[1];
    GE2_TRY(ge2_infer_need_float(node, logits, "logits"));
    if (labels->dtype != GE2_I32)
        return ge2_error(GE2_ERR_DTYPE, GE2_OP_PREFIX "%s: labels '%s' are %s, expected i32", ge2_op_name(node->op),
                         labels->name, ge2_dtype_name(labels->dtype));
    if (logits->shape.ndim != 2 || labels->shape.ndim != 1 || labels->shape.dim[0] != logits->shape.dim[0])
        return ge2_error(GE2_ERR_SHAPE, GE2_OP_PREFIX "%s: expected logits [B,C] and labels [B]: %s is %s, %s is %s",
                         ge2_op_name(node->op), logits->name, GE2_SHAPE_STR(logits->shape), labels->name,
                         GE2_SHAPE_STR(labels->shape));
    return GE2_OK;
}

/* -> loss [], dlogits [B, C] (the gradient of the mean loss, from the same kernel). */
ge2_status ge2_infer_CROSS_ENTROPY(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    GE2_TRY(logits_labels(node, in));
    GE2_TRY(ge2_infer_need_outputs(node, 2, 2));
    float eps = GE2_ATTRS(ge2_loss_attrs, node->attrs)->label_smoothing;
    if (!(eps >= 0.0f && eps <= 1.0f))
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_cross_entropy: label_smoothing %g is outside [0, 1]",
                         (double)eps);
    const int64_t classes = GE2_ATTRS(ge2_loss_attrs, node->attrs)->classes;
    if (classes < 0 || classes > in[0].shape.dim[1])
        return ge2_error(GE2_ERR_SHAPE, "ge2_cross_entropy: %lld classes in logits '%s' %s: at most its %lld columns",
                         (long long)classes, in[0].name, GE2_SHAPE_STR(in[0].shape), (long long)in[0].shape.dim[1]);
    out[0] = (ge2_desc){in[0].dtype, ge2_shape0(), NULL};
    out[1] = (ge2_desc){in[0].dtype, in[0].shape, NULL};
    return GE2_OK;
}

/* -> correct count [] f32, whatever the logits' dtype (metrics are read as f32). */
ge2_status ge2_infer_ACCURACY(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    GE2_TRY(logits_labels(node, in));
    out[0] = (ge2_desc){GE2_F32, ge2_shape0(), NULL};
    return GE2_OK;
}

ge2_status ge2_infer_MSE_LOSS(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    GE2_TRY(ge2_infer_need_float(node, &in[0], "pred"));
    GE2_TRY(ge2_infer_need_same_dtype(node, &in[0], &in[1]));
    GE2_TRY(ge2_infer_need_same_shape(node, &in[0], &in[1]));
    out[0] = (ge2_desc){in[0].dtype, ge2_shape0(), NULL};
    return GE2_OK;
}

/* no inputs -> the seed [] in the loss's dtype (ge2_loss_scale_attrs.dtype) */
ge2_status ge2_infer_LOSS_SCALE(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    (void)in;
    const ge2_dtype dtype = GE2_ATTRS(ge2_loss_scale_attrs, node->attrs)->dtype;
    if (dtype != GE2_F32 && dtype != GE2_F64)
        return ge2_error(GE2_ERR_DTYPE, GE2_OP_PREFIX "loss_scale: the seed is f32 or f64, not %s", ge2_dtype_name(dtype));
    out[0] = (ge2_desc){dtype, ge2_shape0(), NULL};
    return GE2_OK;
}
