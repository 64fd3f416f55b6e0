/* Inference of the shape family: RESHAPE, TRANSPOSE, CONCAT, SLICE and
 * SLICE_BACKWARD, a shape-only-reference op the backward emits. Sizes that
 * depend on the batch come from a `like` input, never from a literal, so a
 * graph key can re-run this with another batch. */
#include "ops/shape/shape.h"

ge2_status ge2_infer_RESHAPE(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    const ge2_desc *x = &in[0];
    int64_t n = ge2_shape_numel(x->shape);
    ge2_shape s;
    if (node->n_inputs == 2) {
        s = in[1].shape;
    } else {
        s = GE2_ATTRS(ge2_reshape_attrs, node->attrs)->shape;
        int infer_at = -1;
        int64_t known = 1;
        if (s.ndim < 0 || s.ndim > GE2_MAX_DIMS)
            return ge2_error(GE2_ERR_SHAPE, "ge2_reshape: target has %d dims, at most %d", s.ndim, GE2_MAX_DIMS);
        for (int i = 0; i < s.ndim; i++) {
            if (s.dim[i] == -1 && infer_at < 0)
                infer_at = i;
            else if (s.dim[i] >= 1)
                known *= s.dim[i];
            else
                return ge2_error(GE2_ERR_SHAPE, "ge2_reshape: target %s of '%s' %s: dims must be >= 1 with at most one -1",
                                 GE2_SHAPE_STR(s), x->name, GE2_SHAPE_STR(x->shape));
        }
        if (infer_at >= 0) {
            if (n % known != 0)
                return ge2_error(GE2_ERR_SHAPE, "ge2_reshape: cannot reshape '%s' %s to %s: %lld elements", x->name,
                                 GE2_SHAPE_STR(x->shape), GE2_SHAPE_STR(s), (long long)n);
            s.dim[infer_at] = n / known;
        }
    }
    if (ge2_shape_numel(s) != n)
        return ge2_error(GE2_ERR_SHAPE, "ge2_reshape: cannot reshape '%s' %s to %s: element counts differ", x->name,
                         GE2_SHAPE_STR(x->shape), GE2_SHAPE_STR(s));
    out[0] = (ge2_desc){x->dtype, s, NULL};
    return GE2_OK;
}

ge2_status ge2_infer_PERMUTE(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    const int n = in[0].shape.ndim, *perm = GE2_ATTRS(ge2_permute_attrs, node->attrs)->perm;
    bool seen[GE2_MAX_DIMS] = {false};
    ge2_shape s = in[0].shape;
    for (int i = 0; i < n; i++) {
        if (perm[i] < 0 || perm[i] >= n || seen[perm[i]])
            return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_permute: %s is %s; perm must hold each of 0..%d once",
                             in[0].name, GE2_SHAPE_STR(in[0].shape), n - 1);
        seen[perm[i]] = true;
        s.dim[i] = in[0].shape.dim[perm[i]];
    }
    out[0] = (ge2_desc){in[0].dtype, s, NULL};
    return GE2_OK;
}

ge2_status ge2_infer_TRANSPOSE(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    GE2_TRY(ge2_infer_need_ndim(node, &in[0], 2));
    out[0] = (ge2_desc){in[0].dtype, ge2_shape2(in[0].shape.dim[1], in[0].shape.dim[0]), NULL};
    return GE2_OK;
}

ge2_status ge2_infer_CONCAT(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    int axis;
    GE2_TRY(ge2_infer_axis(node, &in[0], GE2_ATTRS(ge2_concat_attrs, node->attrs)->axis, &axis));
    ge2_shape s = in[0].shape;
    for (int i = 1; i < node->n_inputs; i++) {
        GE2_TRY(ge2_infer_need_same_dtype(node, &in[0], &in[i]));
        bool ok = in[i].shape.ndim == s.ndim;
        for (int d = 0; ok && d < s.ndim; d++)
            ok = d == axis || in[i].shape.dim[d] == s.dim[d];
        if (!ok)
            return ge2_error(GE2_ERR_SHAPE, "ge2_concat: shapes differ off axis %d: %s is %s, %s is %s", axis,
                             in[0].name, GE2_SHAPE_STR(in[0].shape), in[i].name, GE2_SHAPE_STR(in[i].shape));
        s.dim[axis] += in[i].shape.dim[axis];
    }
    out[0] = (ge2_desc){in[0].dtype, s, NULL};
    return GE2_OK;
}

/* The window [start, end) of `axis` must lie inside `whole`. */
static ge2_status check_window(const ge2_node *node, const ge2_desc *whole, int *axis)
{
    const ge2_slice_attrs *a = GE2_ATTRS(ge2_slice_attrs, node->attrs);
    GE2_TRY(ge2_infer_axis(node, whole, a->axis, axis));
    if (a->start < 0 || a->start >= a->end || a->end > whole->shape.dim[*axis])
        return ge2_error(GE2_ERR_SHAPE, GE2_OP_PREFIX "%s: window [%lld, %lld) of axis %d is outside '%s' %s",
                         ge2_op_name(node->op), (long long)a->start, (long long)a->end, a->axis, whole->name,
                         GE2_SHAPE_STR(whole->shape));
    return GE2_OK;
}

ge2_status ge2_infer_SLICE(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    int axis;
    GE2_TRY(check_window(node, &in[0], &axis));
    ge2_shape s = in[0].shape;
    s.dim[axis] = GE2_ATTRS(ge2_slice_attrs, node->attrs)->end - GE2_ATTRS(ge2_slice_attrs, node->attrs)->start;
    out[0] = (ge2_desc){in[0].dtype, s, NULL};
    return GE2_OK;
}

/* dy, like -> like's shape: zeros with dy in the window. */
ge2_status ge2_infer_SLICE_BACKWARD(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    int axis;
    GE2_TRY(check_window(node, &in[1], &axis));
    ge2_desc window;
    GE2_TRY(ge2_infer_SLICE(node, &in[1], &window));
    window.name = "window";
    GE2_TRY(ge2_infer_need_same_shape(node, &in[0], &window));
    out[0] = (ge2_desc){in[0].dtype, in[1].shape, NULL};
    return GE2_OK;
}
