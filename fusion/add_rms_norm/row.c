/* The residual-add + RMS norm pattern's row, a rewrite (fusion/
 * residual_norm.h): an ADD s = a + b whose s an RMS_NORM normalizes becomes
 * one ADD_RMS_NORM (add_rms_norm.h) where the ADD stood, making s, the
 * norm's y and its saved rstd; the RMS_NORM node goes. A pre-norm
 * transformer block's two residual adds then each cost one pass over the
 * rows instead of two. */
#include "fusion/add_rms_norm/add_rms_norm.h"
#include "fusion/fusion.h"
#include "fusion/residual_norm.h"

static ge2_status rewrite(ge2_graph *g, FILE *log, int *n_fused)
{
    const ge2_residual_norm r = {
        .pattern = "add_rms_norm", .norm = GE2_OP_RMS_NORM, .fused = ge2_op_add_rms_norm(), .norm_outputs = 2};
    return ge2_residual_norm_rewrite(g, &r, log, n_fused);
}

/* h = linear(x); s = h + gelu(h); the norm of s and a second residual add
 * s + norm(s) that reads s again, as a pre-norm block's does; rows of 48 */
static ge2_status example(ge2_graph **graph)
{
    ge2_graph *g;
    ge2_tensor *labels, *h, *act = NULL, *sum = NULL, *normed = NULL, *out = NULL;
    GE2_TRY(ge2_fusion_example_rows(48, &g, &labels, &h));
    ge2_status st = ge2_activate(g, h, GE2_ACT_GELU_TANH, 0.0f, &act);
    if (st == GE2_OK)
        st = ge2_add(g, h, act, &sum);
    if (st == GE2_OK)
        st = ge2_rms_norm_layer(g, "norm", sum, 1e-5, &normed);
    if (st == GE2_OK)
        st = ge2_add(g, sum, normed, &out);
    return ge2_fusion_example_head(g, st, out, 10, labels, graph);
}

const ge2_fusion_pattern ge2_fusion_add_rms_norm = {
    .name = "add_rms_norm",
    .what = "a residual add and the RMS norm of its sum, one pass over the rows",
    .rewrite = rewrite,
    .match = NULL,
    .cuda = NULL, /* the fused op has kernels of its own (add_rms_norm.cu) */
    .example = example,
    .exact = true,
};
