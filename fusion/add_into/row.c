/* The add-into pattern's row, a rewrite. An ADD of a tensor x and the
 * output of an op that has a form adding an addend at its store (the
 * pattern's ops, add_into.h) becomes that form with x as the addend: one
 * kernel and one tensor's write and read fewer, and the same bits (the op
 * rounds its own value before the sum, as it did apart). The ops:
 *   - DROPOUT -> DROPOUT_ADD (x, plus): a transformer block's residual x + dropout(z)
 *     (z's masked copy was read by the ADD alone: its backward draws the
 *     mask again and the ADD's passes dy through);
 *   - LAYER_NORM_GRAD_INPUT -> LAYER_NORM_GRAD_INPUT_ADD (its 4 inputs, plus): the residual stream's gradient, the
 *     skip's plus the layer norm's (autograd's accumulating ADD).
 * The fused node takes the ADD's place (every input exists by then) and
 * the op's node and its output go. */
#include <stdio.h>

#include "fusion/add_into/add_into.h"
#include "fusion/fusion.h"
#include "graph/error.h"
#include "graph/op_support.h"
#include "graph/rewrite.h"
#include "ops/ops.h"

/* The ops with a form that adds an addend: that form (-1: none) */
static ge2_op adding_form(ge2_op op)
{
    switch (op) {
    case GE2_OP_DROPOUT: return ge2_op_dropout_add();
    case GE2_OP_LAYER_NORM_GRAD_INPUT: return ge2_op_layer_norm_grad_input_add();
    default: return -1;
    }
}

/* Whether tensor t is the gradient autograd gave a parameter, an input or
 * an activation (ge2_grad finds it; a parameter's is its gradient pool
 * slot): dropping it would cut that link */
static bool is_a_gradient(const ge2_graph *g, int t)
{
    if (g->tensors[t]->grad_of >= 0)
        return true;
    for (int i = 0; i < g->n_tensors; i++)
        if (g->tensors[i]->grad == t)
            return true;
    return false;
}

/* The ADD at node `at`: x + OP(...) in either order, OP's output read by
 * this ADD alone, no tensor's gradient, and of the ADD's shape and dtype */
static ge2_status fuse_one(ge2_rewrite_scan *s, int at, FILE *log, int *n_fused)
{
    ge2_graph *g = s->graph;
    const ge2_node *add = &g->nodes[at];
    if (add->n_inputs != 2)
        return GE2_OK;
    const int y = add->outputs[0];
    for (int side = 0; side < 2; side++) {
        const int made = add->inputs[side], x = add->inputs[1 - side];
        const int p = g->tensors[made]->producer;
        const ge2_node *op = p >= 0 ? &g->nodes[p] : NULL;
        const ge2_op fused = op ? adding_form(op->op) : -1;
        if (fused < 0 || op->n_outputs != 1 || s->drop_node[p])
            continue;
        const int n_in = op->n_inputs; /* the addend comes next */
        const char *why = s->readers[made] != 1 || g->tensors[made]->is_output || made == x
                              ? "its output has other readers"
                          : is_a_gradient(g, made) ? "its output is a tensor's gradient (ge2_grad), which must stay"
                          : !ge2_shape_equal(g->tensors[x]->shape, g->tensors[y]->shape) ||
                                  !ge2_shape_equal(g->tensors[made]->shape, g->tensors[y]->shape)
                              ? "the add broadcasts"
                          : g->tensors[x]->dtype != g->tensors[made]->dtype ? "the add mixes dtypes"
                                                                             : NULL;
        if (why) { /* the other operand's op may still take it */
            if (log)
                fprintf(log, "fuse: add_into: add %d not fused into %s %d: %s\n", at, ge2_op_name(op->op), p, why);
            continue;
        }
        int in[GE2_MAX_INPUTS];
        for (int i = 0; i < n_in; i++)
            in[i] = op->inputs[i];
        in[n_in] = x;
        const ge2_attrs a = op->attrs;
        const ge2_op plain = op->op;
        GE2_TRY(ge2_graph_replace_node(g, at, fused, in, n_in + 1, &y, 1, &a));
        s->drop_node[p] = true;
        s->drop_tensor[made] = true;
        if (log)
            fprintf(log, "fuse: add_into: %s %d + add %d -> %s adding the other operand\n", ge2_op_name(plain), p, at,
                    ge2_op_name(fused));
        ++*n_fused;
        return GE2_OK;
    }
    return GE2_OK;
}

static ge2_status rewrite(ge2_graph *g, FILE *log, int *n_fused)
{
    *n_fused = 0;
    if (ge2_op_dropout_add() < 0 || ge2_op_layer_norm_grad_input_add() < 0)
        return ge2_error(GE2_ERR_STATE, "fusion add_into: its ops did not register when the library loaded");
    ge2_rewrite_scan s;
    GE2_TRY(ge2_rewrite_scan_begin(g, "add_into", &s));
    ge2_status st = GE2_OK;
    for (int n = 0; n < g->n_nodes && st == GE2_OK; n++)
        if (g->nodes[n].op == GE2_OP_ADD && !s.drop_node[n])
            st = fuse_one(&s, n, log, n_fused);
    if (st == GE2_OK && log && *n_fused == 0)
        fprintf(log, "fuse: add_into: nothing fused (no add of an output an op can add to)\n");
    return ge2_rewrite_scan_end(&s, st);
}

/* r = x + dropout(relu(linear(layer_norm(x)))), the block's parameters
 * named after i */
static ge2_status block(ge2_graph *g, int i, ge2_tensor *x, ge2_tensor **r)
{
    char name[32];
    ge2_tensor *h, *w, *b;
    snprintf(name, sizeof name, "ln%d", i);
    GE2_TRY(ge2_layer_norm_layer(g, name, x, true, 1e-5, &h));
    snprintf(name, sizeof name, "w%d", i);
    GE2_TRY(ge2_parameter(g, name, GE2_F32, ge2_shape2(32, 32), (ge2_init){GE2_INIT_UNIFORM, -0.2, 0.2, 0}, &w));
    snprintf(name, sizeof name, "b%d", i);
    GE2_TRY(ge2_parameter(g, name, GE2_F32, ge2_shape1(32), (ge2_init){GE2_INIT_ZEROS, 0, 0, 0}, &b));
    GE2_TRY(ge2_linear(g, h, w, b, GE2_ACT_RELU, 0, &h));
    GE2_TRY(ge2_dropout(g, h, 0.25, &h));
    return ge2_add(g, x, h, r);
}

/* Two residual blocks, then the head: each dropout takes its block's x,
 * and the second block's layer-norm input gradient the skip's gradient */
static ge2_status example(ge2_graph **graph)
{
    ge2_graph *g;
    ge2_tensor *x, *labels, *r = NULL;
    GE2_TRY(ge2_graph_new(&g));
    ge2_status st = ge2_input(g, "x", GE2_F32, ge2_shape2(24, 32), &x);
    if (st == GE2_OK)
        st = ge2_label(g, "labels", GE2_I32, ge2_shape1(24), &labels);
    if (st == GE2_OK)
        st = block(g, 1, x, &r);
    if (st == GE2_OK)
        st = block(g, 2, r, &r);
    return ge2_fusion_example_head(g, st, r, 10, labels, graph);
}

const ge2_fusion_pattern ge2_fusion_add_into = {
    .name = "add_into",
    .what = "an add of an op's output (dropout, layer norm's input gradient) done by that op at its store",
    .rewrite = rewrite,
    .match = NULL,
    .cuda = NULL, /* its ops' kernels are the op families' (add_into.c) */
    .example = example,
    .exact = true,
};
