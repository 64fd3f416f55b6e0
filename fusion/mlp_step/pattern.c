/* Recognises a key's nodes as one MLP training step (fusion/mlp_step/pattern.h).
 *
 * Layers are found by following tensor ids (LINEAR i's input is LINEAR
 * i-1's output), not by schedule position, and every node of the key must
 * be claimed by the pattern: a key with anything else in it is not a step
 * the kernel runs.
 */
#include "fusion/mlp_step/pattern.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "kernels/activation_math.h"
#include "ops/linear/linear.h"
#include "ops/ops.h"
#include "optim/optimizer_math.h"

typedef struct finder {
    const ge2_node *const *nodes;
    int n;
    ge2_mlp_step_shape_fn shape_of;
    const void *ctx;
    ge2_mlp_step_pattern *p;
    char *why;
    size_t why_size;
} finder;

static bool refuse(finder *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->why, f->why_size, fmt, ap);
    va_end(ap);
    return false;
}

/* The node of op whose input `slot` is tensor id, -1 if none (or several:
 * the pattern has one consumer per role). */
static int find_consumer(const finder *f, ge2_op op, int slot, int id)
{
    int found = -1;
    for (int i = 0; i < f->n; i++) {
        const ge2_node *nd = f->nodes[i];
        if (nd->op == op && nd->n_inputs > slot && nd->inputs[slot] == id) {
            if (found >= 0)
                return -1;
            found = i;
        }
    }
    return found;
}

/* Sorts the nodes into their roles; every node must take one. */
static bool classify(finder *f)
{
    ge2_mlp_step_pattern *p = f->p;
    int linears = 0, others = 0;
    p->cross_entropy = p->accuracy = p->optimizer = -1;
    for (int i = 0; i < f->n; i++) {
        const ge2_node *nd = f->nodes[i];
        switch (nd->op) {
        case GE2_OP_LINEAR:
            linears++;
            break;
        case GE2_OP_CROSS_ENTROPY:
            if (p->cross_entropy >= 0)
                return refuse(f, "two cross_entropy nodes");
            p->cross_entropy = i;
            break;
        case GE2_OP_ACCURACY:
            if (p->accuracy >= 0)
                return refuse(f, "two accuracy nodes");
            p->accuracy = i;
            break;
        case GE2_OP_OPTIMIZER_UPDATE:
            /* the kernel updates what the flat pools hold */
            if (p->optimizer >= 0 || nd->n_inputs > 0)
                return refuse(f, "per-layer optimizer updates (the kernel updates the flat pools)");
            p->optimizer = i;
            break;
        case GE2_OP_LINEAR_GRAD_WEIGHT:
        case GE2_OP_LINEAR_GRAD_INPUT:
            others++;
            break;
        default:
            return refuse(f, "node %d (%s) is not part of an MLP step", nd->id, ge2_op_name(nd->op));
        }
    }
    if (p->cross_entropy < 0 || p->optimizer < 0)
        return refuse(f, "no cross_entropy and optimizer_update (not a training step)");
    if (linears < 1 || linears > GE2_MLP_STEP_MAX_LAYERS)
        return refuse(f, "%d linear layers (1 to %d supported)", linears, GE2_MLP_STEP_MAX_LAYERS);
    p->n_layers = linears;
    if (others != 2 * linears - 1)
        return refuse(f, "%d backward GEMM nodes for %d layers", others, linears);
    return true;
}

/* Follows the chain from the logits back to the feed. */
static bool find_layers(finder *f)
{
    ge2_mlp_step_pattern *p = f->p;
    int y = f->nodes[p->cross_entropy]->inputs[0];
    for (int l = p->n_layers - 1; l >= 0; l--) {
        int found = -1;
        for (int i = 0; i < f->n; i++)
            if (f->nodes[i]->op == GE2_OP_LINEAR && f->nodes[i]->outputs[0] == y)
                found = i;
        if (found < 0)
            return refuse(f, "the linear layers are not one chain ending in the loss");
        p->linear[l] = found;
        y = f->nodes[found]->inputs[0];
    }
    return true;
}

/* A layer's shapes, activation and weight gradient. */
static bool check_layer(finder *f, int l)
{
    ge2_mlp_step_pattern *p = f->p;
    const ge2_node *nd = f->nodes[p->linear[l]];
    const ge2_activation act = GE2_ATTRS(ge2_linear_attrs, nd->attrs)->act;
    const bool last = l == p->n_layers - 1;
    if (nd->n_inputs < 3)
        return refuse(f, "layer %d (node %d) has no bias", l, nd->id);
    if (last ? act != GE2_ACT_NONE : act != GE2_ACT_NONE && act != GE2_ACT_RELU)
        return refuse(f, "layer %d activation %s", l, ge2_activation_name(act));
    const ge2_shape x = f->shape_of(f->ctx, nd->inputs[0]), w = f->shape_of(f->ctx, nd->inputs[1]);
    if (x.ndim != 2 || w.ndim != 2 || x.dim[1] != w.dim[1])
        return refuse(f, "layer %d (node %d): not [B, in] x [out, in]", l, nd->id);
    if (l == 0)
        p->batch = x.dim[0];
    if (x.dim[0] != p->batch || p->batch < 1 || p->batch > INT32_MAX)
        return refuse(f, "layer %d: batch %lld", l, (long long)x.dim[0]);
    p->in[l] = w.dim[1];
    p->out[l] = w.dim[0];
    if (l > 0 && p->in[l] != p->out[l - 1])
        return refuse(f, "layer %d: %lld inputs after %lld outputs", l, (long long)p->in[l],
                      (long long)p->out[l - 1]);
    if (p->batch * p->in[l] * p->out[l] > GE2_MLP_STEP_MAX_FMAS)
        return refuse(f, "layer %d: %lld x %lld x %lld FMAs per GEMM (more than %lld: cuBLASLt is faster)", l,
                      (long long)p->batch, (long long)p->in[l], (long long)p->out[l],
                      (long long)GE2_MLP_STEP_MAX_FMAS);
    const int gw = find_consumer(f, GE2_OP_LINEAR_GRAD_WEIGHT, 1, nd->inputs[0]);
    if (gw < 0)
        return refuse(f, "layer %d: no single linear_grad_weight", l);
    if (f->nodes[gw]->n_outputs < 2)
        return refuse(f, "layer %d: linear_grad_weight (node %d) without dW and db", l, f->nodes[gw]->id);
    p->grad_weight[l] = gw;
    return true;
}

/* dz of every layer: the dlogits for the last, a LINEAR_GRAD_INPUT's output
 * below, each read by the layer's weight gradient. */
static bool find_dz(finder *f)
{
    ge2_mlp_step_pattern *p = f->p;
    const ge2_node *ce = f->nodes[p->cross_entropy];
    int dz = ce->n_outputs > 1 ? ce->outputs[1] : -1;
    for (int l = p->n_layers - 1; l >= 0; l--) {
        if (dz < 0 || f->nodes[p->grad_weight[l]]->inputs[0] != dz)
            return refuse(f, "layer %d: its weight gradient does not read the step's dz", l);
        if (l == 0)
            break;
        const ge2_node *lin = f->nodes[p->linear[l]], *below = f->nodes[p->linear[l - 1]];
        const int gi = find_consumer(f, GE2_OP_LINEAR_GRAD_INPUT, 0, dz);
        if (gi < 0)
            return refuse(f, "layer %d: no single linear_grad_input", l);
        const ge2_node *g = f->nodes[gi];
        const bool relu = GE2_ATTRS(ge2_linear_attrs, below->attrs)->act == GE2_ACT_RELU;
        const bool reads_mask = g->n_inputs == 3 && below->n_outputs > 1 && g->inputs[2] == below->outputs[1] &&
                                GE2_ATTRS(ge2_act_attrs, g->attrs)->act == GE2_ACT_RELU && !GE2_ATTRS(ge2_act_attrs, g->attrs)->from_output;
        if (g->inputs[1] != lin->inputs[1] || (relu ? !reads_mask : g->n_inputs != 2))
            return refuse(f, "layer %d: linear_grad_input (node %d) is not dz·w times the layer below's act'", l,
                          g->id);
        p->grad_input[l] = gi;
        dz = g->outputs[0];
    }
    return true;
}

static bool check_loss_and_optimizer(finder *f)
{
    const ge2_mlp_step_pattern *p = f->p;
    const ge2_node *ce = f->nodes[p->cross_entropy];
    if (p->accuracy >= 0) {
        const ge2_node *acc = f->nodes[p->accuracy];
        if (acc->inputs[0] != ce->inputs[0] || acc->inputs[1] != ce->inputs[1])
            return refuse(f, "accuracy reads other tensors than the loss");
    }
    if (p->out[p->n_layers - 1] > GE2_MLP_STEP_MAX_WIDTH)
        return refuse(f, "%lld classes (the loss epilogue holds a row in one tile of at most %d)",
                      (long long)p->out[p->n_layers - 1], GE2_MLP_STEP_MAX_WIDTH);
    const ge2_optimizer_config *cfg = &GE2_ATTRS(ge2_optim_attrs, f->nodes[p->optimizer]->attrs)->config;
    if (cfg->amsgrad || cfg->clip_norm > 0.0 || cfg->accumulation_steps > 1 || cfg->loss_scaling.dynamic)
        return refuse(f, "optimizer with amsgrad, clipping, accumulation or loss scaling");
    return true;
}

/* The first layer of the row chain: the chain's widths fit an item's tile
 * and the weights it re-reads fit GE2_MLP_STEP_CHAIN_BYTES. It always holds
 * the last layer (the loss takes whole rows anyway) and holds the first,
 * which reads the feed K wide, only when that is the only layer. */
static int first_chain_layer(const ge2_mlp_step_pattern *p)
{
    const int L = p->n_layers;
    int64_t bytes = 0;
    int c = L - 1;
    for (; c > 1; c--) {
        const int l = c - 1; /* joins with its output rows and the input gradient it hands down */
        bytes += p->in[l] * p->out[l] * (int64_t)sizeof(float);
        if (p->out[l] > GE2_MLP_STEP_MAX_WIDTH || p->in[l] > GE2_MLP_STEP_MAX_WIDTH ||
            bytes + p->in[L - 1] * p->out[L - 1] * (int64_t)sizeof(float) > GE2_MLP_STEP_CHAIN_BYTES)
            break;
    }
    return c;
}

bool ge2_mlp_step_pattern_find(const ge2_node *const *nodes, int n, ge2_mlp_step_shape_fn shape_of, const void *ctx,
                               ge2_mlp_step_pattern *p, char *why, size_t why_size)
{
    finder f = {nodes, n, shape_of, ctx, p, why, why_size};
    memset(p, 0, sizeof *p);
    if (why_size)
        why[0] = '\0';
    if (!classify(&f) || !find_layers(&f))
        return false;
    for (int l = 0; l < p->n_layers; l++)
        if (!check_layer(&f, l))
            return false;
    if (!find_dz(&f) || !check_loss_and_optimizer(&f))
        return false;
    const int L = p->n_layers;
    if (L > 1 && p->in[L - 1] > GE2_MLP_STEP_MAX_WIDTH)
        return refuse(&f, "layer %d: %lld inputs (the row chain's input gradient is at most %d wide)", L - 1,
                      (long long)p->in[L - 1], GE2_MLP_STEP_MAX_WIDTH);
    p->chain_from = L > 1 ? first_chain_layer(p) : 0;
    const int c = p->chain_from;
    p->n_phases = c + (c > 0 ? c - 1 : 0) + 2;
    return true;
}

int ge2_mlp_step_phase_of(const ge2_mlp_step_pattern *p, int i)
{
    const int c = p->chain_from, grads = p->n_phases - 1;
    for (int l = 0; l < p->n_layers; l++) {
        if (i == p->linear[l])
            return l < c ? l : c;
        if (l > 0 && i == p->grad_input[l])
            return l >= c ? c : c + (c - l);
        if (i == p->grad_weight[l])
            return grads;
    }
    if (i == p->cross_entropy || i == p->accuracy)
        return c;
    return grads; /* the optimizer */
}
