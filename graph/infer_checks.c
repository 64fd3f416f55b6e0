/* The checks ops' inference functions share: each reports
 * "ge2_<op>: <what> ..." and returns the status. */
#include "graph/graph_internal.h"

ge2_status ge2_infer_need_float(const ge2_node *node, const ge2_desc *d, const char *what)
{
    if (ge2_dtype_is_float(d->dtype))
        return GE2_OK;
    return ge2_error(GE2_ERR_DTYPE, GE2_OP_PREFIX "%s: %s '%s' is %s; this op takes f32 (or f64 on the CPU)",
                     ge2_op_name(node->op), what, d->name, ge2_dtype_name(d->dtype));
}

ge2_status ge2_infer_need_same_dtype(const ge2_node *node, const ge2_desc *a, const ge2_desc *b)
{
    if (a->dtype == b->dtype)
        return GE2_OK;
    return ge2_error(GE2_ERR_DTYPE, GE2_OP_PREFIX "%s: dtypes differ: '%s' is %s, '%s' is %s", ge2_op_name(node->op),
                     a->name, ge2_dtype_name(a->dtype), b->name, ge2_dtype_name(b->dtype));
}

ge2_status ge2_infer_need_same_shape(const ge2_node *node, const ge2_desc *a, const ge2_desc *b)
{
    if (ge2_shape_equal(a->shape, b->shape))
        return GE2_OK;
    return ge2_error(GE2_ERR_SHAPE, GE2_OP_PREFIX "%s: shapes differ: %s is %s, %s is %s", ge2_op_name(node->op),
                     a->name, GE2_SHAPE_STR(a->shape), b->name, GE2_SHAPE_STR(b->shape));
}

ge2_status ge2_infer_need_ndim(const ge2_node *node, const ge2_desc *d, int ndim)
{
    if (d->shape.ndim == ndim)
        return GE2_OK;
    return ge2_error(GE2_ERR_SHAPE, GE2_OP_PREFIX "%s: '%s' must be %d-D, is %s", ge2_op_name(node->op), d->name, ndim,
                     GE2_SHAPE_STR(d->shape));
}

ge2_status ge2_infer_need_outputs(const ge2_node *node, int lo, int hi)
{
    if (node->n_outputs >= lo && node->n_outputs <= hi)
        return GE2_OK;
    return ge2_error(GE2_ERR_INVALID_ARGUMENT, GE2_OP_PREFIX "%s: makes %d..%d outputs here, asked for %d",
                     ge2_op_name(node->op), lo, hi, node->n_outputs);
}

ge2_status ge2_infer_axis(const ge2_node *node, const ge2_desc *d, int axis, int *out)
{
    int nd = d->shape.ndim;
    int a = axis < 0 ? axis + nd : axis;
    if (a < 0 || a >= nd)
        return ge2_error(GE2_ERR_SHAPE, GE2_OP_PREFIX "%s: axis %d out of range for '%s' %s", ge2_op_name(node->op),
                         axis, d->name, GE2_SHAPE_STR(d->shape));
    *out = a;
    return GE2_OK;
}
