/* Inference of the pooling family. */
#include "ops/pool/pool.h"

/* x [N, C, H, W] fits the attrs (PyTorch's rule: padding at most half the
 * window, so every window holds a real element); y's shape in *y. */
static ge2_status check_geometry(const ge2_node *node, const ge2_desc *x, ge2_shape *y)
{
    const char *op = ge2_op_name(node->op);
    const ge2_pool2d_attrs *a = GE2_ATTRS(ge2_pool2d_attrs, node->attrs);
    for (int i = 0; i < 2; i++)
        if (a->kernel[i] < 1 || a->stride[i] < 1 || a->padding[i] < 0 || 2 * a->padding[i] > a->kernel[i])
            return ge2_error(GE2_ERR_INVALID_ARGUMENT,
                             GE2_OP_PREFIX "%s: kernel (%d,%d) and stride (%d,%d) must be >= 1, padding (%d,%d) "
                             "between 0 and half the kernel",
                             op, a->kernel[0], a->kernel[1], a->stride[0], a->stride[1], a->padding[0], a->padding[1]);
    if (x->shape.ndim != 4)
        return ge2_error(GE2_ERR_SHAPE, GE2_OP_PREFIX "%s: %s must be 4-D [N,C,H,W], is %s", op, x->name,
                         GE2_SHAPE_STR(x->shape));
    ge2_pool2d_geom g = ge2_pool2d_geom_of(a, x->shape);
    if (g.oh < 1 || g.ow < 1)
        return ge2_error(GE2_ERR_SHAPE, GE2_OP_PREFIX "%s: the %dx%d window does not fit %s %s padded by (%d,%d)", op,
                         a->kernel[0], a->kernel[1], x->name, GE2_SHAPE_STR(x->shape), a->padding[0], a->padding[1]);
    *y = ge2_shape4(g.n, g.c, g.oh, g.ow);
    return GE2_OK;
}

ge2_status ge2_infer_POOL2D(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    GE2_TRY(ge2_infer_need_float(node, &in[0], "x"));
    ge2_shape y;
    GE2_TRY(check_geometry(node, &in[0], &y));
    out[0] = (ge2_desc){in[0].dtype, y, NULL};
    return GE2_OK;
}

/* dy [N, C, OH, OW], x [N, C, H, W] -> dx like x */
ge2_status ge2_infer_POOL2D_BACKWARD(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    const ge2_desc *dy = &in[0], *x = &in[1];
    GE2_TRY(ge2_infer_need_float(node, dy, "dy"));
    GE2_TRY(ge2_infer_need_same_dtype(node, dy, x));
    ge2_shape y;
    GE2_TRY(check_geometry(node, x, &y));
    if (!ge2_shape_equal(dy->shape, y))
        return ge2_error(GE2_ERR_SHAPE, GE2_OP_PREFIX "%s: dy %s is %s, the forward's output is %s",
                         ge2_op_name(node->op), dy->name, GE2_SHAPE_STR(dy->shape), GE2_SHAPE_STR(y));
    out[0] = (ge2_desc){dy->dtype, x->shape, NULL};
    return GE2_OK;
}
