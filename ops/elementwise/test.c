/* The elementwise family's test cases: for each op a random valid instance (its
 * case body) and its float64 forward reference, registered for the
 * table-driven suites (tests/support/op_cases.h). */
#include <math.h>
#include <string.h>

#include "graph/error.h"
#include "ops/elementwise/elementwise.h"
#include "tests/support/op_cases.h"

/* ---------------------------------------------------------- case bodies */

static ge2_status case_binary(ge2_case_ctx *c, ge2_status (*fn)(ge2_graph *, ge2_tensor *, ge2_tensor *, ge2_tensor **))
{
    ge2_shape sa, sb;
    ge2_case_broadcast_shapes(c, &sa, &sb);
    if (ge2_case_coin(c)) {
        ge2_shape t = sa;
        sa = sb;
        sb = t;
    }
    ge2_tensor *a, *b, *y;
    GE2_TRY(ge2_case_operand(c, sa, &a));
    GE2_TRY(ge2_case_operand(c, sb, &b));
    GE2_TRY(fn(c->inst->graph, a, b, &y));
    return ge2_case_last_node(c);
}

static ge2_status case_add(ge2_case_ctx *c) { return case_binary(c, ge2_add); }

static ge2_status case_sub(ge2_case_ctx *c) { return case_binary(c, ge2_sub); }

static ge2_status case_mul(ge2_case_ctx *c) { return case_binary(c, ge2_mul); }

static ge2_status case_scale(ge2_case_ctx *c)
{
    ge2_tensor *x, *y;
    GE2_TRY(ge2_case_operand(c, ge2_case_random_shape(c, 0, 4), &x));
    GE2_TRY(ge2_scale(c->inst->graph, x, ge2_case_uniform(c, -2, 2), &y));
    return ge2_case_last_node(c);
}

static ge2_status case_activation(ge2_case_ctx *c)
{
    ge2_tensor *x, *y;
    float slope;
    ge2_activation act = ge2_case_random_act(c, &slope);
    GE2_TRY(ge2_case_operand(c, ge2_case_random_shape(c, 1, 4), &x));
    GE2_TRY(ge2_activate(c->inst->graph, x, act, slope, &y));
    return ge2_case_last_node(c);
}

static ge2_status case_activation_backward(ge2_case_ctx *c)
{
    ge2_shape s = ge2_case_random_shape(c, 1, 4);
    ge2_attrs a = ge2_case_random_act_backward(c);
    ge2_tensor *ts[2];
    GE2_TRY(ge2_case_plain(c, s, &ts[0]));
    GE2_TRY(ge2_case_plain(c, s, &ts[1]));
    return ge2_case_direct(c, GE2_OP_ACTIVATION_BACKWARD, ts, 2, 1, &a);
}

/* ------------------------------------------------- float64 references */

static void ref_binary(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    int64_t idx[GE2_MAX_DIMS];
    for (int64_t i = 0; i < ge2_ref_numel(out[0].shape); i++) {
        ge2_ref_unravel(i, out[0].shape, idx);
        double a = in[0].v[ge2_ref_broadcast_index(idx, out[0].shape, in[0].shape)];
        double b = in[1].v[ge2_ref_broadcast_index(idx, out[0].shape, in[1].shape)];
        out[0].v[i] = node->op == GE2_OP_ADD ? a + b : node->op == GE2_OP_SUB ? a - b : a * b;
    }
}

static void ref_scale(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    for (int64_t i = 0; i < ge2_ref_numel(out[0].shape); i++)
        out[0].v[i] = GE2_ATTRS(ge2_scale_attrs, node->attrs)->alpha * in[0].v[i];
}

static void ref_activation(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    for (int64_t i = 0; i < ge2_ref_numel(out[0].shape); i++)
        out[0].v[i] = ge2_ref_act(GE2_ATTRS(ge2_act_attrs, node->attrs)->act, in[0].v[i], GE2_ATTRS(ge2_act_attrs, node->attrs)->slope);
}

static void ref_activation_backward(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    for (int64_t i = 0; i < ge2_ref_numel(out[0].shape); i++)
        out[0].v[i] = in[0].v[i] * ge2_ref_act_grad(GE2_ATTRS(ge2_act_attrs, node->attrs)->act, in[1].v[i], GE2_ATTRS(ge2_act_attrs, node->attrs)->from_output,
                                                    GE2_ATTRS(ge2_act_attrs, node->attrs)->slope);
}

/* --------------------------------------------------------- registration */

GE2_OP_TEST(add, GE2_CASE_GRADIENT, case_add, ref_binary)
GE2_OP_TEST(sub, GE2_CASE_GRADIENT, case_sub, ref_binary)
GE2_OP_TEST(mul, GE2_CASE_GRADIENT, case_mul, ref_binary)
GE2_OP_TEST(scale, GE2_CASE_GRADIENT, case_scale, ref_scale)
GE2_OP_TEST(activation, GE2_CASE_GRADIENT, case_activation, ref_activation)
GE2_OP_TEST(activation_backward, GE2_CASE_FORWARD, case_activation_backward, ref_activation_backward)
