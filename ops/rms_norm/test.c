/* The RMS norm family's test cases: for each op a random valid instance (its
 * case body) and its float64 forward reference, registered for the
 * table-driven suites (tests/support/op_cases.h). */
#include <math.h>

#include "graph/error.h"
#include "ops/rms_norm/rms_norm.h"
#include "tests/support/op_cases.h"

/* ---------------------------------------------------------- case bodies */

/* x [..., C]: up to three dims, rows of 1 to 5 */
static ge2_shape random_rows(ge2_case_ctx *c)
{
    ge2_shape s = ge2_case_random_shape(c, 1, 3);
    s.dim[s.ndim - 1] = ge2_case_irange(c, 1, 5);
    return s;
}

static ge2_status case_rms_norm(ge2_case_ctx *c)
{
    ge2_shape xs = random_rows(c);
    ge2_tensor *x, *w, *y;
    GE2_TRY(ge2_case_operand(c, xs, &x));
    GE2_TRY(ge2_case_operand(c, ge2_shape1(xs.dim[xs.ndim - 1]), &w));
    GE2_TRY(ge2_rms_norm(c->inst->graph, x, w, ge2_case_coin(c) ? 1e-6 : 1e-2, &y));
    return ge2_case_last_node(c);
}

/* dy, x, weight, saved [rows] (a positive rstd, not necessarily x's: the
 * op takes it as given) */
static ge2_status case_rms_norm_grad(ge2_case_ctx *c)
{
    ge2_shape xs = random_rows(c);
    const int64_t rows = ge2_ref_numel(xs) / xs.dim[xs.ndim - 1];
    ge2_tensor *ts[4];
    GE2_TRY(ge2_case_plain(c, xs, &ts[0]));
    GE2_TRY(ge2_case_plain(c, xs, &ts[1]));
    GE2_TRY(ge2_case_plain(c, ge2_shape1(xs.dim[xs.ndim - 1]), &ts[2]));
    GE2_TRY(ge2_case_plain(c, ge2_shape1(rows), &ts[3]));
    ge2_feed *f = &c->inst->feeds[c->inst->n_feeds - 1];
    for (int64_t k = 0; k < rows; k++) {
        if (c->dtype == GE2_F64)
            ((double *)f->data)[k] = 0.5 + fabs(((double *)f->data)[k]);
        else
            ((float *)f->data)[k] = 0.5f + fabsf(((float *)f->data)[k]);
    }
    return ge2_case_direct(c, GE2_OP_RMS_NORM_GRAD, ts, 4, 2, NULL);
}

/* ------------------------------------------------- float64 references */

/* y = x / sqrt(mean(x²) + eps) · w; saved = 1 / sqrt(mean(x²) + eps) */
static void ref_rms_norm(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    const int64_t C = in[0].shape.dim[in[0].shape.ndim - 1], rows = ge2_ref_numel(in[0].shape) / C;
    for (int64_t r = 0; r < rows; r++) {
        const double *x = in[0].v + r * C;
        double ms = 0;
        for (int64_t i = 0; i < C; i++)
            ms += x[i] * x[i] / (double)C;
        const double rms = sqrt(ms + GE2_ATTRS(ge2_rms_norm_attrs, node->attrs)->eps);
        for (int64_t i = 0; i < C; i++)
            out[0].v[r * C + i] = x[i] / rms * in[1].v[i];
        if (node->n_outputs > 1)
            out[1].v[r] = 1.0 / rms;
    }
}

/* With s = saved[r] standing for 1 / rms(x): dx_j = Σ_i dy_i · w_i ·
 * ∂(x_i · s)/∂x_j, where ∂(x_i · s)/∂x_j = s·[i = j] - x_i·x_j·s³ / C (the
 * Jacobian written out, a C × C sum a row); dweight_i = Σ_rows dy_i · x_i · s. */
static void ref_rms_norm_grad(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    (void)node;
    const int64_t C = in[1].shape.dim[in[1].shape.ndim - 1], rows = ge2_ref_numel(in[1].shape) / C;
    for (int64_t i = 0; i < C; i++)
        out[1].v[i] = 0;
    for (int64_t r = 0; r < rows; r++) {
        const double *dy = in[0].v + r * C, *x = in[1].v + r * C, *w = in[2].v, s = in[3].v[r];
        for (int64_t j = 0; j < C; j++) {
            double d = 0;
            for (int64_t i = 0; i < C; i++)
                d += dy[i] * w[i] * ((i == j ? s : 0.0) - x[i] * x[j] * s * s * s / (double)C);
            out[0].v[r * C + j] = d;
        }
        for (int64_t i = 0; i < C; i++)
            out[1].v[i] += dy[i] * x[i] * s;
    }
}

/* --------------------------------------------------------- registration */

GE2_OP_TEST(rms_norm, GE2_CASE_GRADIENT, case_rms_norm, ref_rms_norm)
GE2_OP_TEST(rms_norm_grad, GE2_CASE_FORWARD, case_rms_norm_grad, ref_rms_norm_grad)
