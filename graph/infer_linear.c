/* Inference of the GEMM family: LINEAR and MATMUL. */
#include "graph/graph_internal.h"
#include "kernels/activation_math.h"

ge2_status ge2_infer_LINEAR(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    const ge2_desc *x = &in[0], *w = &in[1], *b = node->n_inputs > 2 ? &in[2] : NULL;
    GE2_TRY(ge2_infer_need_float(node, x, "x"));
    GE2_TRY(ge2_infer_need_same_dtype(node, x, w));
    if (b)
        GE2_TRY(ge2_infer_need_same_dtype(node, x, b));
    const ge2_linear_attrs *a = &node->attrs.linear;
    if ((unsigned)a->act >= GE2_ACT_COUNT)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_linear: unknown activation %d", (int)a->act);
    /* The pre-activation z is stashed only when the derivative cannot be had from y. */
    GE2_TRY(ge2_infer_need_outputs(node, 1, ge2_act_grad_from_output(a->act, a->slope) ? 1 : 2));
    if (x->shape.ndim != 2 || w->shape.ndim != 2)
        return ge2_error(GE2_ERR_SHAPE, "ge2_linear: x [B,in] and w [out,in] must be 2-D: x is %s, w is %s",
                         GE2_SHAPE_STR(x->shape), GE2_SHAPE_STR(w->shape));
    if (x->shape.dim[1] != w->shape.dim[1])
        return ge2_error(GE2_ERR_SHAPE, "ge2_linear: inner dims differ: %s is %s, %s is %s", x->name,
                         GE2_SHAPE_STR(x->shape), w->name, GE2_SHAPE_STR(w->shape));
    if (b && (b->shape.ndim != 1 || b->shape.dim[0] != w->shape.dim[0]))
        return ge2_error(GE2_ERR_SHAPE, "ge2_linear: bias %s is %s, expected [%lld] for w %s", b->name,
                         GE2_SHAPE_STR(b->shape), (long long)w->shape.dim[0], GE2_SHAPE_STR(w->shape));
    for (int i = 0; i < node->n_outputs; i++)
        out[i] = (ge2_desc){x->dtype, ge2_shape2(x->shape.dim[0], w->shape.dim[0]), NULL};
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
    const ge2_matmul_attrs *t = &node->attrs.matmul;
    int64_t m = a->shape.dim[nd - 2 + t->trans_a], ka = a->shape.dim[nd - 1 - t->trans_a];
    int64_t kb = b->shape.dim[nd - 2 + t->trans_b], n = b->shape.dim[nd - 1 - t->trans_b];
    if (ka != kb)
        return ge2_error(GE2_ERR_SHAPE, "ge2_matmul: inner dims differ: %s%s is %s, %s%s is %s", a->name,
                         t->trans_a ? "ᵀ" : "", GE2_SHAPE_STR(a->shape), b->name, t->trans_b ? "ᵀ" : "",
                         GE2_SHAPE_STR(b->shape));
    out[0] = (ge2_desc){a->dtype, nd == 2 ? ge2_shape2(m, n) : ge2_shape3(a->shape.dim[0], m, n), NULL};
    return GE2_OK;
}
