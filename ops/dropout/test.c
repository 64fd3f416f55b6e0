/* The dropout family's test cases for the table-driven suites: train-step
 * instances (the table runs train steps), so the mask is drawn; the float64
 * references draw it with the same Philox function under the instance's
 * seed and offset, which the kernels read from the control block (the
 * suites' control block: seed and offset of their programs). p is 0.5, so
 * both branches occur. tests/ops/dropout_test checks the mask's statistics
 * and that replays draw fresh ones. */
#include <string.h>

#include "graph/error.h"
#include "ops/dropout/dropout.h"
#include "ops/dropout/test_cases.h"
#include "tests/support/op_cases.h"

/* x[, plus] -> a node of op: the plain op, or with an addend (test_cases.h) */
ge2_status ge2_dropout_case(ge2_case_ctx *c, ge2_op op, bool plus)
{
    const ge2_shape s = ge2_case_random_shape(c, 1, 3);
    ge2_tensor *ts[2], *y;
    GE2_TRY(ge2_case_operand(c, s, &ts[0]));
    if (!plus && op == GE2_OP_DROPOUT) {
        GE2_TRY(ge2_dropout(c->inst->graph, ts[0], 0.5, &y));
        return ge2_case_last_node(c);
    }
    if (plus)
        GE2_TRY(ge2_case_operand(c, s, &ts[1]));
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    GE2_ATTRS(ge2_dropout_attrs, a)->p = 0.5;
    GE2_ATTRS(ge2_dropout_attrs, a)->stream = (uint32_t)ge2_case_irange(c, 0, 1000);
    return ge2_case_direct(c, op, ts, plus ? 2 : 1, 1, &a);
}

static ge2_status case_dropout(ge2_case_ctx *c) { return ge2_dropout_case(c, GE2_OP_DROPOUT, false); }

static ge2_status case_dropout_backward(ge2_case_ctx *c)
{
    ge2_tensor *dy;
    GE2_TRY(ge2_case_plain(c, ge2_case_random_shape(c, 1, 3), &dy));
    ge2_attrs a;
    GE2_ATTRS(ge2_dropout_attrs, a)->p = 0.5;
    GE2_ATTRS(ge2_dropout_attrs, a)->stream = (uint32_t)ge2_case_irange(c, 0, 1000);
    return ge2_case_direct(c, GE2_OP_DROPOUT_BACKWARD, &dy, 1, 1, &a);
}

/* y = x / (1 - p) where element i's draw keeps it, else 0 (plus the
 * forward's addend, if it has one); the draw is
 * word i mod 4 of Philox4x32-10 (checked against its published answers in
 * tests/ops/dropout_test) at the counter layout ops/dropout/dropout.h
 * documents */
void ge2_dropout_ref(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    const double p = GE2_ATTRS(ge2_dropout_attrs, node->attrs)->p;
    const uint64_t seed = ge2_ref_rng_seed, offset = ge2_ref_rng_offset;
    for (int64_t i = 0; i < ge2_ref_numel(in[0].shape); i++) {
        const uint64_t group = (uint64_t)i / 4;
        ge2_philox4 counter = {{(uint32_t)group, (uint32_t)(group >> 32), GE2_ATTRS(ge2_dropout_attrs, node->attrs)->stream,
                                (uint32_t)offset}};
        ge2_philox4 r = ge2_philox4x32_10(counter, (uint32_t)seed, (uint32_t)(seed >> 32) ^ (uint32_t)(offset >> 32));
        const double u = (double)(r.v[i % 4] >> 8) / 16777216.0;
        out[0].v[i] = (u >= p ? in[0].v[i] / (1.0 - p) : 0.0) + (node->n_inputs > 1 ? in[1].v[i] : 0.0);
    }
}

GE2_OP_TEST(dropout, GE2_CASE_GRADIENT, case_dropout, ge2_dropout_ref)
GE2_OP_TEST(dropout_backward, GE2_CASE_FORWARD, case_dropout_backward, ge2_dropout_ref)
