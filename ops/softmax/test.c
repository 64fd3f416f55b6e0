/* The softmax family's test cases: for each op a random valid instance (its
 * case body) and its float64 forward reference, registered for the
 * table-driven suites (tests/support/op_cases.h). */
#include <math.h>
#include <string.h>

#include "graph/error.h"
#include "ops/softmax/softmax.h"
#include "tests/support/op_cases.h"

/* ---------------------------------------------------------- case bodies */

static ge2_status case_softmax_op(ge2_case_ctx *c, bool log_out)
{
    ge2_tensor *x, *y;
    GE2_TRY(ge2_case_operand(c, ge2_case_random_shape(c, 1, 3), &x));
    GE2_TRY(log_out ? ge2_log_softmax(c->inst->graph, x, &y) : ge2_softmax(c->inst->graph, x, &y));
    return ge2_case_last_node(c);
}

static ge2_status case_softmax(ge2_case_ctx *c) { return case_softmax_op(c, false); }

static ge2_status case_log_softmax(ge2_case_ctx *c) { return case_softmax_op(c, true); }

static ge2_status case_softmax_backward_op(ge2_case_ctx *c, ge2_op op)
{
    ge2_shape s = ge2_case_random_shape(c, 1, 3);
    ge2_tensor *ts[2];
    GE2_TRY(ge2_case_plain(c, s, &ts[0]));
    GE2_TRY(ge2_case_plain(c, s, &ts[1]));
    return ge2_case_direct(c, op, ts, 2, 1, NULL);
}

static ge2_status case_softmax_backward(ge2_case_ctx *c) { return case_softmax_backward_op(c, GE2_OP_SOFTMAX_BACKWARD); }

static ge2_status case_log_softmax_backward(ge2_case_ctx *c) { return case_softmax_backward_op(c, GE2_OP_LOG_SOFTMAX_BACKWARD); }

/* ------------------------------------------------- float64 references */

static void ref_softmax(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    int64_t C = in[0].shape.dim[in[0].shape.ndim - 1], rows = ge2_ref_numel(in[0].shape) / C;
    for (int64_t r = 0; r < rows; r++) {
        const double *x = in[0].v + r * C;
        double z = 0;
        for (int64_t i = 0; i < C; i++)
            z += exp(x[i]);
        for (int64_t i = 0; i < C; i++)
            out[0].v[r * C + i] = node->op == GE2_OP_SOFTMAX ? exp(x[i]) / z : x[i] - log(z);
    }
}

/* Through the explicit Jacobian of y with respect to x, then its transpose times dy. */
static void ref_softmax_backward(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    int64_t C = in[0].shape.dim[in[0].shape.ndim - 1], rows = ge2_ref_numel(in[0].shape) / C;
    bool log_out = node->op == GE2_OP_LOG_SOFTMAX_BACKWARD;
    for (int64_t r = 0; r < rows; r++) {
        const double *dy = in[0].v + r * C, *y = in[1].v + r * C;
        for (int64_t i = 0; i < C; i++) {
            double s = 0;
            for (int64_t j = 0; j < C; j++) {
                /* d y_j / d x_i */
                double jac = log_out ? (i == j) - exp(y[i]) : y[j] * ((i == j) - y[i]);
                s += jac * dy[j];
            }
            out[0].v[r * C + i] = s;
        }
    }
}

/* --------------------------------------------------------- registration */

GE2_OP_TEST(softmax, GE2_CASE_GRADIENT, case_softmax, ref_softmax)
GE2_OP_TEST(log_softmax, GE2_CASE_GRADIENT, case_log_softmax, ref_softmax)
GE2_OP_TEST(softmax_backward, GE2_CASE_FORWARD, case_softmax_backward, ref_softmax_backward)
GE2_OP_TEST(log_softmax_backward, GE2_CASE_FORWARD, case_log_softmax_backward, ref_softmax_backward)
