/* The normalization family's test cases (batch norm, layer norm): for each op a random valid
 * instance (its case body) and its float64 forward reference, registered
 * for the table-driven suites (tests/support/op_cases.h). The table runs
 * train steps: BATCH_NORM's references normalize by the batch statistics
 * (tests/ops/batch_norm_test checks the running statistics and eval). */
#include <math.h>
#include <string.h>

#include "graph/error.h"
#include "ops/norm/test_cases.h"

/* ---------------------------------------------------------- case bodies */

/* [N, C], [N, C, L] or [N, C, H, W] with at least two values per channel */
static ge2_shape random_x(ge2_case_ctx *c)
{
    int nd = (int)ge2_case_irange(c, 2, 4);
    ge2_shape s = ge2_shape2(ge2_case_irange(c, 2, 3), ge2_case_irange(c, 1, 3));
    for (int i = 2; i < nd; i++)
        s.dim[s.ndim++] = ge2_case_irange(c, 1, 3);
    return s;
}

ge2_status ge2_batch_norm_case(ge2_case_ctx *c, ge2_op op)
{
    ge2_shape xs = random_x(c), cs = ge2_shape1(xs.dim[1]);
    ge2_tensor *ts[6];
    int n = 5;
    GE2_TRY(ge2_case_operand(c, cs, &ts[1]));
    GE2_TRY(ge2_case_operand(c, xs, &ts[0]));
    GE2_TRY(ge2_case_operand(c, cs, &ts[2]));
    GE2_TRY(ge2_case_buffer(c, c->dtype, cs, (ge2_init){GE2_INIT_NORMAL, 0.0, 1.0, 0}, &ts[3]));
    GE2_TRY(ge2_case_buffer(c, c->dtype, cs, (ge2_init){GE2_INIT_UNIFORM, 0.5, 1.5, 0}, &ts[4]));
    if (ge2_case_coin(c))
        GE2_TRY(ge2_case_buffer(c, GE2_I64, ge2_shape0(), (ge2_init){GE2_INIT_ZEROS, 0.0, 0.0, 0}, &ts[n++]));
    const double momentum = ge2_case_uniform(c, 0.05, 0.5), eps = ge2_case_coin(c) ? 1e-5 : 1e-2;
    if (op == GE2_OP_BATCH_NORM) { /* through the builder */
        ge2_tensor *y;
        GE2_TRY(ge2_batch_norm(c->inst->graph, ts[0], ts[1], ts[2], ts[3], ts[4], n > 5 ? ts[5] : NULL, momentum, eps,
                               &y));
        return ge2_case_last_node(c);
    }
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    *GE2_ATTRS(ge2_batch_norm_attrs, a) = (ge2_batch_norm_attrs){momentum, eps};
    return ge2_case_direct(c, op, ts, n, 2, &a);
}

static ge2_status case_batch_norm(ge2_case_ctx *c) { return ge2_batch_norm_case(c, GE2_OP_BATCH_NORM); }

/* saved [2, C]: any mean, a positive rstd */
static ge2_status case_saved(ge2_case_ctx *c, ge2_shape xs, ge2_tensor **saved)
{
    GE2_TRY(ge2_case_plain(c, ge2_shape2(2, xs.dim[1]), saved));
    ge2_feed *f = &c->inst->feeds[c->inst->n_feeds - 1];
    for (int64_t k = xs.dim[1]; k < 2 * xs.dim[1]; k++) {
        if (c->dtype == GE2_F64)
            ((double *)f->data)[k] = 0.5 + fabs(((double *)f->data)[k]);
        else
            ((float *)f->data)[k] = 0.5f + fabsf(((float *)f->data)[k]);
    }
    return GE2_OK;
}

ge2_status ge2_batch_norm_grad_params_case(ge2_case_ctx *c, ge2_op op, bool relu_y)
{
    ge2_shape xs = random_x(c);
    ge2_tensor *ts[4];
    GE2_TRY(ge2_case_plain(c, xs, &ts[0]));
    GE2_TRY(ge2_case_plain(c, xs, &ts[1]));
    GE2_TRY(case_saved(c, xs, &ts[2]));
    if (relu_y)
        GE2_TRY(ge2_case_plain(c, xs, &ts[3]));
    return ge2_case_direct(c, op, ts, 3 + relu_y, 2, NULL);
}

static ge2_status case_batch_norm_grad_params(ge2_case_ctx *c)
{
    return ge2_batch_norm_grad_params_case(c, GE2_OP_BATCH_NORM_GRAD_PARAMS, false);
}

ge2_status ge2_batch_norm_grad_input_case(ge2_case_ctx *c, ge2_op op, bool relu_y)
{
    ge2_shape xs = random_x(c), cs = ge2_shape1(xs.dim[1]);
    ge2_tensor *ts[7];
    GE2_TRY(ge2_case_plain(c, xs, &ts[0]));
    GE2_TRY(ge2_case_plain(c, xs, &ts[1]));
    GE2_TRY(ge2_case_plain(c, cs, &ts[2]));
    GE2_TRY(case_saved(c, xs, &ts[3]));
    GE2_TRY(ge2_case_plain(c, cs, &ts[4]));
    GE2_TRY(ge2_case_plain(c, cs, &ts[5]));
    if (relu_y)
        GE2_TRY(ge2_case_plain(c, xs, &ts[6]));
    return ge2_case_direct(c, op, ts, 6 + relu_y, 1, NULL);
}

static ge2_status case_batch_norm_grad_input(ge2_case_ctx *c)
{
    return ge2_batch_norm_grad_input_case(c, GE2_OP_BATCH_NORM_GRAD_INPUT, false);
}

/* x [..., C]: 1 to 3 dims, rows of 1 to 5 values */
static ge2_shape random_rows(ge2_case_ctx *c)
{
    ge2_shape s = ge2_case_random_shape(c, 1, 3);
    s.dim[s.ndim - 1] = ge2_case_irange(c, 1, 5);
    return s;
}

static ge2_status case_layer_norm(ge2_case_ctx *c)
{
    ge2_shape xs = random_rows(c), cs = ge2_shape1(xs.dim[xs.ndim - 1]);
    ge2_tensor *x, *w, *b = NULL, *y;
    GE2_TRY(ge2_case_operand(c, xs, &x));
    GE2_TRY(ge2_case_operand(c, cs, &w));
    if (ge2_case_coin(c))
        GE2_TRY(ge2_case_operand(c, cs, &b));
    GE2_TRY(ge2_layer_norm(c->inst->graph, x, w, b, ge2_case_coin(c) ? 1e-5 : 1e-2, &y));
    return ge2_case_last_node(c);
}

/* saved [2, rows]: any mean, a positive rstd */
static ge2_status case_row_saved(ge2_case_ctx *c, ge2_shape xs, ge2_tensor **saved)
{
    const int64_t rows = ge2_ref_numel(xs) / xs.dim[xs.ndim - 1];
    GE2_TRY(ge2_case_plain(c, ge2_shape2(2, rows), saved));
    ge2_feed *f = &c->inst->feeds[c->inst->n_feeds - 1];
    for (int64_t k = rows; k < 2 * rows; k++) {
        if (c->dtype == GE2_F64)
            ((double *)f->data)[k] = 0.5 + fabs(((double *)f->data)[k]);
        else
            ((float *)f->data)[k] = 0.5f + fabsf(((float *)f->data)[k]);
    }
    return GE2_OK;
}

static ge2_status case_layer_norm_grad_params(ge2_case_ctx *c)
{
    ge2_shape xs = random_rows(c);
    ge2_tensor *ts[3];
    GE2_TRY(ge2_case_plain(c, xs, &ts[0]));
    GE2_TRY(ge2_case_plain(c, xs, &ts[1]));
    GE2_TRY(case_row_saved(c, xs, &ts[2]));
    return ge2_case_direct(c, GE2_OP_LAYER_NORM_GRAD_PARAMS, ts, 3, 2, NULL);
}

/* dy, x, weight, saved[, plus] -> a node of op (test_cases.h) */
ge2_status ge2_layer_norm_grad_input_case(ge2_case_ctx *c, ge2_op op, bool plus)
{
    ge2_shape xs = random_rows(c);
    ge2_tensor *ts[5];
    GE2_TRY(ge2_case_plain(c, xs, &ts[0]));
    GE2_TRY(ge2_case_plain(c, xs, &ts[1]));
    GE2_TRY(ge2_case_plain(c, ge2_shape1(xs.dim[xs.ndim - 1]), &ts[2]));
    GE2_TRY(case_row_saved(c, xs, &ts[3]));
    if (plus)
        GE2_TRY(ge2_case_plain(c, xs, &ts[4]));
    return ge2_case_direct(c, op, ts, plus ? 5 : 4, 1, NULL);
}

static ge2_status case_layer_norm_grad_input(ge2_case_ctx *c)
{
    return ge2_layer_norm_grad_input_case(c, GE2_OP_LAYER_NORM_GRAD_INPUT, false);
}

/* ------------------------------------------------- float64 references */

/* x [N, C, inner]: channel c's k-th value */
static int64_t ref_at(ge2_shape x, int64_t c, int64_t k)
{
    int64_t inner = ge2_ref_numel(x) / (x.dim[0] * x.dim[1]);
    return ((k / inner) * x.dim[1] + c) * inner + k % inner;
}

/* train mode: y = (x - mean) / sqrt(var + eps) · w + b with the batch's
 * mean and biased variance (max(0, ·) with relu); saved = (mean,
 * 1/sqrt(var + eps)) */
void ge2_batch_norm_ref(const ge2_node *node, const ref_tensor *in, ref_tensor *out, bool relu)
{
    ge2_shape s = in[0].shape;
    int64_t C = s.dim[1], m = ge2_ref_numel(s) / C;
    for (int64_t c = 0; c < C; c++) {
        double mean = 0, var = 0;
        for (int64_t k = 0; k < m; k++)
            mean += in[0].v[ref_at(s, c, k)] / (double)m;
        for (int64_t k = 0; k < m; k++)
            var += pow(in[0].v[ref_at(s, c, k)] - mean, 2) / (double)m;
        double sd = sqrt(var + GE2_ATTRS(ge2_batch_norm_attrs, node->attrs)->eps);
        for (int64_t k = 0; k < m; k++) {
            double v = (in[0].v[ref_at(s, c, k)] - mean) / sd * in[1].v[c] + in[2].v[c];
            out[0].v[ref_at(s, c, k)] = relu && v < 0 ? 0 : v;
        }
        if (node->n_outputs > 1) {
            out[1].v[c] = mean;
            out[1].v[C + c] = 1 / sd;
        }
    }
}

static void ref_batch_norm(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    ge2_batch_norm_ref(node, in, out, false);
}

/* dy at `at`, through relu' when the relu'd y is input y_at (-1: none) */
static double ref_dy(const ref_tensor *in, int y_at, int64_t at)
{
    return y_at >= 0 && !(in[y_at].v[at] > 0) ? 0 : in[0].v[at];
}

void ge2_batch_norm_grad_params_ref(const ref_tensor *in, ref_tensor *out, int relu_y)
{
    ge2_shape s = in[1].shape;
    int64_t C = s.dim[1], m = ge2_ref_numel(s) / C;
    for (int64_t c = 0; c < C; c++) {
        out[0].v[c] = out[1].v[c] = 0;
        for (int64_t k = 0; k < m; k++) {
            int64_t at = ref_at(s, c, k);
            out[0].v[c] += ref_dy(in, relu_y, at) * (in[1].v[at] - in[2].v[c]) * in[2].v[C + c];
            out[1].v[c] += ref_dy(in, relu_y, at);
        }
    }
}

static void ref_batch_norm_grad_params(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    (void)node;
    ge2_batch_norm_grad_params_ref(in, out, -1);
}

/* d/dx of sum(dy · y) through the batch statistics, from the chain rule:
 * dx = w·rstd·(dy - mean(dy) - x̂·mean(dy·x̂)), with mean(dy) = dbias/m and
 * mean(dy·x̂) = dweight/m given as inputs */
void ge2_batch_norm_grad_input_ref(const ref_tensor *in, ref_tensor *out, int relu_y)
{
    ge2_shape s = in[1].shape;
    int64_t C = s.dim[1], m = ge2_ref_numel(s) / C;
    for (int64_t c = 0; c < C; c++)
        for (int64_t k = 0; k < m; k++) {
            int64_t at = ref_at(s, c, k);
            double rstd = in[3].v[C + c], xhat = (in[1].v[at] - in[3].v[c]) * rstd;
            out[0].v[at] = in[2].v[c] * rstd * (ref_dy(in, relu_y, at) - in[5].v[c] / m - xhat * in[4].v[c] / m);
        }
}

static void ref_batch_norm_grad_input(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    (void)node;
    ge2_batch_norm_grad_input_ref(in, out, -1);
}

/* y = (x - mean) / sqrt(var + eps) · w + b per row, biased variance */
static void ref_layer_norm(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    const int64_t C = in[0].shape.dim[in[0].shape.ndim - 1], rows = ge2_ref_numel(in[0].shape) / C;
    for (int64_t r = 0; r < rows; r++) {
        const double *x = in[0].v + r * C;
        double mean = 0, var = 0;
        for (int64_t i = 0; i < C; i++)
            mean += x[i] / (double)C;
        for (int64_t i = 0; i < C; i++)
            var += pow(x[i] - mean, 2) / (double)C;
        const double sd = sqrt(var + GE2_ATTRS(ge2_layer_norm_attrs, node->attrs)->eps);
        for (int64_t i = 0; i < C; i++)
            out[0].v[r * C + i] = (x[i] - mean) / sd * in[1].v[i] + (node->n_inputs > 2 ? in[2].v[i] : 0);
        if (node->n_outputs > 1) {
            out[1].v[r] = mean;
            out[1].v[rows + r] = 1 / sd;
        }
    }
}

static void ref_layer_norm_grad_params(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    (void)node;
    const int64_t C = in[1].shape.dim[in[1].shape.ndim - 1], rows = ge2_ref_numel(in[1].shape) / C;
    for (int64_t i = 0; i < C; i++) {
        out[0].v[i] = out[1].v[i] = 0;
        for (int64_t r = 0; r < rows; r++) {
            out[0].v[i] += in[0].v[r * C + i] * (in[1].v[r * C + i] - in[2].v[r]) * in[2].v[rows + r];
            out[1].v[i] += in[0].v[r * C + i];
        }
    }
}

/* d/dx of sum(dy · y) within each row, from the chain rule:
 * dx = rstd·(g - mean(g) - x̂·mean(g·x̂)), g = dy·w */
void ge2_layer_norm_grad_input_ref(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    const int64_t C = in[1].shape.dim[in[1].shape.ndim - 1], rows = ge2_ref_numel(in[1].shape) / C;
    for (int64_t r = 0; r < rows; r++) {
        const double mean = in[3].v[r], rstd = in[3].v[rows + r];
        double mg = 0, mgx = 0;
        for (int64_t i = 0; i < C; i++) {
            const double g = in[0].v[r * C + i] * in[2].v[i];
            mg += g / (double)C;
            mgx += g * (in[1].v[r * C + i] - mean) * rstd / (double)C;
        }
        for (int64_t i = 0; i < C; i++) {
            const double g = in[0].v[r * C + i] * in[2].v[i], xh = (in[1].v[r * C + i] - mean) * rstd;
            out[0].v[r * C + i] = rstd * (g - mg - xh * mgx) + (node->n_inputs > 4 ? in[4].v[r * C + i] : 0.0);
        }
    }
}

/* --------------------------------------------------------- registration */

GE2_OP_TEST(batch_norm, GE2_CASE_GRADIENT, case_batch_norm, ref_batch_norm)
GE2_OP_TEST(batch_norm_grad_params, GE2_CASE_FORWARD, case_batch_norm_grad_params, ref_batch_norm_grad_params)
GE2_OP_TEST(batch_norm_grad_input, GE2_CASE_FORWARD, case_batch_norm_grad_input, ref_batch_norm_grad_input)
GE2_OP_TEST(layer_norm, GE2_CASE_GRADIENT, case_layer_norm, ref_layer_norm)
GE2_OP_TEST(layer_norm_grad_params, GE2_CASE_FORWARD, case_layer_norm_grad_params, ref_layer_norm_grad_params)
GE2_OP_TEST(layer_norm_grad_input, GE2_CASE_FORWARD, case_layer_norm_grad_input, ge2_layer_norm_grad_input_ref)
