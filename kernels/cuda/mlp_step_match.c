/* Recognises a graph key's launch list as one MLP training step the
 * whole-step kernel (mlp_step.h) implements, and checks that running it
 * phase by phase is safe for the plan.
 *
 * Layers are found by following tensor ids (LINEAR i's input is LINEAR
 * i-1's output), not by schedule position, and every launch of the key must
 * be claimed by the pattern: a key with anything else in it keeps its
 * launch list.
 */
#include "kernels/cuda/mlp_step.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "kernels/activation_math.h"

/* The phase a launch runs in (mlp_step.h's table). */
typedef struct matched_launch {
    const ge2_launch *launch;
    int phase;
} matched_launch;

typedef struct matcher {
    const ge2_launch *launches;
    int n;
    int linear[GE2_MLP_STEP_MAX_LAYERS]; /* launch index per layer */
    int n_layers;
    int cross_entropy, accuracy, optimizer;
    int grad_weight[GE2_MLP_STEP_MAX_LAYERS]; /* per layer */
    int grad_input[GE2_MLP_STEP_MAX_LAYERS];  /* per layer i >= 1: dz of layer i-1 */
    char *why;
    size_t why_size;
} matcher;

static bool refuse(matcher *m, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->why, m->why_size, fmt, ap);
    va_end(ap);
    return false;
}

static const ge2_node *node_of(const matcher *m, int i) { return m->launches[i].node; }

/* The launch of op whose input `slot` is tensor id, -1 if none (or
 * several: the pattern has one consumer per role). */
static int find_consumer(const matcher *m, ge2_op op, int slot, int id)
{
    int found = -1;
    for (int i = 0; i < m->n; i++) {
        const ge2_node *nd = node_of(m, i);
        if (nd->op == op && nd->n_inputs > slot && nd->inputs[slot] == id) {
            if (found >= 0)
                return -1;
            found = i;
        }
    }
    return found;
}

static bool is_f32_2d(const ge2_view *v, int64_t rows, int64_t cols)
{
    return v->data && v->dtype == GE2_F32 && v->shape.ndim == 2 && v->shape.dim[0] == rows &&
           v->shape.dim[1] == cols;
}

static bool is_f32_1d(const ge2_view *v, int64_t n)
{
    return v->data && v->dtype == GE2_F32 && v->shape.ndim == 1 && v->shape.dim[0] == n;
}

/* Sorts the launches into their roles; every launch must take one. */
static bool classify(matcher *m)
{
    int linears = 0, others = 0;
    m->cross_entropy = m->accuracy = m->optimizer = -1;
    for (int i = 0; i < m->n; i++) {
        const ge2_node *nd = node_of(m, i);
        switch (nd->op) {
        case GE2_OP_LINEAR:
            linears++;
            break;
        case GE2_OP_CROSS_ENTROPY:
            if (m->cross_entropy >= 0)
                return refuse(m, "two cross_entropy nodes");
            m->cross_entropy = i;
            break;
        case GE2_OP_ACCURACY:
            if (m->accuracy >= 0)
                return refuse(m, "two accuracy nodes");
            m->accuracy = i;
            break;
        case GE2_OP_OPTIMIZER_UPDATE:
            /* the kernel's last phase sweeps the flat pools once */
            if (m->optimizer >= 0 || nd->n_inputs > 0)
                return refuse(m, "per-layer optimizer updates (the kernel sweeps the flat pools)");
            m->optimizer = i;
            break;
        case GE2_OP_LINEAR_GRAD_WEIGHT:
        case GE2_OP_LINEAR_GRAD_INPUT:
            others++;
            break;
        default:
            return refuse(m, "node %d (%s) is not part of an MLP step", nd->id, ge2_op_table[nd->op].name);
        }
    }
    if (m->cross_entropy < 0 || m->optimizer < 0)
        return refuse(m, "no cross_entropy and optimizer_update (not a training step)");
    if (linears < 1 || linears > GE2_MLP_STEP_MAX_LAYERS)
        return refuse(m, "%d linear layers (1 to %d supported)", linears, GE2_MLP_STEP_MAX_LAYERS);
    m->n_layers = linears;
    if (others != 2 * linears - 1)
        return refuse(m, "%d backward GEMM nodes for %d layers", others, linears);
    return true;
}

/* Follows the chain from the logits back to the feed. */
static bool find_layers(matcher *m)
{
    int y = node_of(m, m->cross_entropy)->inputs[0];
    for (int l = m->n_layers - 1; l >= 0; l--) {
        int found = -1;
        for (int i = 0; i < m->n; i++)
            if (node_of(m, i)->op == GE2_OP_LINEAR && node_of(m, i)->outputs[0] == y)
                found = i;
        if (found < 0)
            return refuse(m, "the linear layers are not one chain ending in the loss");
        m->linear[l] = found;
        y = node_of(m, found)->inputs[0];
    }
    return true;
}

static bool fill_layer(matcher *m, int l, int64_t batch, ge2_mlp_step_layer *out)
{
    const ge2_launch *lin = &m->launches[m->linear[l]];
    const ge2_node *nd = lin->node;
    ge2_activation act = nd->attrs.linear.act;
    bool last = l == m->n_layers - 1;
    if (lin->n_in < 3)
        return refuse(m, "layer %d (node %d) has no bias", l, nd->id);
    if (last ? act != GE2_ACT_NONE : act != GE2_ACT_NONE && act != GE2_ACT_RELU)
        return refuse(m, "layer %d activation %s", l, ge2_activation_name(act));
    int64_t in = lin->in[1].shape.dim[1], outf = lin->in[1].shape.dim[0];
    if (!is_f32_2d(&lin->in[0], batch, in) || !is_f32_2d(&lin->in[1], outf, in) || !is_f32_1d(&lin->in[2], outf) ||
        !is_f32_2d(&lin->out[0], batch, outf))
        return refuse(m, "layer %d (node %d): not f32 [B, in] x [out, in] + [out]", l, nd->id);
    *out = (ge2_mlp_step_layer){.in = in, .out = outf, .act = act, .x = lin->in[0].data, .w = lin->in[1].data,
                                .b = lin->in[2].data, .y = lin->out[0].data};
    if (act == GE2_ACT_RELU) {
        out->mask_row_bytes = ge2_relu_mask_row_bytes(outf);
        if (lin->n_out < 2 || !lin->out[1].data || lin->out[1].dtype != GE2_U8)
            return refuse(m, "layer %d (node %d): no relu mask", l, nd->id);
        out->mask = lin->out[1].data;
    }
    /* dW, db */
    int gw = find_consumer(m, GE2_OP_LINEAR_GRAD_WEIGHT, 1, nd->inputs[0]);
    if (gw < 0)
        return refuse(m, "layer %d: no single linear_grad_weight", l);
    const ge2_launch *g = &m->launches[gw];
    if (g->n_out < 2 || !is_f32_2d(&g->out[0], outf, in) || !is_f32_1d(&g->out[1], outf))
        return refuse(m, "layer %d: linear_grad_weight (node %d) without dW and db", l, g->node->id);
    m->grad_weight[l] = gw;
    out->dw = g->out[0].data;
    out->db = g->out[1].data;
    return true;
}

/* dz of every layer: the dlogits for the last, a LINEAR_GRAD_INPUT's output below. */
static bool find_dz(matcher *m, ge2_mlp_step_desc *d)
{
    const ge2_launch *ce = &m->launches[m->cross_entropy];
    int dz = ce->node->n_outputs > 1 ? ce->node->outputs[1] : -1;
    d->layer[d->n_layers - 1].dz = ce->n_out > 1 ? ce->out[1].data : NULL;
    for (int l = d->n_layers - 1; l >= 0; l--) {
        const ge2_launch *gw = &m->launches[m->grad_weight[l]];
        if (dz < 0 || !d->layer[l].dz || gw->node->inputs[0] != dz)
            return refuse(m, "layer %d: its weight gradient does not read the step's dz", l);
        if (l == 0)
            break;
        const ge2_node *lin = node_of(m, m->linear[l]), *below = node_of(m, m->linear[l - 1]);
        int gi = find_consumer(m, GE2_OP_LINEAR_GRAD_INPUT, 0, dz);
        if (gi < 0)
            return refuse(m, "layer %d: no single linear_grad_input", l);
        const ge2_launch *g = &m->launches[gi];
        bool relu = d->layer[l - 1].act == GE2_ACT_RELU;
        bool reads_mask = g->node->n_inputs == 3 && g->node->inputs[2] == below->outputs[1] &&
                          g->node->attrs.act.act == GE2_ACT_RELU && !g->node->attrs.act.from_output;
        if (g->node->inputs[1] != lin->inputs[1] || (relu ? !reads_mask : g->node->n_inputs != 2))
            return refuse(m, "layer %d: linear_grad_input (node %d) is not dz·w times the layer below's act'", l,
                          g->node->id);
        if ((g->n_out > 1 && g->out[1].data) || !is_f32_2d(&g->out[0], d->batch, d->layer[l].in))
            return refuse(m, "layer %d: linear_grad_input (node %d) outputs", l, g->node->id);
        m->grad_input[l] = gi;
        dz = g->node->outputs[0];
        d->layer[l - 1].dz = g->out[0].data;
    }
    return true;
}

static bool fill_loss_and_optimizer(matcher *m, ge2_mlp_step_desc *d)
{
    const ge2_launch *ce = &m->launches[m->cross_entropy];
    const ge2_mlp_step_layer *last = &d->layer[d->n_layers - 1];
    if (ce->in[1].dtype != GE2_I32 || ce->in[1].shape.ndim != 1 || ce->in[1].shape.dim[0] != d->batch ||
        !ce->out[0].data)
        return refuse(m, "cross_entropy: labels are not i32 [B] or the loss is not computed");
    d->labels = ce->in[1].data;
    d->label_smoothing = ce->node->attrs.loss.label_smoothing;
    d->loss = ce->out[0].data;
    if (m->accuracy >= 0) {
        const ge2_launch *acc = &m->launches[m->accuracy];
        if (acc->node->inputs[0] != ce->node->inputs[0] || acc->node->inputs[1] != ce->node->inputs[1])
            return refuse(m, "accuracy reads other tensors than the loss");
        d->correct = acc->out[0].data;
    }
    if (last->out > 1024)
        return refuse(m, "%lld classes (the loss epilogue holds a row in one tile of at most 1024)",
                      (long long)last->out);
    const ge2_launch *opt = &m->launches[m->optimizer];
    const ge2_optimizer_config *cfg = &opt->node->attrs.optim.config;
    if (cfg->amsgrad || cfg->clip_norm > 0.0 || cfg->accumulation_steps > 1)
        return refuse(m, "optimizer with amsgrad, clipping or accumulation");
    d->optimizer = *cfg;
    d->pools = opt->pools;
    d->control = opt->control;
    return true;
}

/* ------------------------------------------------- phase-by-phase safety */

static int phase_of(const matcher *m, int launch)
{
    int L = m->n_layers;
    for (int l = 0; l < L; l++) {
        if (launch == m->linear[l])
            return l;
        if (launch == m->grad_weight[l] || (l > 0 && launch == m->grad_input[l]))
            return L + (L - 1 - l);
    }
    if (launch == m->cross_entropy || launch == m->accuracy)
        return L - 1;
    return 2 * L; /* the optimizer */
}

static size_t view_bytes(const ge2_view *v)
{
    size_t n = ge2_dtype_size(v->dtype);
    for (int d = 0; d < v->shape.ndim; d++)
        n *= (size_t)v->shape.dim[d];
    return n;
}

typedef struct buffer_use {
    int tensor;
    const unsigned char *start;
    size_t bytes;
    int first, last; /* phases */
} buffer_use;

/* Two launches the schedule ran in turn may share a phase here, so a buffer
 * the plan let one launch reuse after the other finished could be written
 * while still read. Refused: any two distinct tensors whose phase spans meet
 * must not share bytes. */
static bool check_phases_safe(matcher *m)
{
    enum { MAX_USES = 8 * GE2_MLP_STEP_MAX_LAYERS + 8 };
    buffer_use use[MAX_USES];
    int n_use = 0;
    for (int i = 0; i < m->n; i++) {
        const ge2_launch *l = &m->launches[i];
        int phase = phase_of(m, i);
        for (int k = 0; k < l->n_in + l->n_out; k++) {
            const ge2_view *v = k < l->n_in ? &l->in[k] : &l->out[k - l->n_in];
            int id = k < l->n_in ? l->node->inputs[k] : l->node->outputs[k - l->n_in];
            if (!v->data)
                continue;
            int u = 0;
            while (u < n_use && use[u].tensor != id)
                u++;
            if (u == n_use) {
                if (n_use == MAX_USES)
                    return refuse(m, "too many tensors");
                use[n_use++] = (buffer_use){id, v->data, view_bytes(v), phase, phase};
            }
            if (phase < use[u].first)
                use[u].first = phase;
            if (phase > use[u].last)
                use[u].last = phase;
        }
    }
    for (int a = 0; a < n_use; a++)
        for (int b = a + 1; b < n_use; b++) {
            bool meet = use[a].first <= use[b].last && use[b].first <= use[a].last;
            bool share = use[a].start < use[b].start + use[b].bytes && use[b].start < use[a].start + use[a].bytes;
            if (meet && share)
                return refuse(m, "tensors %d and %d share arena bytes within phases %d-%d", use[a].tensor,
                              use[b].tensor, use[a].first, use[a].last);
        }
    return true;
}

bool ge2_mlp_step_match(const ge2_launch *launches, int n, ge2_mlp_step_desc *desc, char *why, size_t why_size)
{
    matcher m = {.launches = launches, .n = n, .why = why, .why_size = why_size};
    memset(desc, 0, sizeof *desc);
    if (why_size)
        why[0] = '\0';
    if (!classify(&m) || !find_layers(&m))
        return false;
    const ge2_launch *first = &launches[m.linear[0]];
    desc->n_layers = m.n_layers;
    desc->batch = first->in[0].shape.ndim == 2 ? first->in[0].shape.dim[0] : 0;
    if (desc->batch < 1 || desc->batch > INT32_MAX)
        return refuse(&m, "batch %lld", (long long)desc->batch);
    for (int l = 0; l < m.n_layers; l++) {
        if (!fill_layer(&m, l, desc->batch, &desc->layer[l]))
            return false;
        const ge2_mlp_step_layer *ly = &desc->layer[l];
        if (l > 0 && ly->in != desc->layer[l - 1].out)
            return refuse(&m, "layer %d: %lld inputs after %lld outputs", l, (long long)ly->in,
                          (long long)desc->layer[l - 1].out);
        if (desc->batch * ly->in * ly->out > GE2_MLP_STEP_MAX_FMAS)
            return refuse(&m, "layer %d: %lld x %lld x %lld FMAs per GEMM (more than %lld: cuBLASLt is faster)", l,
                          (long long)desc->batch, (long long)ly->in, (long long)ly->out,
                          (long long)GE2_MLP_STEP_MAX_FMAS);
    }
    if (!find_dz(&m, desc) || !fill_loss_and_optimizer(&m, desc))
        return false;
    return check_phases_safe(&m);
}
