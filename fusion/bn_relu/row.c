/* The batch norm + ReLU pattern's row, a rewrite into the pattern's fused
 * ops (bn_relu.h): a BATCH_NORM whose y only an ACTIVATION relu reads
 * becomes a BATCH_NORM_RELU, which writes max(0, ·) itself; and the relu's
 * derivative, ACTIVATION_BACKWARD(dy, the relu'd y), when only that batch
 * norm's two backward ops read it, goes into them: they become
 * BATCH_NORM_RELU_GRAD_PARAMS and _GRAD_INPUT, which take dy and the relu'd
 * y and use dy where y > 0. A conv block (conv, batch norm, relu, pool)
 * then runs one elementwise kernel less forward and one less backward, and
 * neither the pre-relu y nor its gradient is ever stored.
 *
 * The nodes keep their places; the relu's output tensor becomes the batch
 * norm's y (its readers, the pool and the derivative, read it as before). */
#include <string.h>

#include "fusion/bn_relu/bn_relu.h"
#include "fusion/fusion.h"
#include "graph/alloc.h"
#include "graph/error.h"
#include "graph/rewrite.h"
#include "ops/elementwise/elementwise.h"
#include "ops/ops.h"

typedef struct scan {
    ge2_rewrite_scan r;
    FILE *log;
} scan;

static bool is_relu(const ge2_node *node, ge2_op op, ge2_phase phase)
{
    return node->op == op && node->phase == phase && GE2_ATTRS(ge2_act_attrs, node->attrs)->act == GE2_ACT_RELU;
}

/* BATCH_NORM b's y read only by a relu: b writes the relu's output. */
static ge2_status fuse_forward(scan *s, int b, int *n_fused)
{
    ge2_graph *g = s->r.graph;
    const ge2_node *bn = &g->nodes[b];
    const int y = bn->outputs[0];
    const int r = s->r.readers[y] == 1 ? s->r.last_reader[y] : -1;
    if (r < 0 || !is_relu(&g->nodes[r], GE2_OP_ACTIVATION, GE2_PHASE_FORWARD) || g->tensors[y]->is_output) {
        if (s->log)
            fprintf(s->log, "fuse: bn_relu: batch_norm %d not fused: its y is not read by a relu alone\n", b);
        return GE2_OK;
    }
    const ge2_attrs a = bn->attrs;
    int out[2] = {g->nodes[r].outputs[0], bn->n_outputs > 1 ? bn->outputs[1] : -1};
    GE2_TRY(ge2_graph_replace_node(g, b, ge2_op_batch_norm_relu(), bn->inputs, bn->n_inputs, out, bn->n_outputs, &a));
    s->r.drop_node[r] = true;
    s->r.drop_tensor[y] = true;
    if (s->log)
        fprintf(s->log, "fuse: bn_relu: batch_norm %d + activation %d -> batch_norm_relu\n", b, r);
    ++*n_fused;
    return GE2_OK;
}

/* ACTIVATION_BACKWARD a = relu'(dy) from the y of a BATCH_NORM_RELU, read
 * only by that batch norm's backward ops: they become the fused backward
 * ops, which take dy and y. */
static ge2_status fuse_backward(scan *s, int a, int *n_fused)
{
    ge2_graph *g = s->r.graph;
    const ge2_node *ab = &g->nodes[a];
    const int dy = ab->inputs[0], y = ab->inputs[1], gz = ab->outputs[0];
    const int b = g->tensors[y]->producer;
    const ge2_node *bn = b >= 0 ? &g->nodes[b] : NULL;
    if (!bn || bn->op != ge2_op_batch_norm_relu() || bn->outputs[0] != y ||
        bn->n_outputs < 2 || !GE2_ATTRS(ge2_act_attrs, ab->attrs)->from_output)
        return GE2_OK; /* not a relu of this pattern's: nothing to say */
    int users[2], n_users = 0;
    bool ours = s->r.readers[gz] <= 2 && !g->tensors[gz]->is_output;
    for (int n = 0; ours && n < g->n_nodes; n++) {
        const ge2_node *c = &g->nodes[n];
        bool reads = false;
        for (int i = 0; !s->r.drop_node[n] && i < c->n_inputs; i++)
            reads = reads || c->inputs[i] == gz;
        if (!reads)
            continue;
        const bool params = c->op == GE2_OP_BATCH_NORM_GRAD_PARAMS && c->n_inputs == 3;
        const bool input = c->op == GE2_OP_BATCH_NORM_GRAD_INPUT && c->n_inputs == 6;
        ours = (params || input) && c->inputs[0] == gz &&
               c->inputs[1] == bn->inputs[0] && c->inputs[params ? 2 : 3] == bn->outputs[1];
        for (int i = 1; ours && i < c->n_inputs; i++)
            ours = c->inputs[i] != gz;
        if (ours)
            users[n_users++] = n;
    }
    if (!ours || n_users == 0) {
        if (s->log)
            fprintf(s->log,
                    "fuse: bn_relu: activation_backward %d not fused: its result is read by more than batch_norm "
                    "%d's backward ops\n",
                    a, b);
        return GE2_OK;
    }
    for (int u = 0; u < n_users; u++) {
        const ge2_node *c = &g->nodes[users[u]];
        int in[GE2_MAX_INPUTS];
        memcpy(in, c->inputs, sizeof(int) * (size_t)c->n_inputs);
        in[0] = dy;
        in[c->n_inputs] = y;
        const ge2_attrs attrs = c->attrs;
        const ge2_op fused = c->op == GE2_OP_BATCH_NORM_GRAD_PARAMS ? ge2_op_batch_norm_relu_grad_params()
                                                                    : ge2_op_batch_norm_relu_grad_input();
        GE2_TRY(ge2_graph_replace_node(g, users[u], fused, in, c->n_inputs + 1, c->outputs, c->n_outputs, &attrs));
    }
    s->r.drop_node[a] = true;
    s->r.drop_tensor[gz] = true;
    for (int t = 0; t < g->n_tensors; t++)
        if (g->tensors[t]->grad == gz)
            g->tensors[t]->grad = -1; /* the pre-relu y's gradient is no longer stored */
    if (s->log)
        fprintf(s->log, "fuse: bn_relu: activation_backward %d -> into batch_norm %d's backward ops\n", a, b);
    ++*n_fused;
    return GE2_OK;
}

static ge2_status rewrite(ge2_graph *g, FILE *log, int *n_fused)
{
    *n_fused = 0;
    if (ge2_op_batch_norm_relu() < 0 || ge2_op_batch_norm_relu_grad_params() < 0 ||
        ge2_op_batch_norm_relu_grad_input() < 0)
        return ge2_error(GE2_ERR_STATE, "fusion bn_relu: its ops did not register when the library loaded");
    scan s = {.log = log};
    GE2_TRY(ge2_rewrite_scan_begin(g, "bn_relu", &s.r));
    ge2_status st = GE2_OK;
    for (int n = 0; st == GE2_OK && n < g->n_nodes; n++)
        if (g->nodes[n].op == GE2_OP_BATCH_NORM)
            st = fuse_forward(&s, n, n_fused);
    ge2_rewrite_scan_count(&s.r);
    for (int n = 0; st == GE2_OK && n < g->n_nodes; n++)
        if (!s.r.drop_node[n] && is_relu(&g->nodes[n], GE2_OP_ACTIVATION_BACKWARD, GE2_PHASE_BACKWARD))
            st = fuse_backward(&s, n, n_fused);
    if (st == GE2_OK && log && *n_fused == 0)
        fprintf(log, "fuse: bn_relu: nothing fused (no batch norm followed by a relu)\n");
    return ge2_rewrite_scan_end(&s.r, st);
}

/* conv -> batch norm -> relu -> max pool -> flatten -> linear (fusion.h: ge2_fusion_example_train) */
static ge2_status example(ge2_graph **graph)
{
    ge2_graph *g;
    ge2_tensor *x, *labels, *w, *h = NULL;
    GE2_TRY(ge2_graph_new(&g));
    ge2_conv2d_params conv = ge2_conv2d_defaults();
    conv.padding[0] = conv.padding[1] = 1;
    ge2_pool2d_params pool = ge2_pool2d_square(2, 2, 0);
    ge2_status st = ge2_input(g, "x", GE2_F32, ge2_shape4(6, 2, 8, 8), &x);
    if (st == GE2_OK)
        st = ge2_label(g, "labels", GE2_I32, ge2_shape1(6), &labels);
    if (st == GE2_OK)
        st = ge2_parameter(g, "conv1.weight", GE2_F32, ge2_shape4(4, 2, 3, 3), (ge2_init){GE2_INIT_LINEAR_DEFAULT, 0, 0, 18}, &w);
    if (st == GE2_OK)
        st = ge2_conv2d(g, x, w, NULL, &conv, &h);
    if (st == GE2_OK)
        st = ge2_batch_norm_layer(g, "bn1", h, 0.1, 1e-5, &h);
    if (st == GE2_OK)
        st = ge2_activate(g, h, GE2_ACT_RELU, 0.0f, &h);
    if (st == GE2_OK)
        st = ge2_max_pool2d(g, h, &pool, &h);
    if (st == GE2_OK)
        st = ge2_flatten(g, h, &h);
    return ge2_fusion_example_head(g, st, h, 3, labels, graph);
}

const ge2_fusion_pattern ge2_fusion_bn_relu = {
    .name = "bn_relu",
    .what = "a batch norm's relu in its normalizing kernel, and the relu's derivative in its backward kernels",
    .rewrite = rewrite,
    .match = NULL,
    .cuda = NULL, /* the fused ops have kernels of their own (bn_relu.cu) */
    .example = example,
};
