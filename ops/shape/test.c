/* The shape family's test cases: for each op a random valid instance (its
 * case body) and its float64 forward reference, registered for the
 * table-driven suites (tests/support/op_cases.h). */
#include <math.h>
#include <string.h>

#include "graph/error.h"
#include "ops/shape/shape.h"
#include "tests/support/op_cases.h"

/* ---------------------------------------------------------- case bodies */

static ge2_status case_reshape(ge2_case_ctx *c)
{
    int64_t a = ge2_case_irange(c, 1, 4), b = ge2_case_irange(c, 1, 4), d = ge2_case_irange(c, 1, 3);
    ge2_tensor *x, *y;
    GE2_TRY(ge2_case_operand(c, ge2_shape3(a, b, d), &x));
    ge2_shape to = ge2_case_coin(c) ? ge2_shape2(-1, d) : ge2_shape4(d, 1, b, a);
    GE2_TRY(ge2_reshape(c->inst->graph, x, to, &y));
    return ge2_case_last_node(c);
}

static ge2_status case_permute(ge2_case_ctx *c)
{
    ge2_tensor *x, *y;
    GE2_TRY(ge2_case_operand(c, ge2_case_random_shape(c, 1, 4), &x));
    int perm[GE2_MAX_DIMS], n = x->shape.ndim;
    for (int i = 0; i < n; i++)
        perm[i] = i;
    for (int i = n - 1; i > 0; i--) { /* a random permutation */
        int j = (int)ge2_case_irange(c, 0, i), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    GE2_TRY(ge2_permute(c->inst->graph, x, perm, n, &y));
    return ge2_case_last_node(c);
}

static ge2_status case_transpose(ge2_case_ctx *c)
{
    ge2_tensor *x, *y;
    GE2_TRY(ge2_case_operand(c, ge2_case_random_shape(c, 2, 2), &x));
    GE2_TRY(ge2_transpose(c->inst->graph, x, &y));
    return ge2_case_last_node(c);
}

static ge2_status case_concat(ge2_case_ctx *c)
{
    ge2_shape s = ge2_case_random_shape(c, 1, 3);
    int axis = (int)ge2_case_irange(c, 0, s.ndim - 1), n = (int)ge2_case_irange(c, 1, 3);
    ge2_tensor *xs[3], *y;
    for (int i = 0; i < n; i++) {
        s.dim[axis] = ge2_case_irange(c, 1, 3);
        GE2_TRY(ge2_case_operand(c, s, &xs[i]));
    }
    GE2_TRY(ge2_concat(c->inst->graph, xs, n, axis - (ge2_case_coin(c) ? s.ndim : 0), &y));
    return ge2_case_last_node(c);
}

static void random_window(ge2_case_ctx *c, ge2_shape s, ge2_attrs *a)
{
    memset(a, 0, sizeof *a);
    GE2_ATTRS(ge2_slice_attrs, *a)->axis = (int)ge2_case_irange(c, 0, s.ndim - 1);
    GE2_ATTRS(ge2_slice_attrs, *a)->start = ge2_case_irange(c, 0, s.dim[GE2_ATTRS(ge2_slice_attrs, *a)->axis] - 1);
    GE2_ATTRS(ge2_slice_attrs, *a)->end = ge2_case_irange(c, GE2_ATTRS(ge2_slice_attrs, *a)->start + 1, s.dim[GE2_ATTRS(ge2_slice_attrs, *a)->axis]);
}

static ge2_status case_slice(ge2_case_ctx *c)
{
    ge2_shape s = ge2_case_random_shape(c, 1, 3);
    ge2_tensor *x, *y;
    ge2_attrs a;
    random_window(c, s, &a);
    GE2_TRY(ge2_case_operand(c, s, &x));
    GE2_TRY(ge2_slice(c->inst->graph, x, GE2_ATTRS(ge2_slice_attrs, a)->axis, GE2_ATTRS(ge2_slice_attrs, a)->start, GE2_ATTRS(ge2_slice_attrs, a)->end, &y));
    return ge2_case_last_node(c);
}

static ge2_status case_slice_backward(ge2_case_ctx *c)
{
    ge2_shape s = ge2_case_random_shape(c, 1, 3), w;
    ge2_attrs a;
    random_window(c, s, &a);
    w = s;
    w.dim[GE2_ATTRS(ge2_slice_attrs, a)->axis] = GE2_ATTRS(ge2_slice_attrs, a)->end - GE2_ATTRS(ge2_slice_attrs, a)->start;
    ge2_tensor *ts[2];
    GE2_TRY(ge2_case_operand(c, w, &ts[0]));
    GE2_TRY(ge2_case_plain(c, s, &ts[1]));
    return ge2_case_direct(c, GE2_OP_SLICE_BACKWARD, ts, 2, 1, &a);
}

/* ------------------------------------------------- float64 references */

/* SLICE reads the window, SLICE_BACKWARD writes it into zeros; CONCAT stacks windows. */
static void ref_window(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    int64_t idx[GE2_MAX_DIMS];
    if (node->op == GE2_OP_CONCAT) {
        int axis = GE2_ATTRS(ge2_concat_attrs, node->attrs)->axis;
        for (int64_t i = 0; i < ge2_ref_numel(out[0].shape); i++) {
            ge2_ref_unravel(i, out[0].shape, idx);
            int k = 0;
            while (idx[axis] >= in[k].shape.dim[axis])
                idx[axis] -= in[k++].shape.dim[axis];
            out[0].v[i] = in[k].v[ge2_ref_ravel(idx, in[k].shape)];
        }
        return;
    }
    const ge2_slice_attrs *a = GE2_ATTRS(ge2_slice_attrs, node->attrs);
    bool forward = node->op == GE2_OP_SLICE;
    ge2_shape whole = forward ? in[0].shape : out[0].shape;
    for (int64_t i = 0; i < ge2_ref_numel(whole); i++) {
        ge2_ref_unravel(i, whole, idx);
        bool inside = idx[a->axis] >= a->start && idx[a->axis] < a->end;
        idx[a->axis] -= a->start;
        if (forward && inside)
            out[0].v[ge2_ref_ravel(idx, out[0].shape)] = in[0].v[i];
        else if (!forward)
            out[0].v[i] = inside ? in[0].v[ge2_ref_ravel(idx, in[0].shape)] : 0;
    }
}

static void ref_reshape(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    (void)node;
    memcpy(out[0].v, in[0].v, sizeof(double) * (size_t)ge2_ref_numel(out[0].shape));
}

static void ref_transpose(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    (void)node;
    for (int64_t i = 0; i < in[0].shape.dim[0]; i++)
        for (int64_t j = 0; j < in[0].shape.dim[1]; j++)
            out[0].v[j * in[0].shape.dim[0] + i] = in[0].v[i * in[0].shape.dim[1] + j];
}

/* y[i0, .., in] = x at the index whose dim perm[k] is i_k */
static void ref_permute(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    int64_t yi[GE2_MAX_DIMS], xi[GE2_MAX_DIMS];
    for (int64_t e = 0; e < ge2_ref_numel(out[0].shape); e++) {
        ge2_ref_unravel(e, out[0].shape, yi);
        for (int k = 0; k < out[0].shape.ndim; k++)
            xi[GE2_ATTRS(ge2_permute_attrs, node->attrs)->perm[k]] = yi[k];
        out[0].v[e] = in[0].v[ge2_ref_ravel(xi, in[0].shape)];
    }
}

/* --------------------------------------------------------- registration */

GE2_OP_TEST(reshape, GE2_CASE_GRADIENT, case_reshape, ref_reshape)
GE2_OP_TEST(transpose, GE2_CASE_GRADIENT, case_transpose, ref_transpose)
GE2_OP_TEST(permute, GE2_CASE_GRADIENT, case_permute, ref_permute)
GE2_OP_TEST(concat, GE2_CASE_GRADIENT, case_concat, ref_window)
GE2_OP_TEST(slice, GE2_CASE_GRADIENT, case_slice, ref_window)
GE2_OP_TEST(slice_backward, GE2_CASE_GRADIENT, case_slice_backward, ref_window)
