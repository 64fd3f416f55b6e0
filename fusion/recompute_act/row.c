/* The activation recompute pattern's row, a rewrite. A LINEAR with an
 * activation that keeps z (GELU: ops/linear, ge2_linear_stash_of) writes
 * h = act(z) for the next LINEAR and z for its own backward; the next
 * layer's weight gradient (LINEAR_GRAD_WEIGHT, dW = dyᵀ·h) reads h again in
 * the backward, so h lives from the forward to there, beside z. After
 * backward_gemm, that layer's LINEAR_GRAD_INPUT already loads z to apply
 * act' to its dx; this row puts the pattern's op in its place, which
 * writes act(z) again as its last output (recompute_act.h), and has the
 * weight gradient read that instead:
 *     LINEAR_GRAD_INPUT_RECOMPUTE (dy, w, z) -> dz[, db], h'     LINEAR_GRAD_WEIGHT (dy, h') -> dW
 * h then dies in the forward, and each h' lives from one node to the next:
 * a GPT's MLP keeps 4C values a position less per layer, for one more
 * store of them in a kernel that runs anyway. h' is the forward's function
 * of the same z: the CPU's and a bf16 h's bits (ge2_act_for_bf16 both
 * ways); an f32 h that cuBLASLt's GELU epilogue made may differ from it in
 * the last bits.
 *
 * Only where that input gradient comes first (autograd's order: a layer's
 * input gradient, then its weight gradient), no other backward node reads
 * h (it would live anyway), and the layer is wider than a classifier head
 * (fusion/head runs a head's two gradients as one kernel, which reading h'
 * would split). */
#include <stdio.h>

#include "fusion/fusion.h"
#include "fusion/head/head.h"
#include "fusion/recompute_act/recompute_act.h"
#include "graph/error.h"
#include "graph/rewrite.h"
#include "ops/linear/linear.h"

static void say(FILE *log, const ge2_node *gi, const char *why)
{
    if (log)
        fprintf(log, "fuse: recompute_act: linear_grad_input %d not rewritten: %s\n", gi->id, why);
}

/* The LINEAR that saved z for gi, with act(z) its output 0; NULL if none */
static const ge2_node *saver_of(const ge2_graph *g, const ge2_node *gi)
{
    if (gi->n_inputs < 3 || GE2_ATTRS(ge2_act_attrs, gi->attrs)->from_output)
        return NULL;
    const int z = gi->inputs[2], p = g->tensors[z]->producer;
    if (p < 0)
        return NULL;
    const ge2_node *lin = &g->nodes[p];
    const ge2_linear_attrs *a = GE2_ATTRS(ge2_linear_attrs, lin->attrs);
    if (lin->op != GE2_OP_LINEAR || lin->n_outputs < 2 || lin->outputs[1] != z ||
        ge2_linear_stash_of(a->act, a->slope) != GE2_STASH_Z)
        return NULL;
    return lin;
}

static ge2_status rewrite_one(ge2_graph *g, int at, FILE *log, int *n_fused)
{
    const ge2_node *gi = &g->nodes[at];
    const ge2_node *lin = saver_of(g, gi);
    if (!lin)
        return GE2_OK; /* not a layer's act' on a saved z: nothing to say */
    const int h = lin->outputs[0], dy = gi->inputs[0];
    if (g->tensors[dy]->shape.dim[1] <= GE2_HEAD_MAX_CLASSES) {
        say(log, gi, "a classifier head's gradients, which the head pattern runs as one kernel (and whose "
                     "activation is small)");
        return GE2_OK;
    }
    int gw = -1;
    for (int n = 0; n < g->n_nodes; n++) {
        const ge2_node *r = &g->nodes[n];
        if (r->phase == GE2_PHASE_FORWARD)
            continue;
        for (int i = 0; i < r->n_inputs; i++) {
            if (r->inputs[i] != h)
                continue;
            if (r->op != GE2_OP_LINEAR_GRAD_WEIGHT || i != 1 || r->inputs[0] != dy || gw >= 0) {
                say(log, gi, "another backward node reads the activation");
                return GE2_OK;
            }
            gw = n;
        }
    }
    if (gw < 0) {
        say(log, gi, "no weight gradient of the same dy reads the activation");
        return GE2_OK;
    }
    if (gw < at) {
        say(log, gi, "the weight gradient comes first");
        return GE2_OK;
    }
    int again;
    GE2_TRY(ge2_graph_new_like(g, h, "again", &again));
    const ge2_attrs a = gi->attrs;
    int out[3] = {gi->outputs[0], gi->outputs[1], -1};
    const int n_out = gi->n_outputs + 1; /* dx[, db], act(z) last */
    out[n_out - 1] = again;
    const int in[3] = {gi->inputs[0], gi->inputs[1], gi->inputs[2]};
    GE2_TRY(ge2_graph_replace_node(g, at, ge2_op_linear_grad_input_recompute(), in, 3, out, n_out, &a));
    g->nodes[gw].inputs[1] = again;
    g->changes++;
    if (log)
        fprintf(log, "fuse: recompute_act: linear_grad_input %d makes '%s' again for linear_grad_weight %d\n", at,
                g->tensors[h]->name, gw);
    (*n_fused)++;
    return GE2_OK;
}

static ge2_status rewrite(ge2_graph *g, FILE *log, int *n_fused)
{
    *n_fused = 0;
    if (ge2_op_linear_grad_input_recompute() < 0)
        return ge2_error(GE2_ERR_STATE, "fusion recompute_act: its op did not register when the library loaded");
    for (int n = 0; n < g->n_nodes; n++)
        if (g->nodes[n].op == GE2_OP_LINEAR_GRAD_INPUT)
            GE2_TRY(rewrite_one(g, n, log, n_fused));
    if (log && *n_fused == 0)
        fprintf(log, "fuse: recompute_act: nothing rewritten (no layer's act' on a saved z before its weight "
                     "gradient)\n");
    return GE2_OK;
}

/* Two GELU layers and a head: the second layer's weight gradient reads its
 * input made again (the head's is left to fusion/head). */
static ge2_status example(ge2_graph **graph)
{
    static const int64_t widths[] = {40, 48, 64, 10};
    return ge2_fusion_example_mlp(widths, 4, 24, GE2_ACT_GELU_TANH, graph);
}

const ge2_fusion_pattern ge2_fusion_recompute_act = {
    .name = "recompute_act",
    .what = "a layer's activation made again by the next layer's input gradient (which loads z anyway) for its "
            "weight gradient, instead of kept from the forward",
    .rewrite = rewrite,
    .match = NULL,
    .cuda = NULL, /* its op's kernels are the linear family's (recompute_act.c) */
    .example = example,
    .exact = true,
};
