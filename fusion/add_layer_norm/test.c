/* ADD_LAYER_NORM's test case: a random valid instance and its float64
 * forward reference, registered for the table-driven suites
 * (tests/support/op_cases.h), as an op family's are. */
#include <math.h>
#include <string.h>

#include "fusion/add_layer_norm/add_layer_norm.h"
#include "graph/error.h"
#include "tests/support/op_cases.h"

/* a, b [..., C] (up to three dims, rows of 4 to 16 values, a multiple of
 * 4), weight [C] and (a coin) bias [C] */
static ge2_status case_add_layer_norm(ge2_case_ctx *c)
{
    ge2_shape xs = ge2_case_random_shape(c, 1, 3);
    xs.dim[xs.ndim - 1] = 4 * ge2_case_irange(c, 1, 4);
    const ge2_shape cs = ge2_shape1(xs.dim[xs.ndim - 1]);
    const int n = ge2_case_coin(c) ? 4 : 3;
    ge2_tensor *ts[4];
    GE2_TRY(ge2_case_plain(c, xs, &ts[0]));
    GE2_TRY(ge2_case_plain(c, xs, &ts[1]));
    GE2_TRY(ge2_case_plain(c, cs, &ts[2]));
    if (n == 4)
        GE2_TRY(ge2_case_plain(c, cs, &ts[3]));
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    GE2_ATTRS(ge2_layer_norm_attrs, a)->eps = ge2_case_coin(c) ? 1e-5 : 1e-2;
    return ge2_case_direct(c, ge2_op_add_layer_norm(), ts, n, 3, &a);
}

/* s = a + b; y = (s - mean) / sqrt(var + eps) · w + bias with each row's
 * mean and biased variance; saved = (mean, 1 / sqrt(var + eps)) */
static void ref_add_layer_norm(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    const int64_t C = in[0].shape.dim[in[0].shape.ndim - 1], rows = ge2_ref_numel(in[0].shape) / C;
    for (int64_t r = 0; r < rows; r++) {
        double *s = out[0].v + r * C, mean = 0, var = 0;
        for (int64_t i = 0; i < C; i++) {
            s[i] = in[0].v[r * C + i] + in[1].v[r * C + i];
            mean += s[i] / (double)C;
        }
        for (int64_t i = 0; i < C; i++)
            var += (s[i] - mean) * (s[i] - mean) / (double)C;
        const double sd = sqrt(var + GE2_ATTRS(ge2_layer_norm_attrs, node->attrs)->eps);
        for (int64_t i = 0; i < C; i++)
            out[1].v[r * C + i] = (s[i] - mean) / sd * in[2].v[i] + (node->n_inputs > 3 ? in[3].v[i] : 0.0);
        out[2].v[r] = mean;
        out[2].v[rows + r] = 1.0 / sd;
    }
}

GE2_OP_TEST(add_layer_norm, GE2_CASE_FORWARD, case_add_layer_norm, ref_add_layer_norm)
