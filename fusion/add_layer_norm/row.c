/* The residual-add + layer norm pattern's row, a rewrite (fusion/
 * residual_norm.h): an ADD s = a + b whose s a LAYER_NORM normalizes, rows
 * of a multiple of 4 up to GE2_LN_ROW4_MAX_C, becomes one ADD_LAYER_NORM
 * (add_layer_norm.h) where the ADD stood, making s, the norm's y and its
 * statistics; the LAYER_NORM node goes. A GPT block's residual adds (and the
 * embeddings' sum before the first norm) then each cost one pass over the
 * rows instead of two. A residual ADD of a dropout's output is fused into
 * the dropout first (add_into), which saves more. */
#include "fusion/add_layer_norm/add_layer_norm.h"
#include "fusion/fusion.h"
#include "fusion/residual_norm.h"

static bool takes(const ge2_graph *g, const ge2_node *norm, const char **why)
{
    if (ge2_ln_row4_takes(ge2_ln_geom_of(g->tensors[norm->inputs[0]]->shape).c))
        return true;
    *why = "its rows are not a multiple of 4 values up to GE2_LN_ROW4_MAX_C";
    return false;
}

static ge2_status rewrite(ge2_graph *g, FILE *log, int *n_fused)
{
    const ge2_residual_norm r = {.pattern = "add_layer_norm",
                                 .norm = GE2_OP_LAYER_NORM,
                                 .fused = ge2_op_add_layer_norm(),
                                 .takes = takes};
    return ge2_residual_norm_rewrite(g, &r, log, n_fused);
}

static ge2_status norm(ge2_graph *g, ge2_tensor *x, ge2_tensor **y)
{
    return ge2_layer_norm_layer(g, "ln", x, true, 1e-5, y);
}

/* a pre-norm block's residual adds (fusion.h: ge2_fusion_example_prenorm) */
static ge2_status example(ge2_graph **graph) { return ge2_fusion_example_prenorm(norm, graph); }

const ge2_fusion_pattern ge2_fusion_add_layer_norm = {
    .name = "add_layer_norm",
    .what = "a residual add and the layer norm of its sum, one pass over the rows",
    .rewrite = rewrite,
    .match = NULL,
    .cuda = NULL, /* the fused op has kernels of its own (add_layer_norm.cu) */
    .example = example,
    .exact = true,
};
