/* ADD_RMS_NORM's test case: a random valid instance and its float64
 * forward reference, registered for the table-driven suites
 * (tests/support/op_cases.h), as an op family's are. */
#include <math.h>
#include <string.h>

#include "fusion/add_rms_norm/add_rms_norm.h"
#include "graph/error.h"
#include "tests/support/op_cases.h"

/* a, b [..., C] (up to three dims, rows of 1 to 5), weight [C] */
static ge2_status case_add_rms_norm(ge2_case_ctx *c)
{
    ge2_shape xs = ge2_case_random_shape(c, 1, 3);
    xs.dim[xs.ndim - 1] = ge2_case_irange(c, 1, 5);
    ge2_tensor *ts[3];
    GE2_TRY(ge2_case_plain(c, xs, &ts[0]));
    GE2_TRY(ge2_case_plain(c, xs, &ts[1]));
    GE2_TRY(ge2_case_plain(c, ge2_shape1(xs.dim[xs.ndim - 1]), &ts[2]));
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    GE2_ATTRS(ge2_rms_norm_attrs, a)->eps = ge2_case_coin(c) ? 1e-6 : 1e-2;
    return ge2_case_direct(c, ge2_op_add_rms_norm(), ts, 3, 3, &a);
}

/* s = a + b; y = s / sqrt(mean(s²) + eps) · w; saved = 1 / sqrt(mean(s²) + eps) */
static void ref_add_rms_norm(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    const int64_t C = in[0].shape.dim[in[0].shape.ndim - 1], rows = ge2_ref_numel(in[0].shape) / C;
    for (int64_t r = 0; r < rows; r++) {
        double ms = 0;
        for (int64_t i = 0; i < C; i++) {
            const double v = in[0].v[r * C + i] + in[1].v[r * C + i];
            out[0].v[r * C + i] = v;
            ms += v * v / (double)C;
        }
        const double rms = sqrt(ms + GE2_ATTRS(ge2_rms_norm_attrs, node->attrs)->eps);
        for (int64_t i = 0; i < C; i++)
            out[1].v[r * C + i] = out[0].v[r * C + i] / rms * in[2].v[i];
        out[2].v[r] = 1.0 / rms;
    }
}

GE2_OP_TEST(add_rms_norm, GE2_CASE_FORWARD, case_add_rms_norm, ref_add_rms_norm)
