/* The dropout-then-layer-norm pattern's row: a DROPOUT, the RESHAPEs of
 * its result if any, and the LAYER_NORM of it, consecutive in the
 * schedule, as one kernel (dropout_ln.h), side by side in one phase. */
#include "fusion/add_into/add_into.h"
#include "fusion/dropout_ln/dropout_ln.h"
#include "fusion/fusion.h"
#include "graph/error.h"
#include "ops/norm/norm.h"

/* RESHAPEs allowed between the two: a block's input is a view of the
 * embeddings' [B, T, C] as [B·T, C] */
#define MAX_VIEWS 2

static bool match(const ge2_fusion_key *key, int at, ge2_fusion_group *group, char *why, size_t why_size)
{
    const ge2_node *d = key->nodes[at];
    if ((d->op != GE2_OP_DROPOUT && d->op != ge2_op_dropout_add()) || d->n_outputs < 1)
        return ge2_fusion_no(why, why_size, "not a DROPOUT or DROPOUT_ADD");
    int t = d->outputs[0], next = at + 1;
    while (next < key->n && next - at <= MAX_VIEWS && key->nodes[next]->op == GE2_OP_RESHAPE &&
           key->nodes[next]->inputs[0] == t)
        t = key->nodes[next++]->outputs[0];
    if (next >= key->n || key->nodes[next]->op != GE2_OP_LAYER_NORM || key->nodes[next]->inputs[0] != t)
        return ge2_fusion_no(why, why_size,
                             "the DROPOUT's result (through up to %d RESHAPEs) is not the next LAYER_NORM's x",
                             MAX_VIEWS);
    if (!ge2_ln_row4_fits(ge2_ln_geom_of(key->shape_of(key->ctx, t)).c, GE2_LN_ROW4_MAX_C, why, why_size))
        return false;
    return ge2_fusion_one_phase(group, next - at + 1);
}

static const ge2_fusion_impl cuda = {
    /* no GEMM: f32 dropouts and layer norms under bf16 fuse too, and the
     * norm's result may be the bf16 copy a GEMM reads (ge2_dropout_ln_takes) */
    .does = GE2_FUSION_ANY_PRECISION | GE2_FUSION_TAKES_BF16,
    .takes = ge2_dropout_ln_takes,
    .run = ge2_dropout_ln_launch,
    .what = "ge2 fused dropout and layer norm (the norm reads the dropout's row from registers)",
};

/* x -> linear -> h + dropout(h) (one DROPOUT_ADD, add_into) ->
 * viewed as [10, 10, 300] -> layer_norm -> back to [100, 300] -> head: rows
 * of 300 (the last of a lane's fours past the row for some lanes) and 100
 * rows (the last block's 8 not all there), through a RESHAPE as a GPT's
 * first block meets its embeddings */
static ge2_status example(ge2_graph **graph)
{
    ge2_graph *g;
    ge2_tensor *labels, *h, *d = NULL, *s = NULL, *v = NULL, *n = NULL;
    GE2_TRY(ge2_fusion_example_rows(300, &g, &labels, &h));
    ge2_status st = ge2_dropout(g, h, 0.3, &d);
    if (st == GE2_OK)
        st = ge2_add(g, h, d, &s);
    if (st == GE2_OK)
        st = ge2_reshape(g, s, ge2_shape3(10, 10, 300), &v);
    if (st == GE2_OK)
        st = ge2_layer_norm_layer(g, "ln", v, true, 1e-5, &n);
    if (st == GE2_OK)
        st = ge2_reshape(g, n, ge2_shape2(100, 300), &n);
    return ge2_fusion_example_head(g, st, n, 10, labels, graph);
}

const ge2_fusion_pattern ge2_fusion_dropout_ln = {
    .name = "dropout_ln",
    .what = "a dropout (with its residual addend) and the layer norm of its result, one kernel",
    .match = match,
    .cuda = &cuda,
    .example = example,
};
