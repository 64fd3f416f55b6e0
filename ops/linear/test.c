/* The linear family's test cases: for each op a random valid instance (its
 * case body) and its float64 forward reference, registered for the
 * table-driven suites (tests/support/op_cases.h). */
#include <math.h>
#include <string.h>

#include "graph/error.h"
#include "ops/linear/linear.h"
#include "ops/linear/test_cases.h"
#include "tests/support/op_cases.h"

/* ---------------------------------------------------------- case bodies */

/* ------------------------------------------------------------- the cases */

static ge2_status case_linear(ge2_case_ctx *c)
{
    int64_t b = ge2_case_irange(c, 1, 4), in = ge2_case_irange(c, 1, 5), out = ge2_case_irange(c, 1, 5);
    ge2_tensor *w, *x, *bias = NULL, *y;
    GE2_TRY(ge2_case_operand(c, ge2_shape2(out, in), &w));
    GE2_TRY(ge2_case_operand(c, ge2_shape2(b, in), &x));
    if (ge2_case_coin(c))
        GE2_TRY(ge2_case_operand(c, ge2_shape1(out), &bias));
    float slope;
    ge2_activation act = ge2_case_random_act(c, &slope);
    GE2_TRY(ge2_linear(c->inst->graph, x, w, bias, act, slope, &y));
    return ge2_case_last_node(c);
}

static ge2_status case_matmul(ge2_case_ctx *c)
{
    bool ta = ge2_case_coin(c), tb = ge2_case_coin(c), batched = ge2_case_coin(c);
    int64_t n = ge2_case_irange(c, 1, 3), m = ge2_case_irange(c, 1, 4), k = ge2_case_irange(c, 1, 4), p = ge2_case_irange(c, 1, 4);
    ge2_shape sa = ta ? ge2_shape2(k, m) : ge2_shape2(m, k), sb = tb ? ge2_shape2(p, k) : ge2_shape2(k, p);
    if (batched) {
        sa = ge2_shape3(n, sa.dim[0], sa.dim[1]);
        sb = ge2_shape3(n, sb.dim[0], sb.dim[1]);
    }
    ge2_tensor *a, *b, *y;
    GE2_TRY(ge2_case_operand(c, sa, &a));
    GE2_TRY(ge2_case_operand(c, sb, &b));
    GE2_TRY(ge2_matmul(c->inst->graph, a, b, ta, tb, &y));
    return ge2_case_last_node(c);
}

/* dz [B, out], w [out, in][, saved] -> dx[, db][, act(z)]: every
 * activation, each stash kind (relu's random bit-mask, z, y), with and
 * without db; with act(z) made again (test_cases.h), from z only. */
ge2_status ge2_linear_grad_input_case(ge2_case_ctx *c, ge2_op op, bool again)
{
    int64_t b = ge2_case_irange(c, 1, 4), out = ge2_case_irange(c, 1, 5), in = ge2_case_irange(c, 1, 12);
    ge2_attrs a = ge2_case_random_act_backward(c);
    ge2_act_attrs *act = GE2_ATTRS(ge2_act_attrs, a);
    if (again && (act->act == GE2_ACT_NONE || act->act == GE2_ACT_RELU)) /* (relu keeps a bit-mask, not z) */
        act->act = GE2_ACT_GELU_TANH;
    act->from_output = act->from_output && !again;
    ge2_tensor *ts[3];
    int n = 2;
    GE2_TRY(ge2_case_plain(c, ge2_shape2(b, out), &ts[0]));
    GE2_TRY(ge2_case_plain(c, ge2_shape2(out, in), &ts[1]));
    if (act->act == GE2_ACT_RELU && !act->from_output)
        GE2_TRY(ge2_case_feed(c, GE2_ROLE_INPUT, GE2_U8, ge2_shape2(b, (in + 127) / 128 * 16), 0, false, &ts[n++]));
    else if (act->act != GE2_ACT_NONE)
        GE2_TRY(ge2_case_plain(c, ge2_shape2(b, in), &ts[n++]));
    return ge2_case_direct(c, op, ts, n, (ge2_case_coin(c) ? 2 : 1) + again, &a);
}

static ge2_status case_linear_grad_input(ge2_case_ctx *c)
{
    return ge2_linear_grad_input_case(c, GE2_OP_LINEAR_GRAD_INPUT, false);
}

/* dz [B, out], x [B, in] -> dw[, db] */
static ge2_status case_linear_grad_weight(ge2_case_ctx *c)
{
    int64_t b = ge2_case_irange(c, 1, 6), out = ge2_case_irange(c, 1, 5), in = ge2_case_irange(c, 1, 5);
    ge2_tensor *ts[2];
    GE2_TRY(ge2_case_plain(c, ge2_shape2(b, out), &ts[0]));
    GE2_TRY(ge2_case_plain(c, ge2_shape2(b, in), &ts[1]));
    return ge2_case_direct(c, GE2_OP_LINEAR_GRAD_WEIGHT, ts, 2, ge2_case_coin(c) ? 2 : 1, NULL);
}

/* ------------------------------------------------- float64 references */

static void ref_linear(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    int64_t B = in[0].shape.dim[0], K = in[0].shape.dim[1], N = in[1].shape.dim[0];
    for (int64_t r = 0; r < B; r++)
        for (int64_t o = 0; o < N; o++) {
            double z = node->n_inputs > 2 ? in[2].v[o] : 0;
            for (int64_t k = 0; k < K; k++)
                z += in[0].v[r * K + k] * in[1].v[o * K + k];
            out[0].v[r * N + o] = ge2_ref_act(GE2_ATTRS(ge2_linear_attrs, node->attrs)->act, z, GE2_ATTRS(ge2_linear_attrs, node->attrs)->slope);
            if (node->n_outputs > 1 && GE2_ATTRS(ge2_linear_attrs, node->attrs)->act != GE2_ACT_RELU)
                out[1].v[r * N + o] = z;
            else if (node->n_outputs > 1) /* bytes of a bit-mask: rows of N bits padded to 128, LSB first */
                out[1].v[r * out[1].shape.dim[1] + o / 8] += z > 0 ? (double)(1 << (o % 8)) : 0;
        }
}

/* dz [B, O], w [O, N], saved [B, N] (z, y, or bytes of the relu bit-mask) ->
 * dx = (dz w) * act'(saved) [B, N], db = column sums of dx [N], act(z)
 * [B, N] into output again (-1: none) */
void ge2_linear_grad_input_ref(const ge2_node *node, const ref_tensor *in, ref_tensor *out, int again)
{
    int64_t B = in[0].shape.dim[0], O = in[0].shape.dim[1], N = in[1].shape.dim[1];
    const ge2_act_attrs *a = GE2_ATTRS(ge2_act_attrs, node->attrs);
    const int db = ge2_linear_grad_input_db(node->n_outputs, again);
    for (int64_t r = 0; r < B; r++)
        for (int64_t c = 0; c < N; c++) {
            double g = 0, d = 1;
            for (int64_t k = 0; k < O; k++)
                g += in[0].v[r * O + k] * in[1].v[k * N + c];
            if (node->n_inputs > 2 && a->act == GE2_ACT_RELU && !a->from_output) /* bytes of the bit-mask */
                d = ((int)in[2].v[r * in[2].shape.dim[1] + c / 8] >> (c % 8)) & 1;
            else if (node->n_inputs > 2)
                d = ge2_ref_act_grad(a->act, in[2].v[r * N + c], a->from_output, a->slope);
            out[0].v[r * N + c] = g * d;
            if (db >= 0)
                out[db].v[c] += g * d;
            if (again >= 0)
                out[again].v[r * N + c] = ge2_ref_act(a->act, in[2].v[r * N + c], a->slope);
        }
}

static void ref_linear_grad_input(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    ge2_linear_grad_input_ref(node, in, out, -1);
}

/* dz [B, O], x [B, N] -> dw = dzᵀ x [O, N], db = column sums of dz [O] */
static void ref_linear_grad_weight(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    int64_t B = in[0].shape.dim[0], O = in[0].shape.dim[1], N = in[1].shape.dim[1];
    for (int64_t o = 0; o < O; o++) {
        for (int64_t c = 0; c < N; c++) {
            double s = 0;
            for (int64_t r = 0; r < B; r++)
                s += in[0].v[r * O + o] * in[1].v[r * N + c];
            out[0].v[o * N + c] = s;
        }
        for (int64_t r = 0; node->n_outputs > 1 && r < B; r++)
            out[1].v[o] += in[0].v[r * O + o];
    }
}

/* element (b, i, j) of op(x), op = transpose of the last two dims when t */
static double mat_at(const ref_tensor *x, int64_t b, int64_t i, int64_t j, bool t)
{
    int nd = x->shape.ndim;
    int64_t r = x->shape.dim[nd - 2], c = x->shape.dim[nd - 1];
    return t ? x->v[b * r * c + j * c + i] : x->v[b * r * c + i * c + j];
}

static void ref_matmul(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    bool ta = GE2_ATTRS(ge2_matmul_attrs, node->attrs)->trans_a, tb = GE2_ATTRS(ge2_matmul_attrs, node->attrs)->trans_b;
    int nd = out[0].shape.ndim;
    int64_t batch = nd == 3 ? out[0].shape.dim[0] : 1, M = out[0].shape.dim[nd - 2], N = out[0].shape.dim[nd - 1];
    int64_t K = in[0].shape.dim[ta ? nd - 2 : nd - 1];
    for (int64_t b = 0; b < batch; b++)
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double s = 0;
                for (int64_t k = 0; k < K; k++)
                    s += mat_at(&in[0], b, i, k, ta) * mat_at(&in[1], b, k, j, tb);
                out[0].v[(b * M + i) * N + j] = s;
            }
}

/* --------------------------------------------------------- registration */

GE2_OP_TEST(linear, GE2_CASE_GRADIENT, case_linear, ref_linear)
GE2_OP_TEST(matmul, GE2_CASE_GRADIENT, case_matmul, ref_matmul)
GE2_OP_TEST(linear_grad_input, GE2_CASE_FORWARD, case_linear_grad_input, ref_linear_grad_input)
GE2_OP_TEST(linear_grad_weight, GE2_CASE_FORWARD, case_linear_grad_weight, ref_linear_grad_weight)
