/* The reduce family's test cases: for each op a random valid instance (its
 * case body) and its float64 forward reference, registered for the
 * table-driven suites (tests/support/op_cases.h). */
#include <math.h>
#include <string.h>

#include "graph/error.h"
#include "ops/reduce/reduce.h"
#include "tests/support/op_cases.h"

/* ---------------------------------------------------------- case bodies */

static ge2_status case_reduce(ge2_case_ctx *c, bool mean)
{
    ge2_tensor *x, *y;
    ge2_shape s = ge2_case_random_shape(c, 1, 4);
    GE2_TRY(ge2_case_operand(c, s, &x));
    int axis = (int)ge2_case_irange(c, -1, s.ndim - 1);
    ge2_graph *g = c->inst->graph;
    if (ge2_case_coin(c))
        GE2_TRY(mean ? ge2_mean_all(g, x, &y) : ge2_sum_all(g, x, &y));
    else
        GE2_TRY(mean ? ge2_mean(g, x, axis, &y) : ge2_sum(g, x, axis, &y));
    return ge2_case_last_node(c);
}

static ge2_status case_sum(ge2_case_ctx *c) { return case_reduce(c, false); }

static ge2_status case_mean(ge2_case_ctx *c) { return case_reduce(c, true); }

/* EXPAND (small -> big) and REDUCE_TO (big -> small), with a scale and maybe the mean factor. */
static ge2_status case_broadcast(ge2_case_ctx *c, ge2_op op)
{
    ge2_shape big, small;
    ge2_case_broadcast_shapes(c, &big, &small);
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    GE2_ATTRS(ge2_expand_attrs, a)->scale = ge2_case_uniform(c, 0.5, 2);
    GE2_ATTRS(ge2_expand_attrs, a)->mean = ge2_case_coin(c);
    ge2_tensor *ts[2];
    GE2_TRY(ge2_case_operand(c, op == GE2_OP_EXPAND ? small : big, &ts[0]));
    GE2_TRY(ge2_case_plain(c, op == GE2_OP_EXPAND ? big : small, &ts[1]));
    return ge2_case_direct(c, op, ts, 2, 1, &a);
}

static ge2_status case_expand(ge2_case_ctx *c) { return case_broadcast(c, GE2_OP_EXPAND); }

static ge2_status case_reduce_to(ge2_case_ctx *c) { return case_broadcast(c, GE2_OP_REDUCE_TO); }

/* ------------------------------------------------- float64 references */

static void ref_reduce(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    int axis = GE2_ATTRS(ge2_reduce_attrs, node->attrs)->axis;
    int64_t n = ge2_ref_numel(in[0].shape), idx[GE2_MAX_DIMS];
    memset(out[0].v, 0, sizeof(double) * (size_t)ge2_ref_numel(out[0].shape));
    for (int64_t i = 0; i < n; i++) {
        ge2_ref_unravel(i, in[0].shape, idx);
        int64_t o = 0;
        if (axis != GE2_AXIS_ALL) {
            int64_t j[GE2_MAX_DIMS];
            for (int d = 0, k = 0; d < in[0].shape.ndim; d++)
                if (d != axis)
                    j[k++] = idx[d];
            o = ge2_ref_ravel(j, out[0].shape);
        }
        out[0].v[o] += in[0].v[i];
    }
    int64_t count = axis == GE2_AXIS_ALL ? n : in[0].shape.dim[axis];
    for (int64_t o = 0; node->op == GE2_OP_MEAN && o < ge2_ref_numel(out[0].shape); o++)
        out[0].v[o] /= (double)count;
}

static void ref_broadcast(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    bool expand = node->op == GE2_OP_EXPAND;
    ge2_shape big = expand ? out[0].shape : in[0].shape, small = expand ? in[0].shape : out[0].shape;
    double scale = GE2_ATTRS(ge2_expand_attrs, node->attrs)->scale;
    if (GE2_ATTRS(ge2_expand_attrs, node->attrs)->mean)
        scale *= (double)ge2_ref_numel(small) / (double)ge2_ref_numel(big);
    int64_t idx[GE2_MAX_DIMS];
    memset(out[0].v, 0, sizeof(double) * (size_t)ge2_ref_numel(out[0].shape));
    for (int64_t i = 0; i < ge2_ref_numel(big); i++) {
        ge2_ref_unravel(i, big, idx);
        int64_t j = ge2_ref_broadcast_index(idx, big, small);
        if (expand)
            out[0].v[i] = in[0].v[j] * scale;
        else
            out[0].v[j] += in[0].v[i] * scale;
    }
}

/* --------------------------------------------------------- registration */

GE2_OP_TEST(sum, GE2_CASE_GRADIENT, case_sum, ref_reduce)
GE2_OP_TEST(mean, GE2_CASE_GRADIENT, case_mean, ref_reduce)
GE2_OP_TEST(expand, GE2_CASE_GRADIENT, case_expand, ref_broadcast)
GE2_OP_TEST(reduce_to, GE2_CASE_GRADIENT, case_reduce_to, ref_broadcast)
