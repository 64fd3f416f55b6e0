/* The backward GEMM epilogue pattern's row, a rewrite. Autograd gives a
 * LINEAR's backward as plain nodes (ops/linear/backward.c):
 *     dz = ACTIVATION_BACKWARD(dy, y or z)    dx = MATMUL(dz, w)
 *     dW = MATMUL(dzᵀ, x)                      db = SUM(dz, axis 0)
 * and this row fuses them into the GEMM family's backward ops, whose
 * kernels run the extra work in the GEMM's epilogue (cuBLASLt's BGRADB and
 * DRELU/DGELU_BGRAD epilogues, kernels/cuda):
 *   - dW and db: one LINEAR_GRAD_WEIGHT (dz, x) -> dW, db;
 *   - dx and, when only the activation derivative of another LINEAR (the
 *     producer of x) reads it, that LINEAR's dz = act'(its stash) ⊙ dx:
 *     one LINEAR_GRAD_INPUT (dz, w[, stash]) -> its dz. The derivative
 *     node goes.
 * The fused node takes the place of the earlier node it replaces, so the
 * node order (and with it the schedule) is the one autograd gave, less the
 * nodes absorbed; the whole-step MLP kernel and the head pairs match these
 * fused nodes (fusion/mlp_step, fusion/head). */
#include <stdlib.h>
#include <string.h>

#include "fusion/fusion.h"
#include "graph/alloc.h"
#include "graph/error.h"
#include "graph/op_support.h"
#include "graph/rewrite.h"
#include "ops/linear/linear.h"
#include "ops/reduce/reduce.h"

typedef struct scan {
    ge2_rewrite_scan r;
    FILE *log;
} scan;

static void say(const scan *s, const ge2_node *m, const char *why)
{
    if (s->log)
        fprintf(s->log, "fuse: backward_gemm: matmul %d not fused: %s\n", m->id, why);
}

/* dW = MATMUL(dzᵀ, x), x being a LINEAR's input and dW its weight's shape,
 * with db = SUM(dz, axis 0) when autograd made one: one LINEAR_GRAD_WEIGHT
 * where the first of the two stood. */
static ge2_status fuse_weight(scan *s, int m, int *n_fused)
{
    ge2_graph *g = s->r.graph;
    const ge2_node *mm = &g->nodes[m];
    const int dz = mm->inputs[0], x = mm->inputs[1], dw = mm->outputs[0];
    if (g->tensors[dz]->shape.ndim != 2 || g->tensors[x]->shape.ndim != 2) {
        say(s, mm, "a batched product (LINEAR's are 2-D)");
        return GE2_OK;
    }
    bool linear_input = false;
    for (int n = 0; n < g->n_nodes && !linear_input; n++) {
        const ge2_node *l = &g->nodes[n];
        linear_input = l->phase == GE2_PHASE_FORWARD && l->op == GE2_OP_LINEAR && l->inputs[0] == x &&
                       ge2_shape_equal(g->tensors[l->inputs[1]]->shape, g->tensors[dw]->shape);
    }
    if (!linear_input) {
        say(s, mm, "dzᵀ · x where x is no LINEAR's input (not a weight gradient)");
        return GE2_OK;
    }
    int sum = -1;
    for (int n = 0; n < g->n_nodes && sum < 0; n++) {
        const ge2_node *c = &g->nodes[n];
        if (!s->r.drop_node[n] && c->phase == GE2_PHASE_BACKWARD && c->op == GE2_OP_SUM && c->inputs[0] == dz &&
            GE2_ATTRS(ge2_reduce_attrs, c->attrs)->axis == 0 && g->tensors[dz]->shape.ndim == 2)
            sum = n;
    }
    int at = sum >= 0 && sum < m ? sum : m;
    int in[2] = {dz, x}, out[2] = {dw, sum >= 0 ? g->nodes[sum].outputs[0] : -1};
    GE2_TRY(ge2_graph_replace_node(g, at, GE2_OP_LINEAR_GRAD_WEIGHT, in, 2, out, sum >= 0 ? 2 : 1, NULL));
    if (sum >= 0)
        s->r.drop_node[at == m ? sum : m] = true;
    if (s->log && sum >= 0)
        fprintf(s->log, "fuse: backward_gemm: matmul %d + sum %d -> linear_grad_weight (dW and db in one GEMM)\n", m,
                sum);
    else if (s->log)
        fprintf(s->log, "fuse: backward_gemm: matmul %d -> linear_grad_weight (dW)\n", m);
    ++*n_fused;
    return GE2_OK;
}

/* The forward LINEAR that made tensor t (as its y, or its stash when
 * `stash_too`), with the outputs its activation needs (a LINEAR made by
 * hand without its stash has nothing to fuse with); NULL otherwise. */
static const ge2_node *linear_of(const ge2_graph *g, int t, bool stash_too)
{
    const int p = g->tensors[t]->producer;
    const ge2_node *l = p >= 0 ? &g->nodes[p] : NULL;
    if (!l || l->op != GE2_OP_LINEAR || l->phase != GE2_PHASE_FORWARD)
        return NULL;
    const ge2_linear_stash stash = ge2_linear_stash_of(GE2_ATTRS(ge2_linear_attrs, l->attrs)->act, GE2_ATTRS(ge2_linear_attrs, l->attrs)->slope);
    if (l->n_outputs != (stash == GE2_STASH_NONE ? 1 : 2))
        return NULL;
    return l->outputs[0] == t || (stash_too && l->n_outputs > 1 && l->outputs[1] == t) ? l : NULL;
}

/* dx = MATMUL(dz, w) (2-D, no transposes), read only by
 * ACTIVATION_BACKWARD(dx, y or z of a LINEAR, the producer) with that
 * LINEAR's activation: both are one LINEAR_GRAD_INPUT (dz, w[, stash]) =
 * (dz · w) ⊙ act'(the producer's stash), the producer's dz whatever x and
 * w are. It keeps dx's tensor, which the derivative's readers read
 * instead, and the derivative node goes. Without an activation, when dx is
 * the whole gradient of a LINEAR's y, the MATMUL alone becomes one (the
 * GEMM family's kernel, as for every LINEAR's dx). */
static ge2_status fuse_input(scan *s, int m, int *n_fused)
{
    ge2_graph *g = s->r.graph;
    const ge2_node *mm = &g->nodes[m];
    const int dz = mm->inputs[0], w = mm->inputs[1], dx = mm->outputs[0];
    if (g->tensors[dz]->shape.ndim != 2 || g->tensors[w]->shape.ndim != 2) {
        say(s, mm, "a batched product (LINEAR's are 2-D)");
        return GE2_OK;
    }
    if (g->tensors[dx]->is_output) {
        say(s, mm, "dx is a marked output: it stays dx");
        return GE2_OK;
    }
    const int reader = s->r.readers[dx] == 1 ? s->r.last_reader[dx] : -1;
    const ge2_node *ab = reader >= 0 ? &g->nodes[reader] : NULL;
    const bool derivative = ab && ab->op == GE2_OP_ACTIVATION_BACKWARD && ab->phase == GE2_PHASE_BACKWARD &&
                            ab->inputs[0] == dx;
    const ge2_node *producer = derivative ? linear_of(g, ab->inputs[1], true) : NULL;
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    int in[3] = {dz, w, -1}, n_in = 2;
    if (derivative) {
        const ge2_linear_attrs la = producer ? (*GE2_ATTRS(ge2_linear_attrs, producer->attrs)) : (ge2_linear_attrs){GE2_ACT_NONE, 0};
        const ge2_tensor *dz_below = g->tensors[ab->outputs[0]];
        if (!producer || la.act != GE2_ATTRS(ge2_act_attrs, ab->attrs)->act || la.slope != GE2_ATTRS(ge2_act_attrs, ab->attrs)->slope || dz_below->is_output ||
            dz_below->grad_of >= 0) {
            say(s, mm, "dx's activation derivative is not of a LINEAR's own activation");
            return GE2_OK;
        }
        GE2_ATTRS(ge2_act_attrs, a)->act = la.act;
        GE2_ATTRS(ge2_act_attrs, a)->slope = la.slope;
        GE2_ATTRS(ge2_act_attrs, a)->from_output = ge2_linear_stash_of(la.act, la.slope) == GE2_STASH_NONE;
        in[n_in++] = GE2_ATTRS(ge2_act_attrs, a)->from_output ? producer->outputs[0] : producer->outputs[1];
    } else {
        bool whole_gradient = false;
        for (int n = 0; n < g->n_nodes && !whole_gradient; n++) {
            const ge2_node *l = &g->nodes[n];
            whole_gradient = l->op == GE2_OP_LINEAR && l->phase == GE2_PHASE_FORWARD &&
                             GE2_ATTRS(ge2_linear_attrs, l->attrs)->act == GE2_ACT_NONE && linear_of(g, l->outputs[0], false) == l &&
                             g->tensors[l->outputs[0]]->grad == dx;
        }
        if (!whole_gradient) {
            say(s, mm, "dx is neither read by a LINEAR's activation derivative alone nor the gradient of a LINEAR's y");
            return GE2_OK;
        }
    }
    GE2_TRY(ge2_graph_replace_node(g, m, GE2_OP_LINEAR_GRAD_INPUT, in, n_in, &dx, 1, &a));
    if (derivative) {
        /* dx's tensor now holds the producer's dz: its readers read it there */
        const int dz_below = ab->outputs[0];
        ge2_rewrite_redirect(&s->r, dz_below, dx);
        s->r.drop_node[reader] = true;
        s->r.drop_tensor[dz_below] = true;
        for (int t = 0; t < g->n_tensors; t++)
            if (g->tensors[t]->grad == dx)
                g->tensors[t]->grad = -1; /* dx's tensor is no longer that tensor's gradient */
        if (s->log)
            fprintf(s->log,
                    "fuse: backward_gemm: matmul %d + activation_backward %d -> linear_grad_input (dx and the "
                    "producer's act' in one GEMM)\n",
                    m, reader);
    } else if (s->log) {
        fprintf(s->log, "fuse: backward_gemm: matmul %d -> linear_grad_input (dx, the producer's dz)\n", m);
    }
    ++*n_fused;
    return GE2_OK;
}

static ge2_status rewrite(ge2_graph *g, FILE *log, int *n_fused)
{
    *n_fused = 0;
    scan s = {.log = log};
    GE2_TRY(ge2_rewrite_scan_begin(g, "backward_gemm", &s.r));
    ge2_status st = GE2_OK;
    if (log)
        fprintf(log, "fuse: backward_gemm: (node ids as verified; the fused graph is renumbered)\n");
    for (int m = 0; st == GE2_OK && m < g->n_nodes; m++) {
        const ge2_node *node = &g->nodes[m];
        if (s.r.drop_node[m] || node->phase != GE2_PHASE_BACKWARD || node->op != GE2_OP_MATMUL)
            continue;
        ge2_rewrite_scan_count(&s.r); /* the last rewrite may have moved readers */
        if (GE2_ATTRS(ge2_matmul_attrs, node->attrs)->trans_a && !GE2_ATTRS(ge2_matmul_attrs, node->attrs)->trans_b)
            st = fuse_weight(&s, m, n_fused);
        else if (!GE2_ATTRS(ge2_matmul_attrs, node->attrs)->trans_a && !GE2_ATTRS(ge2_matmul_attrs, node->attrs)->trans_b)
            st = fuse_input(&s, m, n_fused);
        else
            say(&s, node, "a product no LINEAR backward makes");
    }
    if (st == GE2_OK && log && *n_fused == 0)
        fprintf(log, "fuse: backward_gemm: nothing fused (no LINEAR backward GEMMs)\n");
    return ge2_rewrite_scan_end(&s.r, st);
}

/* Three layers: two LINEAR_GRAD_INPUTs (through relu's mask) and three
 * LINEAR_GRAD_WEIGHTs. */
static ge2_status example(ge2_graph **graph)
{
    static const int64_t widths[] = {40, 48, 32, 10};
    return ge2_fusion_example_mlp(widths, 4, 24, GE2_ACT_RELU, graph);
}

const ge2_fusion_pattern ge2_fusion_backward_gemm = {
    .name = "backward_gemm",
    .what = "a LINEAR's backward GEMMs with the bias gradient and the activation derivative in their epilogues",
    .rewrite = rewrite,
    .match = NULL,
    .cuda = NULL, /* the fused ops have kernels of their own (ops/linear) */
    .example = example,
};
