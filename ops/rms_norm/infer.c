/* Shape and dtype inference of the RMS norm family. */
#include "graph/error.h"
#include "ops/rms_norm/rms_norm.h"

/* saved [rows] in x's dtype */
static ge2_status check_saved(const ge2_node *node, const ge2_desc *x, const ge2_desc *saved)
{
    GE2_TRY(ge2_infer_need_same_dtype(node, x, saved));
    const int64_t rows = ge2_ln_geom_of(x->shape).rows;
    if (saved->shape.ndim != 1 || saved->shape.dim[0] != rows)
        return ge2_error(GE2_ERR_SHAPE, GE2_OP_PREFIX "%s: saved %s is %s, expected [%lld] (a value per row of %s %s)",
                         ge2_op_name(node->op), saved->name, GE2_SHAPE_STR(saved->shape), (long long)rows, x->name,
                         GE2_SHAPE_STR(x->shape));
    return GE2_OK;
}

/* x [..., C], weight [C] -> y [..., C], saved [rows] */
ge2_status ge2_infer_RMS_NORM(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    GE2_TRY(ge2_infer_need_outputs(node, 1, 2));
    GE2_TRY(ge2_norm_check_rows_x(node, &in[0]));
    GE2_TRY(ge2_norm_check_row_vector(node, &in[0], &in[1], "weight"));
    const double eps = GE2_ATTRS(ge2_rms_norm_attrs, node->attrs)->eps;
    if (!(eps > 0))
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_rms_norm: eps %g must be > 0", eps);
    out[0] = (ge2_desc){in[0].dtype, in[0].shape, NULL};
    if (node->n_outputs > 1)
        out[1] = (ge2_desc){in[0].dtype, ge2_shape1(ge2_ln_geom_of(in[0].shape).rows), NULL};
    return GE2_OK;
}

/* dy, x, weight, saved -> dx [..., C], dweight [C] */
ge2_status ge2_infer_RMS_NORM_GRAD(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    GE2_TRY(ge2_infer_need_outputs(node, 2, 2));
    GE2_TRY(ge2_norm_check_rows_x(node, &in[1]));
    GE2_TRY(ge2_infer_need_same_dtype(node, &in[0], &in[1]));
    GE2_TRY(ge2_infer_need_same_shape(node, &in[0], &in[1]));
    GE2_TRY(ge2_norm_check_row_vector(node, &in[1], &in[2], "weight"));
    GE2_TRY(check_saved(node, &in[1], &in[3]));
    out[0] = (ge2_desc){in[1].dtype, in[1].shape, NULL};
    out[1] = (ge2_desc){in[1].dtype, in[2].shape, NULL};
    return GE2_OK;
}
