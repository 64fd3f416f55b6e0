/* Binds a graph key's launches to the whole-step kernel (mlp_step.h): the
 * step's pattern (fusion/mlp_step/pattern.h, the same recognition the
 * planner used), then the plan's buffers for every role, and two checks
 * the kernel relies on: the gradients cover the flat pools, and no two
 * tensors used in a common phase share arena bytes.
 */
#include "fusion/mlp_step/mlp_step.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "graph/alloc.h"
#include "ops/linear/linear.h"
#include "ops/linear/stash.h"
#include "ops/loss/loss.h"
#include "optim/optimizer_math.h"

typedef struct matcher {
    const ge2_launch *launches;
    int n;
    ge2_mlp_step_pattern pattern;
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

/* The shape of tensor id as the launches see it. */
static ge2_shape launch_shape_of(const void *ctx, int id)
{
    const matcher *m = ctx;
    for (int i = 0; i < m->n; i++) {
        const ge2_launch *l = &m->launches[i];
        for (int k = 0; k < l->n_in; k++)
            if (l->node->inputs[k] == id)
                return l->in[k].shape;
        for (int k = 0; k < l->n_out; k++)
            if (l->node->outputs[k] == id)
                return l->out[k].shape;
    }
    return (ge2_shape){0};
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

/* Layer l's buffers: x, w, b, y, the relu mask, dW and db. */
static bool bind_layer(matcher *m, int l, ge2_mlp_step_layer *out)
{
    const ge2_mlp_step_pattern *p = &m->pattern;
    const ge2_launch *lin = &m->launches[p->linear[l]], *g = &m->launches[p->grad_weight[l]];
    const int64_t B = p->batch, in = p->in[l], outf = p->out[l];
    const ge2_activation act = GE2_ATTRS(ge2_linear_attrs, lin->node->attrs)->act;
    if (lin->n_in < 3 || !is_f32_2d(&lin->in[0], B, in) || !is_f32_2d(&lin->in[1], outf, in) ||
        !is_f32_1d(&lin->in[2], outf) || !is_f32_2d(&lin->out[0], B, outf))
        return refuse(m, "layer %d (node %d): not f32 [B, in] x [out, in] + [out]", l, lin->node->id);
    *out = (ge2_mlp_step_layer){.in = in, .out = outf, .act = act, .x = lin->in[0].data, .w = lin->in[1].data,
                                .b = lin->in[2].data, .y = lin->out[0].data};
    if (act == GE2_ACT_RELU) {
        out->mask_row_bytes = ge2_relu_mask_row_bytes(outf);
        if (lin->n_out < 2 || !lin->out[1].data || lin->out[1].dtype != GE2_U8)
            return refuse(m, "layer %d (node %d): no relu mask", l, lin->node->id);
        out->mask = lin->out[1].data;
    }
    if (g->n_out < 2 || !is_f32_2d(&g->out[0], outf, in) || !is_f32_1d(&g->out[1], outf))
        return refuse(m, "layer %d: linear_grad_weight (node %d) without dW and db", l, g->node->id);
    out->dw = g->out[0].data;
    out->db = g->out[1].data;
    return true;
}

/* dz of every layer: the dlogits for the last, a LINEAR_GRAD_INPUT's output below. */
static bool bind_dz(matcher *m, ge2_mlp_step_desc *d)
{
    const ge2_mlp_step_pattern *p = &m->pattern;
    const ge2_launch *ce = &m->launches[p->cross_entropy];
    d->layer[d->n_layers - 1].dz = ce->n_out > 1 && is_f32_2d(&ce->out[1], p->batch, p->out[p->n_layers - 1])
                                       ? ce->out[1].data
                                       : NULL;
    if (!d->layer[d->n_layers - 1].dz)
        return refuse(m, "cross_entropy (node %d) computes no dlogits", ce->node->id);
    for (int l = d->n_layers - 1; l >= 1; l--) {
        const ge2_launch *g = &m->launches[p->grad_input[l]];
        if ((g->n_out > 1 && g->out[1].data) || !is_f32_2d(&g->out[0], d->batch, d->layer[l].in))
            return refuse(m, "layer %d: linear_grad_input (node %d) outputs", l, g->node->id);
        d->layer[l - 1].dz = g->out[0].data;
    }
    return true;
}

static bool bind_loss_and_optimizer(matcher *m, ge2_mlp_step_desc *d)
{
    const ge2_mlp_step_pattern *p = &m->pattern;
    const ge2_launch *ce = &m->launches[p->cross_entropy];
    if (ce->in[1].dtype != GE2_I32 || ce->in[1].shape.ndim != 1 || ce->in[1].shape.dim[0] != d->batch ||
        !ce->out[0].data)
        return refuse(m, "cross_entropy: labels are not i32 [B] or the loss is not computed");
    d->labels = ce->in[1].data;
    d->loss_node = ce->node->id;
    if (GE2_ATTRS(ge2_loss_attrs, ce->node->attrs)->classes != 0)
        return refuse(m, "cross_entropy over part of the logits' columns (the kernel's softmax takes them all)");
    d->label_smoothing = GE2_ATTRS(ge2_loss_attrs, ce->node->attrs)->label_smoothing;
    d->loss = ce->out[0].data;
    if (p->accuracy >= 0)
        d->correct = m->launches[p->accuracy].out[0].data;
    const ge2_launch *opt = &m->launches[p->optimizer];
    d->optimizer = GE2_ATTRS(ge2_optim_attrs, opt->node->attrs)->config;
    d->pools = opt->pools;
    if (d->pools.no_decay_n > 0 && d->optimizer.weight_decay != 0.0)
        return refuse(m, "parameters outside weight decay (the kernel decays every one alike)");
    if (d->pools.copies)
        return refuse(m, "bf16 parameter copies to write (the kernel's update writes only the f32 parameters)");
    d->control = opt->control;
    d->profile = opt->settings && opt->settings->profile;
    return true;
}

/* ------------------------------------------------- phase-by-phase safety */

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
 * while still read. The planner widens lifetimes to phases for exactly this
 * (planner/groups.c); checked again here, on the buffers the kernel gets:
 * any two distinct tensors whose phase spans meet must not share bytes. */
static bool check_phases_safe(matcher *m)
{
    enum { MAX_USES = 8 * GE2_MLP_STEP_MAX_LAYERS + 8 };
    buffer_use use[MAX_USES];
    int n_use = 0;
    for (int i = 0; i < m->n; i++) {
        const ge2_launch *l = &m->launches[i];
        int phase = ge2_mlp_step_phase_of(&m->pattern, i);
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

/* The last phase updates each gradient element's parameter in the dW and db
 * epilogues: every parameter of the pools must be some layer's weight or
 * bias, or the kernel would skip an update the flat sweep makes. Layouts
 * pad each parameter to GE2_PARAM_ALIGN_ELEMS floats. */
static bool check_gradients_cover_pools(matcher *m, const ge2_mlp_step_desc *d)
{
    const ge2_flat_pools *p = &d->pools;
    int64_t start[2 * GE2_MLP_STEP_MAX_LAYERS], len[2 * GE2_MLP_STEP_MAX_LAYERS];
    int n = 0;
    for (int l = 0; l < d->n_layers; l++) {
        const ge2_mlp_step_layer *ly = &d->layer[l];
        const float *g[2] = {ly->dw, ly->db};
        const int64_t count[2] = {ly->in * ly->out, ly->out};
        for (int k = 0; k < 2; k++) {
            if (!p->grads || g[k] < p->grads || g[k] + count[k] > p->grads + p->n)
                return refuse(m, "layer %d: its %s is not in the flat gradient pool", l, k ? "db" : "dW");
            int i = n++;
            while (i > 0 && start[i - 1] > g[k] - p->grads) { /* insertion sort by offset */
                start[i] = start[i - 1];
                len[i] = len[i - 1];
                i--;
            }
            start[i] = g[k] - p->grads;
            len[i] = count[k];
        }
    }
    int64_t end = 0;
    for (int i = 0; i < n; i++) {
        if (start[i] < end || start[i] - end >= GE2_PARAM_ALIGN_ELEMS)
            return refuse(m, "the flat pools hold parameters that are not the layers' weights and biases");
        end = start[i] + len[i];
    }
    if (p->n - end >= GE2_PARAM_ALIGN_ELEMS)
        return refuse(m, "the flat pools hold parameters that are not the layers' weights and biases");
    return true;
}

bool ge2_mlp_step_match(const ge2_launch *launches, int n, ge2_mlp_step_desc *desc, char *why, size_t why_size)
{
    matcher m = {.launches = launches, .n = n, .why = why, .why_size = why_size};
    memset(desc, 0, sizeof *desc);
    if (why_size)
        why[0] = '\0';
    const ge2_node **nodes = ge2_malloc(sizeof *nodes * (size_t)(n > 0 ? n : 1));
    if (!nodes)
        return refuse(&m, "out of host memory");
    for (int i = 0; i < n; i++)
        nodes[i] = launches[i].node;
    bool found = ge2_mlp_step_pattern_find(nodes, n, launch_shape_of, &m, &m.pattern, why, why_size);
    ge2_free(nodes);
    if (!found)
        return false;
    desc->n_layers = m.pattern.n_layers;
    desc->chain_from = m.pattern.chain_from;
    desc->batch = m.pattern.batch;
    for (int l = 0; l < desc->n_layers; l++)
        if (!bind_layer(&m, l, &desc->layer[l]))
            return false;
    return bind_dz(&m, desc) && bind_loss_and_optimizer(&m, desc) && check_gradients_cover_pools(&m, desc) &&
           check_phases_safe(&m);
}
