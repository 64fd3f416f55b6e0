/* The layer-norm backward pattern's row: a layer norm's GRAD_PARAMS and
 * GRAD_INPUT, consecutive in the schedule, and the DROPOUT_BACKWARD of its
 * dx when it comes next, as one kernel (ln_backward.h), side by side in
 * one phase. */
#include "fusion/fusion.h"
#include "fusion/ln_backward/ln_backward.h"
#include "graph/error.h"
#include "ops/norm/norm.h"

static bool match(const ge2_fusion_key *key, int at, ge2_fusion_group *group, char *why, size_t why_size)
{
    if (at + 1 >= key->n || !ge2_ln_backward_pair(key->nodes[at], key->nodes[at + 1]))
        return ge2_fusion_no(why, why_size,
                             "no LAYER_NORM_GRAD_PARAMS then LAYER_NORM_GRAD_INPUT of one dy and x in a row");
    const int64_t c = ge2_ln_geom_of(key->shape_of(key->ctx, key->nodes[at + 1]->inputs[1])).c;
    if (!ge2_ln_row4_fits(c, GE2_LN_BACKWARD_MAX_C, why, why_size))
        return false;
    const bool then_dropout = at + 2 < key->n && ge2_ln_backward_then_dropout(key->nodes[at + 1], key->nodes[at + 2]);
    return ge2_fusion_one_phase(group, then_dropout ? 3 : 2);
}

static const ge2_fusion_impl cuda = {
    /* no GEMM: f32 layer norms under bf16 fuse too, and the dropout's
     * gradient may be the bf16 copy a GEMM reads (ge2_ln_backward_takes) */
    .does = GE2_FUSION_ANY_PRECISION | GE2_FUSION_TAKES_BF16,
    .takes = ge2_ln_backward_takes,
    .run = ge2_ln_backward_launch,
    .what = "ge2 fused layer-norm backward (dx, the parameter gradients and a dropout's backward; dy and x read once)",
};

/* x -> linear -> h = dropout -> h + layer_norm(h) -> head: the layer
 * norm's backward makes h's gradient, with the residual's as its addend
 * (fusion/add_into), and the dropout's backward masks it for the linear's
 * weight gradient; rows of 300 (some lanes' last four past the row) and
 * 100 rows (the last block's 8 not all there) */
static ge2_status example(ge2_graph **graph)
{
    ge2_graph *g;
    ge2_tensor *labels, *a, *h = NULL, *n = NULL;
    GE2_TRY(ge2_fusion_example_rows(300, &g, &labels, &a));
    ge2_status st = ge2_dropout(g, a, 0.3, &h);
    if (st == GE2_OK)
        st = ge2_layer_norm_layer(g, "ln", h, true, 1e-5, &n);
    if (st == GE2_OK)
        st = ge2_add(g, h, n, &h);
    return ge2_fusion_example_head(g, st, h, 10, labels, graph);
}

const ge2_fusion_pattern ge2_fusion_ln_backward = {
    .name = "ln_backward",
    .what = "a layer norm's parameter and input gradients, one kernel reading dy and x once",
    .match = match,
    .cuda = &cuda,
    .example = example,
};
