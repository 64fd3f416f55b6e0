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
        .pattern = "add_rms_norm", .norm = GE2_OP_RMS_NORM, .fused = ge2_op_add_rms_norm()};
    return ge2_residual_norm_rewrite(g, &r, log, n_fused);
}

static ge2_status norm(ge2_graph *g, ge2_tensor *x, ge2_tensor **y)
{
    return ge2_rms_norm_layer(g, "norm", x, 1e-5, y);
}

/* a pre-norm block's residual adds (fusion.h: ge2_fusion_example_prenorm) */
static ge2_status example(ge2_graph **graph) { return ge2_fusion_example_prenorm(norm, graph); }

const ge2_fusion_pattern ge2_fusion_add_rms_norm = {
    .name = "add_rms_norm",
    .what = "a residual add and the RMS norm of its sum, one pass over the rows",
    .rewrite = rewrite,
    .match = NULL,
    .cuda = NULL, /* the fused op has kernels of its own (add_rms_norm.cu) */
    .example = example,
    .exact = true,
};
