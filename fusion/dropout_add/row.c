/* The residual dropout pattern's row, a rewrite. A transformer block ends
 * with x + dropout(z): DROPOUT writes the masked z, an ADD reads it and the
 * residual x and writes their sum, and nothing else reads the masked z (its
 * backward draws the mask again, the ADD's passes dy through). This row
 * gives the ADD's place to one DROPOUT (z, x) -> x + dropout(z), whose
 * kernel loads x beside z (ops/dropout: the optional addend), and drops the
 * first node and its tensor: one kernel and one tensor's write and read
 * fewer a residual, the same bits (the masked value is rounded before the
 * sum, as apart). Forward only: autograd has run, so the backward is
 * untouched. */
#include <stdio.h>

#include "fusion/fusion.h"
#include "graph/error.h"
#include "graph/op_support.h"
#include "graph/rewrite.h"
#include "ops/ops.h"

/* The ADD at node `at`: x + DROPOUT(z) in either order, the dropout's
 * output read by this ADD alone */
static ge2_status fuse_one(ge2_rewrite_scan *s, int at, FILE *log, int *n_fused)
{
    ge2_graph *g = s->graph;
    const ge2_node *add = &g->nodes[at];
    if (add->n_inputs != 2 || add->phase != GE2_PHASE_FORWARD)
        return GE2_OK;
    const int y = add->outputs[0];
    for (int side = 0; side < 2; side++) {
        const int masked = add->inputs[side], x = add->inputs[1 - side];
        const int p = g->tensors[masked]->producer;
        const ge2_node *d = p >= 0 ? &g->nodes[p] : NULL;
        if (!d || d->op != GE2_OP_DROPOUT || d->n_inputs != 1 || s->drop_node[p])
            continue;
        if (s->readers[masked] != 1 || g->tensors[masked]->is_output || masked == x) {
            if (log)
                fprintf(log, "fuse: dropout_add: add %d not fused: dropout %d's output has other readers\n", at, p);
            return GE2_OK;
        }
        if (!ge2_shape_equal(g->tensors[x]->shape, g->tensors[y]->shape) ||
            !ge2_shape_equal(g->tensors[masked]->shape, g->tensors[y]->shape)) {
            if (log)
                fprintf(log, "fuse: dropout_add: add %d not fused: it broadcasts\n", at);
            return GE2_OK;
        }
        const ge2_attrs a = d->attrs;
        const int in[2] = {d->inputs[0], x};
        GE2_TRY(ge2_graph_replace_node(g, at, GE2_OP_DROPOUT, in, 2, &y, 1, &a));
        s->drop_node[p] = true;
        s->drop_tensor[masked] = true;
        if (log)
            fprintf(log, "fuse: dropout_add: dropout %d + add %d -> dropout with the residual added\n", p, at);
        ++*n_fused;
        return GE2_OK;
    }
    return GE2_OK;
}

static ge2_status rewrite(ge2_graph *g, FILE *log, int *n_fused)
{
    *n_fused = 0;
    ge2_rewrite_scan s;
    GE2_TRY(ge2_rewrite_scan_begin(g, "dropout_add", &s));
    ge2_status st = GE2_OK;
    for (int n = 0; n < g->n_nodes && st == GE2_OK; n++)
        if (g->nodes[n].op == GE2_OP_ADD && !s.drop_node[n])
            st = fuse_one(&s, n, log, n_fused);
    if (st == GE2_OK && log && *n_fused == 0)
        fprintf(log, "fuse: dropout_add: nothing fused (no add of a dropout's output)\n");
    return ge2_rewrite_scan_end(&s, st);
}

/* A residual block: x + dropout(relu(linear(x))), then the head */
static ge2_status example(ge2_graph **graph)
{
    ge2_graph *g;
    ge2_tensor *x, *labels, *w, *b, *h, *r, *w2, *b2, *logits;
    GE2_TRY(ge2_graph_new(&g));
    ge2_status st = ge2_input(g, "x", GE2_F32, ge2_shape2(24, 32), &x);
    if (st == GE2_OK)
        st = ge2_label(g, "labels", GE2_I32, ge2_shape1(24), &labels);
    if (st == GE2_OK)
        st = ge2_parameter(g, "w", GE2_F32, ge2_shape2(32, 32), (ge2_init){GE2_INIT_UNIFORM, -0.2, 0.2, 0}, &w);
    if (st == GE2_OK)
        st = ge2_parameter(g, "b", GE2_F32, ge2_shape1(32), (ge2_init){GE2_INIT_ZEROS, 0, 0, 0}, &b);
    if (st == GE2_OK)
        st = ge2_linear(g, x, w, b, GE2_ACT_RELU, 0, &h);
    if (st == GE2_OK)
        st = ge2_dropout(g, h, 0.25, &h);
    if (st == GE2_OK)
        st = ge2_add(g, x, h, &r);
    if (st == GE2_OK)
        st = ge2_parameter(g, "w2", GE2_F32, ge2_shape2(10, 32), (ge2_init){GE2_INIT_UNIFORM, -0.2, 0.2, 0}, &w2);
    if (st == GE2_OK)
        st = ge2_parameter(g, "b2", GE2_F32, ge2_shape1(10), (ge2_init){GE2_INIT_ZEROS, 0, 0, 0}, &b2);
    if (st == GE2_OK)
        st = ge2_linear(g, r, w2, b2, GE2_ACT_NONE, 0, &logits);
    return ge2_fusion_example_train(g, st, logits, labels, graph);
}

const ge2_fusion_pattern ge2_fusion_dropout_add = {
    .name = "dropout_add",
    .what = "a residual x + dropout(z) as one dropout kernel that adds x",
    .rewrite = rewrite,
    .match = NULL,
    .cuda = NULL, /* DROPOUT's own kernel takes the addend (ops/dropout) */
    .example = example,
};
