/* The residual-add + RMS norm pattern's row, a rewrite: an ADD s = a + b
 * (two operands of one shape, no broadcast) whose s an RMS_NORM normalizes
 * becomes one ADD_RMS_NORM (add_rms_norm.h) where the ADD stood, making s,
 * the norm's y and its saved rstd; the RMS_NORM node goes. Every other
 * reader of s (the next residual add, the norm's backward) reads it as
 * before, so a pre-norm transformer block's two residual adds each cost one
 * pass over the rows instead of two. */
#include "fusion/add_rms_norm/add_rms_norm.h"
#include "fusion/fusion.h"
#include "graph/error.h"
#include "graph/rewrite.h"

/* The RMS_NORM node n, when its x comes from a plain ADD the fused op can
 * replace: that ADD's node; else -1 with the reason in why */
static int fusable_add(const ge2_graph *g, const ge2_node *norm, const char **why)
{
    const int x = norm->inputs[0], w = norm->inputs[1], at = g->tensors[x]->producer;
    const ge2_node *add = at >= 0 ? &g->nodes[at] : NULL;
    if (!add || add->op != GE2_OP_ADD || add->phase != GE2_PHASE_FORWARD || add->n_inputs != 2 ||
        add->n_outputs != 1) {
        *why = "its x is not the sum of a forward ADD";
        return -1;
    }
    const ge2_tensor *a = g->tensors[add->inputs[0]], *b = g->tensors[add->inputs[1]], *s = g->tensors[x];
    if (!ge2_shape_equal(a->shape, s->shape) || !ge2_shape_equal(b->shape, s->shape) || a->dtype != s->dtype ||
        b->dtype != s->dtype) {
        *why = "the ADD broadcasts or converts";
        return -1;
    }
    if (norm->n_outputs < 2) {
        *why = "it keeps no rstd";
        return -1;
    }
    if (g->tensors[w]->producer >= at) {
        *why = "its weight is made after the ADD";
        return -1;
    }
    return at;
}

static ge2_status rewrite(ge2_graph *g, FILE *log, int *n_fused)
{
    *n_fused = 0;
    const ge2_op fused = ge2_op_add_rms_norm();
    if (fused < 0)
        return ge2_error(GE2_ERR_STATE, "fusion add_rms_norm: its op did not register when the library loaded");
    ge2_rewrite_scan s;
    GE2_TRY(ge2_rewrite_scan_begin(g, "add_rms_norm", &s));
    ge2_status st = GE2_OK;
    for (int n = 0; st == GE2_OK && n < g->n_nodes; n++) {
        const ge2_node *norm = &g->nodes[n];
        if (norm->op != GE2_OP_RMS_NORM || norm->phase != GE2_PHASE_FORWARD)
            continue;
        const char *why = NULL;
        const int at = fusable_add(g, norm, &why);
        if (at < 0) {
            if (log)
                fprintf(log, "fuse: add_rms_norm: rms_norm %d not fused: %s\n", n, why);
            continue;
        }
        const ge2_node *add = &g->nodes[at];
        const int in[3] = {add->inputs[0], add->inputs[1], norm->inputs[1]};
        const int out[3] = {add->outputs[0], norm->outputs[0], norm->outputs[1]};
        const ge2_attrs attrs = norm->attrs;
        st = ge2_graph_replace_node(g, at, fused, in, 3, out, 3, &attrs);
        if (st != GE2_OK)
            break;
        s.drop_node[n] = true;
        ++*n_fused;
        if (log)
            fprintf(log, "fuse: add_rms_norm: add %d + rms_norm %d -> add_rms_norm\n", at, n);
    }
    if (st == GE2_OK && log && *n_fused == 0)
        fprintf(log, "fuse: add_rms_norm: nothing fused (no RMS norm of a residual sum)\n");
    return ge2_rewrite_scan_end(&s, st);
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
