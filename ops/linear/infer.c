/* Inference of the GEMM family: LINEAR, MATMUL and LINEAR's fused backward GEMMs. */
#include "ops/linear/linear.h"
#include "kernels/activation_math.h"

ge2_status ge2_infer_LINEAR(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    const ge2_desc *x = &in[0], *w = &in[1], *b = node->n_inputs > 2 ? &in[2] : NULL;
    GE2_TRY(ge2_infer_need_float(node, x, "x"));
    GE2_TRY(ge2_infer_need_same_dtype(node, x, w));
    if (b)
        GE2_TRY(ge2_infer_need_same_dtype(node, x, b));
    const ge2_linear_attrs *a = GE2_ATTRS(ge2_linear_attrs, node->attrs);
    if ((unsigned)a->act >= GE2_ACT_COUNT)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_linear: unknown activation %d", (int)a->act);
    ge2_linear_stash stash = ge2_linear_stash_of(a->act, a->slope);
    GE2_TRY(ge2_infer_need_outputs(node, 1, stash == GE2_STASH_NONE ? 1 : 2));
    if (x->shape.ndim != 2 || w->shape.ndim != 2)
        return ge2_error(GE2_ERR_SHAPE, "ge2_linear: x [B,in] and w [out,in] must be 2-D: x is %s, w is %s",
                         GE2_SHAPE_STR(x->shape), GE2_SHAPE_STR(w->shape));
    if (x->shape.dim[1] != w->shape.dim[1])
        return ge2_error(GE2_ERR_SHAPE, "ge2_linear: inner dims differ: %s is %s, %s is %s", x->name,
                         GE2_SHAPE_STR(x->shape), w->name, GE2_SHAPE_STR(w->shape));
    if (b && (b->shape.ndim != 1 || b->shape.dim[0] != w->shape.dim[0]))
        return ge2_error(GE2_ERR_SHAPE, "ge2_linear: bias %s is %s, expected [%lld] for w %s", b->name,
                         GE2_SHAPE_STR(b->shape), (long long)w->shape.dim[0], GE2_SHAPE_STR(w->shape));
    int64_t rows = x->shape.dim[0], n = w->shape.dim[0];
    out[0] = (ge2_desc){x->dtype, ge2_shape2(rows, n), NULL};
    if (node->n_outputs > 1)
        out[1] = stash == GE2_STASH_RELU_MASK ? (ge2_desc){GE2_U8, ge2_shape2(rows, ge2_relu_mask_row_bytes(n)), NULL}
                                              : out[0];
    return GE2_OK;
}

ge2_status ge2_infer_MATMUL(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    const ge2_desc *a = &in[0], *b = &in[1];
    GE2_TRY(ge2_infer_need_float(node, a, "a"));
    GE2_TRY(ge2_infer_need_same_dtype(node, a, b));
    int nd = a->shape.ndim;
    if ((nd != 2 && nd != 3) || b->shape.ndim != nd || (nd == 3 && a->shape.dim[0] != b->shape.dim[0]))
        return ge2_error(GE2_ERR_SHAPE, "ge2_matmul: operands must be both 2-D or both 3-D with equal batch: %s is %s, %s is %s",
                         a->name, GE2_SHAPE_STR(a->shape), b->name, GE2_SHAPE_STR(b->shape));
    const ge2_matmul_attrs *t = GE2_ATTRS(ge2_matmul_attrs, node->attrs);
    int64_t m = a->shape.dim[nd - 2 + t->trans_a], ka = a->shape.dim[nd - 1 - t->trans_a];
    int64_t kb = b->shape.dim[nd - 2 + t->trans_b], n = b->shape.dim[nd - 1 - t->trans_b];
    if (ka != kb)
        return ge2_error(GE2_ERR_SHAPE, "ge2_matmul: inner dims differ: %s%s is %s, %s%s is %s", a->name,
                         t->trans_a ? "ᵀ" : "", GE2_SHAPE_STR(a->shape), b->name, t->trans_b ? "ᵀ" : "",
                         GE2_SHAPE_STR(b->shape));
    out[0] = (ge2_desc){a->dtype, nd == 2 ? ge2_shape2(m, n) : ge2_shape3(a->shape.dim[0], m, n), NULL};
    return GE2_OK;
}

/* dz [B, out], w [out, in][, saved] -> dx [B, in][, db [in]][, act(z) [B, in]].
 * saved is the previous layer's stash: z or y [B, in] in dz's dtype, or
 * relu's bit-mask; act(z) goes to output again (the last; -1: none) and
 * needs a saved z. */
ge2_status ge2_infer_linear_grad_input_with(const ge2_node *node, const ge2_desc *in, ge2_desc *out, int again)
{
    const ge2_desc *dz = &in[0], *w = &in[1], *saved = node->n_inputs > 2 ? &in[2] : NULL;
    GE2_TRY(ge2_infer_need_float(node, dz, "dz"));
    GE2_TRY(ge2_infer_need_same_dtype(node, dz, w));
    const ge2_act_attrs *a = GE2_ATTRS(ge2_act_attrs, node->attrs);
    if ((unsigned)a->act >= GE2_ACT_COUNT)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_%s: unknown activation %d", ge2_node_op_name(node), (int)a->act);
    if (dz->shape.ndim != 2 || w->shape.ndim != 2 || dz->shape.dim[1] != w->shape.dim[0])
        return ge2_error(GE2_ERR_SHAPE, "ge2_%s: need dz [B,out] and w [out,in]: %s is %s, %s is %s", ge2_node_op_name(node),
                         dz->name, GE2_SHAPE_STR(dz->shape), w->name, GE2_SHAPE_STR(w->shape));
    int64_t rows = dz->shape.dim[0], n = w->shape.dim[1];
    if ((a->act == GE2_ACT_NONE) != !saved)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_%s: activation %s %s a saved input", ge2_node_op_name(node),
                         ge2_activation_name(a->act), saved ? "takes no" : "needs");
    if (saved) {
        /* relu from z is relu from its bit-mask: the only relu stash there is */
        bool mask = a->act == GE2_ACT_RELU && !a->from_output;
        ge2_dtype want_dtype = mask ? GE2_U8 : dz->dtype;
        ge2_shape want = ge2_shape2(rows, mask ? ge2_relu_mask_row_bytes(n) : n);
        if (saved->dtype != want_dtype)
            return ge2_error(GE2_ERR_DTYPE, "ge2_%s: saved %s is %s, expected %s for %s%s", ge2_node_op_name(node),
                             saved->name, ge2_dtype_name(saved->dtype), ge2_dtype_name(want_dtype),
                             ge2_activation_name(a->act), a->from_output ? " from y" : "");
        if (!ge2_shape_equal(saved->shape, want))
            return ge2_error(GE2_ERR_SHAPE, "ge2_%s: saved %s is %s, expected %s", ge2_node_op_name(node), saved->name,
                             GE2_SHAPE_STR(saved->shape), GE2_SHAPE_STR(want));
    }
    if (again >= 0 && (!saved || a->from_output || saved->dtype == GE2_U8 || again != node->n_outputs - 1 || again < 1))
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_%s: act(z) is made again from a saved z as the last of 2 or "
                         "3 outputs: %s, %d output(s)", ge2_node_op_name(node),
                         !saved ? "nothing saved" : saved->dtype == GE2_U8 || a->from_output ? "no z saved" : "z saved",
                         node->n_outputs);
    out[0] = (ge2_desc){dz->dtype, ge2_shape2(rows, n), NULL};
    const int db = ge2_linear_grad_input_db(node->n_outputs, again);
    if (db >= 0)
        out[db] = (ge2_desc){dz->dtype, ge2_shape1(n), NULL};
    if (again >= 0)
        out[again] = (ge2_desc){dz->dtype, ge2_shape2(rows, n), NULL};
    return GE2_OK;
}

ge2_status ge2_infer_LINEAR_GRAD_INPUT(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    return ge2_infer_linear_grad_input_with(node, in, out, -1);
}

/* dz [B, out], x [B, in] -> dw [out, in][, db [out]] */
ge2_status ge2_infer_LINEAR_GRAD_WEIGHT(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    const ge2_desc *dz = &in[0], *x = &in[1];
    GE2_TRY(ge2_infer_need_float(node, dz, "dz"));
    GE2_TRY(ge2_infer_need_same_dtype(node, dz, x));
    if (dz->shape.ndim != 2 || x->shape.ndim != 2 || dz->shape.dim[0] != x->shape.dim[0])
        return ge2_error(GE2_ERR_SHAPE, "ge2_linear_grad_weight: need dz [B,out] and x [B,in]: %s is %s, %s is %s",
                         dz->name, GE2_SHAPE_STR(dz->shape), x->name, GE2_SHAPE_STR(x->shape));
    out[0] = (ge2_desc){dz->dtype, ge2_shape2(dz->shape.dim[1], x->shape.dim[1]), NULL};
    if (node->n_outputs > 1)
        out[1] = (ge2_desc){dz->dtype, ge2_shape1(dz->shape.dim[1]), NULL};
    return GE2_OK;
}
