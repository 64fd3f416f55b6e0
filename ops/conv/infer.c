/* Inference of the convolution family. Every op checks the same geometry
 * (attrs, x and w), so a graph key that changes the batch, or a backward
 * node, is held to what the forward was. */
#include "ops/conv/conv.h"

/* x [N, C, H, W] and w [O, C/groups, KH, KW] fit the attrs; y's shape in *y. */
static ge2_status check_geometry(const ge2_node *node, const ge2_desc *x, const ge2_desc *w, ge2_shape *y)
{
    const char *op = ge2_op_name(node->op);
    const ge2_conv2d_attrs *a = GE2_ATTRS(ge2_conv2d_attrs, node->attrs);
    for (int i = 0; i < 2; i++)
        if (a->stride[i] < 1 || a->dilation[i] < 1 || a->padding[i] < 0)
            return ge2_error(GE2_ERR_INVALID_ARGUMENT,
                             GE2_OP_PREFIX "%s: stride (%d,%d) and dilation (%d,%d) must be >= 1, padding (%d,%d) >= 0",
                             op, a->stride[0], a->stride[1], a->dilation[0], a->dilation[1], a->padding[0],
                             a->padding[1]);
    if (a->groups < 1)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, GE2_OP_PREFIX "%s: groups is %d, must be >= 1", op, a->groups);
    if (x->shape.ndim != 4 || w->shape.ndim != 4)
        return ge2_error(GE2_ERR_SHAPE,
                         GE2_OP_PREFIX "%s: x [N,C,H,W] and w [O,C/groups,kh,kw] must be 4-D: %s is %s, %s is %s", op,
                         x->name, GE2_SHAPE_STR(x->shape), w->name, GE2_SHAPE_STR(w->shape));
    ge2_conv2d_geom g = ge2_conv2d_geom_of(a, x->shape, w->shape);
    if (g.c % g.groups || g.o % g.groups || w->shape.dim[1] != g.c / g.groups)
        return ge2_error(GE2_ERR_SHAPE,
                         GE2_OP_PREFIX "%s: with groups %d, x's channels and w's outputs must divide by it and w's "
                         "dim 1 be channels/groups: %s is %s, %s is %s",
                         op, a->groups, x->name, GE2_SHAPE_STR(x->shape), w->name, GE2_SHAPE_STR(w->shape));
    if (g.oh < 1 || g.ow < 1)
        return ge2_error(GE2_ERR_SHAPE,
                         GE2_OP_PREFIX "%s: the %lldx%lld window (dilation %d,%d) does not fit %s %s padded by (%d,%d)",
                         op, (long long)g.kh, (long long)g.kw, a->dilation[0], a->dilation[1], x->name,
                         GE2_SHAPE_STR(x->shape), a->padding[0], a->padding[1]);
    *y = ge2_shape4(g.n, g.o, g.oh, g.ow);
    return GE2_OK;
}

ge2_status ge2_infer_CONV2D(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    const ge2_desc *x = &in[0], *w = &in[1], *b = node->n_inputs > 2 ? &in[2] : NULL;
    GE2_TRY(ge2_infer_need_float(node, x, "x"));
    GE2_TRY(ge2_infer_need_same_dtype(node, x, w));
    ge2_shape y;
    GE2_TRY(check_geometry(node, x, w, &y));
    if (b) {
        GE2_TRY(ge2_infer_need_same_dtype(node, x, b));
        if (b->shape.ndim != 1 || b->shape.dim[0] != w->shape.dim[0])
            return ge2_error(GE2_ERR_SHAPE, "ge2_conv2d: bias %s is %s, expected [%lld] for w %s", b->name,
                             GE2_SHAPE_STR(b->shape), (long long)w->shape.dim[0], GE2_SHAPE_STR(w->shape));
    }
    out[0] = (ge2_desc){x->dtype, y, NULL};
    return GE2_OK;
}

/* dy [N, O, OH, OW] must be what the forward made from x and w. */
static ge2_status check_dy(const ge2_node *node, const ge2_desc *dy, const ge2_desc *x, const ge2_desc *w)
{
    GE2_TRY(ge2_infer_need_float(node, dy, "dy"));
    GE2_TRY(ge2_infer_need_same_dtype(node, dy, w));
    GE2_TRY(ge2_infer_need_same_dtype(node, dy, x));
    ge2_shape y;
    GE2_TRY(check_geometry(node, x, w, &y));
    if (!ge2_shape_equal(dy->shape, y))
        return ge2_error(GE2_ERR_SHAPE, GE2_OP_PREFIX "%s: dy %s is %s, the forward's output is %s",
                         ge2_op_name(node->op), dy->name, GE2_SHAPE_STR(dy->shape), GE2_SHAPE_STR(y));
    return GE2_OK;
}

/* dy, x (shape), w -> dx */
ge2_status ge2_infer_CONV2D_GRAD_INPUT(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    GE2_TRY(check_dy(node, &in[0], &in[1], &in[2]));
    out[0] = (ge2_desc){in[0].dtype, in[1].shape, NULL};
    return GE2_OK;
}

/* dy, w (shape), x -> dw[, db [O]] */
ge2_status ge2_infer_CONV2D_GRAD_WEIGHT(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    GE2_TRY(ge2_infer_need_outputs(node, 1, 2));
    GE2_TRY(check_dy(node, &in[0], &in[2], &in[1]));
    out[0] = (ge2_desc){in[0].dtype, in[1].shape, NULL};
    if (node->n_outputs > 1)
        out[1] = (ge2_desc){in[0].dtype, ge2_shape1(in[1].shape.dim[0]), NULL};
    return GE2_OK;
}
