/* Optimizer configs and the nodes that run them. */
#include "optim/optim.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "graph/error.h"
#include "graph/ir.h"
#include "ops/ops.h" /* the optimizer ops this module emits */
#include "optim/optimizer_math.h"

static const char *const kind_names[GE2_OPT_COUNT] = {"sgd", "adam", "adamw"};

const char *ge2_optimizer_name(ge2_optimizer_kind kind)
{
    return (unsigned)kind < GE2_OPT_COUNT ? kind_names[kind] : "unknown";
}

const char *ge2_update_mode_name(ge2_update_mode mode)
{
    static const char *const names[GE2_UPDATE_COUNT] = {"auto", "flat", "per_parameter"};
    return (unsigned)mode < GE2_UPDATE_COUNT ? names[mode] : "unknown";
}

ge2_status ge2_optimizer_parse(const char *name, ge2_optimizer_kind *out)
{
    for (int k = 0; name && k < GE2_OPT_COUNT; k++)
        if (!strcmp(name, kind_names[k])) {
            *out = (ge2_optimizer_kind)k;
            return GE2_OK;
        }
    return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_optimizer: unknown optimizer '%s' (sgd, adam or adamw)",
                     name ? name : "(null)");
}

ge2_optimizer_config ge2_optimizer_defaults(ge2_optimizer_kind kind)
{
    ge2_optimizer_config c;
    memset(&c, 0, sizeof c);
    c.kind = kind;
    c.lr = kind == GE2_OPT_SGD ? 0.01 : 1e-3;
    c.weight_decay = kind == GE2_OPT_ADAMW ? 1e-2 : 0.0;
    c.beta1 = 0.9;
    c.beta2 = 0.999;
    c.eps = 1e-8;
    c.schedule.kind = GE2_SCHEDULE_CONSTANT;
    c.schedule.gamma = 0.1;
    c.accumulation_steps = 1;
    c.loss_scaling.init_scale = 65536.0;
    c.loss_scaling.growth_factor = 2.0;
    c.loss_scaling.backoff_factor = 0.5;
    c.loss_scaling.growth_interval = 2000;
    return c;
}

int ge2_opt_state_slots(const ge2_optimizer_config *config)
{
    return ge2_opt_slots_of(config).count;
}

int ge2_opt_state_names(const ge2_optimizer_config *config, const char *names[4])
{
    ge2_opt_slots s = ge2_opt_slots_of(config);
    for (int slot = 0; slot < s.count; slot++)
        names[slot] = ge2_opt_slot_name(&s, slot);
    return s.count;
}

#define BAD(field, fmt, value) \
    ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_optimizer: %s: " field " " fmt, ge2_optimizer_name(c->kind), value)

static ge2_status validate_schedule(const ge2_optimizer_config *c)
{
    const ge2_schedule *s = &c->schedule;
    switch (s->kind) {
    case GE2_SCHEDULE_CONSTANT:
        return GE2_OK;
    case GE2_SCHEDULE_STEP:
        if (s->step_size <= 0)
            return BAD("schedule.step_size must be > 0, got", "%lld", (long long)s->step_size);
        if (!(s->gamma > 0) || !isfinite(s->gamma))
            return BAD("schedule.gamma must be > 0, got", "%g", s->gamma);
        return GE2_OK;
    case GE2_SCHEDULE_COSINE:
        if (s->warmup_steps < 0)
            return BAD("schedule.warmup_steps must be >= 0, got", "%lld", (long long)s->warmup_steps);
        if (s->total_steps <= s->warmup_steps)
            return ge2_error(GE2_ERR_INVALID_ARGUMENT,
                             "ge2_optimizer: %s: schedule.total_steps must exceed warmup_steps (%lld), got %lld",
                             ge2_optimizer_name(c->kind), (long long)s->warmup_steps, (long long)s->total_steps);
        if (!(s->min_lr >= 0) || !(s->min_lr <= c->lr))
            return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_optimizer: %s: schedule.min_lr must be in [0, lr=%g], got %g",
                             ge2_optimizer_name(c->kind), c->lr, s->min_lr);
        return GE2_OK;
    default:
        return BAD("schedule.kind is unknown:", "%d", (int)s->kind);
    }
}

ge2_status ge2_opt_validate(const ge2_optimizer_config *c)
{
    if (!c)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_optimizer: config must not be NULL");
    if ((unsigned)c->kind >= GE2_OPT_COUNT)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_optimizer: unknown kind %d", (int)c->kind);
    /* `!(x > 0)` so NaN fails too */
    if (!(c->lr > 0) || !isfinite(c->lr))
        return BAD("lr must be > 0, got", "%g", c->lr);
    if (!(c->weight_decay >= 0) || !isfinite(c->weight_decay))
        return BAD("weight_decay must be >= 0, got", "%g", c->weight_decay);
    if (c->kind == GE2_OPT_SGD) {
        if (!(c->momentum >= 0) || !isfinite(c->momentum))
            return BAD("momentum must be >= 0, got", "%g", c->momentum);
        if (!isfinite(c->dampening))
            return BAD("dampening must be finite, got", "%g", c->dampening);
        if (c->nesterov && (c->momentum <= 0 || c->dampening != 0))
            return ge2_error(GE2_ERR_INVALID_ARGUMENT,
                             "ge2_optimizer: sgd: nesterov needs momentum > 0 and dampening 0, got momentum %g, "
                             "dampening %g",
                             c->momentum, c->dampening);
    } else {
        if (!(c->beta1 >= 0 && c->beta1 < 1))
            return BAD("beta1 must be in [0, 1), got", "%g", c->beta1);
        if (!(c->beta2 >= 0 && c->beta2 < 1))
            return BAD("beta2 must be in [0, 1), got", "%g", c->beta2);
        if (!(c->eps > 0) || !isfinite(c->eps))
            return BAD("eps must be > 0, got", "%g", c->eps);
    }
    if (!(c->clip_norm >= 0) || !isfinite(c->clip_norm))
        return BAD("clip_norm must be >= 0 (0 = off), got", "%g", c->clip_norm);
    if (c->accumulation_steps < 1)
        return BAD("accumulation_steps must be >= 1, got", "%d", c->accumulation_steps);
    if ((unsigned)c->update_mode >= GE2_UPDATE_COUNT)
        return BAD("update_mode is unknown:", "%d", (int)c->update_mode);
    if (c->bucket_bytes < 0)
        return BAD("bucket_bytes must be >= 0 (0: 25 MiB), got", "%lld", (long long)c->bucket_bytes);
    const ge2_loss_scaling *ls = &c->loss_scaling;
    if (ls->dynamic) {
        if (!(ls->init_scale > 0) || !isfinite(ls->init_scale) || ls->init_scale > 3.0e38)
            return BAD("loss_scaling.init_scale must be > 0 and a finite float, got", "%g", ls->init_scale);
        if (!(ls->growth_factor > 1) || !isfinite(ls->growth_factor))
            return BAD("loss_scaling.growth_factor must be > 1, got", "%g", ls->growth_factor);
        if (!(ls->backoff_factor > 0 && ls->backoff_factor < 1))
            return BAD("loss_scaling.backoff_factor must be in (0, 1), got", "%g", ls->backoff_factor);
        if (ls->growth_interval < 1 || ls->growth_interval > INT32_MAX)
            return BAD("loss_scaling.growth_interval must be in [1, 2^31), got", "%lld", (long long)ls->growth_interval);
    }
    return validate_schedule(c);
}

/* ------------------------------------------------- where the update runs */

/* GE2_UPDATE_AUTO's threshold: mean gradient bytes per update node.
 *
 * Per-parameter updates trade the gradient pool for launches: one update
 * node per layer instead of one flat update, so (nodes - 1) more kernels a
 * step (the commit rides on the last node: no extra one for it). What a
 * launch costs is set against the step time of the layer it updates, which
 * grows with the layer's parameters: at the threshold's gradient size one
 * more launch is under 1% of that layer's share of the step, while models
 * with small gradients would pay a few percent for a few MiB, and keep the
 * flat update (bench/RESULTS.md, "measurements from source comments").
 * Data parallel the same threshold holds: there the gradients live until
 * the backward's end either way, and a layer's update waiting for its own
 * all-reduce, not for every bucket, is what the extra launches buy
 * (bench/RESULTS.md, "where the data-parallel step waits"). */
#define PER_PARAMETER_MIN_BYTES_PER_NODE ((size_t)24 << 20)

/* Why per-parameter updates cannot run on this graph and config (into why),
 * or false when they can. */
static bool per_parameter_refused(const ge2_graph *g, const ge2_optimizer_config *c, char *why, size_t size)
{
    if (c->clip_norm > 0) {
        snprintf(why, size, "clip_norm %g needs the global norm of every gradient before any update", c->clip_norm);
        return true;
    }
    if (c->loss_scaling.dynamic) {
        snprintf(why, size, "dynamic loss scaling checks every gradient for infs before any update");
        return true;
    }
    if (c->accumulation_steps > 1) {
        snprintf(why, size, "accumulation_steps %d keeps gradients across steps", c->accumulation_steps);
        return true;
    }
    for (int n = 0; n < g->n_nodes; n++)
        if (ge2_node_draws_random(&g->nodes[n])) {
            snprintf(why, size,
                     "%s (node %d) draws from the step's random stream, which the last update moves on, and the "
                     "per-parameter schedule may run its backward after that",
                     ge2_op_name(g->nodes[n].op), n);
            return true;
        }
    for (int i = 0; i < g->n_tensors; i++) {
        const ge2_tensor *t = g->tensors[i];
        if (t->role == GE2_ROLE_PARAMETER && t->grad < 0) {
            snprintf(why, size, "parameter '%s' has no gradient (the flat update still sweeps it)", t->name);
            return true;
        }
        if (t->is_output && ge2_param_of_grad(g, t)) {
            snprintf(why, size, "gradient '%s' is a marked output, read after the step", t->name);
            return true;
        }
    }
    return false;
}

/* The layer a parameter belongs to, for per-parameter updates: the first
 * forward node that reads it. Not the node that produces its gradient:
 * which backward node that is depends on the fuse pass (a weight's and a
 * bias's gradients are one LINEAR_GRAD_WEIGHT once fused, two nodes
 * before), and the update layout is fixed here, before compiling. */
static int layer_of(const ge2_graph *g, int param)
{
    for (int n = 0; n < g->n_nodes; n++) {
        const ge2_node *node = &g->nodes[n];
        for (int i = 0; node->phase == GE2_PHASE_FORWARD && i < node->n_inputs; i++)
            if (node->inputs[i] == param)
                return n;
    }
    return -1;
}

/* Whether input slot i of forward node n is where a parameter with a
 * gradient that has n for its layer is first read (a node reading one
 * parameter twice, x·x, updates it once). */
static bool updates_at(const ge2_graph *g, int n, int i)
{
    const ge2_node *node = &g->nodes[n];
    const ge2_tensor *t = g->tensors[node->inputs[i]];
    if (node->phase != GE2_PHASE_FORWARD || t->role != GE2_ROLE_PARAMETER || t->grad < 0 || layer_of(g, t->id) != n)
        return false;
    for (int j = 0; j < i; j++)
        if (node->inputs[j] == t->id)
            return false;
    return true;
}

/* How many parameters with a gradient forward node n is the layer of. */
static int layer_parameters(const ge2_graph *g, int n)
{
    int count = 0;
    for (int i = 0; i < g->nodes[n].n_inputs; i++)
        count += updates_at(g, n, i);
    return count;
}

/* An update node takes (parameter, gradient) pairs as inputs, as many as
 * the update kernels sweep. */
#define PARAMETERS_PER_UPDATE GE2_OPT_MAX_SPANS

/* Update nodes per-parameter mode makes: one per layer with parameter
 * gradients (more for a layer with more parameters than one node takes). */
static int gradient_producers(const ge2_graph *g)
{
    int count = 0;
    for (int n = 0; n < g->n_nodes; n++)
        count += (layer_parameters(g, n) + PARAMETERS_PER_UPDATE - 1) / PARAMETERS_PER_UPDATE;
    return count;
}

static size_t gradient_bytes(const ge2_graph *g)
{
    size_t bytes = 0;
    for (int i = 0; i < g->n_tensors; i++)
        if (g->tensors[i]->role == GE2_ROLE_PARAMETER)
            bytes += (size_t)ge2_shape_numel(g->tensors[i]->shape) * sizeof(float);
    return bytes;
}

static ge2_status choose_per_parameter(const ge2_graph *g, const ge2_optimizer_config *c, bool *per_parameter)
{
    char why[GE2_NAME_MAX + 96];
    bool refused = per_parameter_refused(g, c, why, sizeof why);
    switch (c->update_mode) {
    case GE2_UPDATE_FLAT:
        *per_parameter = false;
        return GE2_OK;
    case GE2_UPDATE_PER_PARAMETER:
        if (refused)
            return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_optimizer: %s: update_mode per_parameter: %s",
                             ge2_optimizer_name(c->kind), why);
        *per_parameter = true;
        return GE2_OK;
    default: {
        /* Large layers: one update node each. Data parallel, each after an
         * all-reduce of its layer's gradients, at the backward's end
         * (planner/schedule.c): the updates of the layers the backward
         * finished first run while the last all-reduces are summing the
         * rest. */
        int nodes = gradient_producers(g);
        *per_parameter =
            !refused && nodes > 0 && gradient_bytes(g) / (size_t)nodes >= PER_PARAMETER_MIN_BYTES_PER_NODE;
        return GE2_OK;
    }
    }
}

/* Data parallel: an ALL_REDUCE of the gradients of pairs[0, n) ((parameter,
 * gradient) ids), created before the update that reads them, so the
 * schedule runs it first (planner/schedule.c). */
static ge2_status add_all_reduce(ge2_graph *g, const int *pairs, int n, ge2_attrs *attrs)
{
    int grads[GE2_MAX_INPUTS];
    for (int i = 0; i < n; i++)
        grads[i] = pairs[2 * i + 1];
    return ge2_graph_add_node(g, GE2_OP_ALL_REDUCE, GE2_PHASE_OPTIMIZER, grads, n, 0, attrs, NULL);
}

/* One OPTIMIZER_UPDATE per layer with parameter gradients, last layer
 * first (the order the backward completes them), its inputs (parameter,
 * gradient) for each of the layer's parameters in input order; data
 * parallel, each after an ALL_REDUCE of its gradients (its bucket).
 * Created after the backward; the planner runs each right after its
 * gradients and the last read of its parameters, or, data parallel, after
 * the whole backward (planner/schedule.c). */
static ge2_status add_per_parameter_updates(ge2_graph *g, ge2_attrs *attrs)
{
    GE2_ATTRS(ge2_optim_attrs, *attrs)->update_nodes = gradient_producers(g);
    for (int n = g->n_nodes - 1; n >= 0; n--) {
        if (layer_parameters(g, n) == 0)
            continue;
        const ge2_node node = g->nodes[n]; /* copy: adding nodes may move g->nodes */
        int in[GE2_MAX_INPUTS], n_in = 0;
        for (int i = 0; i < node.n_inputs; i++) {
            if (updates_at(g, n, i)) {
                in[n_in++] = node.inputs[i];
                in[n_in++] = g->tensors[node.inputs[i]]->grad;
            }
            if (n_in == 2 * PARAMETERS_PER_UPDATE || (n_in > 0 && i == node.n_inputs - 1)) {
                if (GE2_ATTRS(ge2_optim_attrs, *attrs)->config.data_parallel)
                    GE2_TRY(add_all_reduce(g, in, n_in / 2, attrs));
                GE2_TRY(ge2_graph_add_node(g, GE2_OP_OPTIMIZER_UPDATE, GE2_PHASE_OPTIMIZER, in, n_in, 0, attrs, NULL));
                n_in = 0;
            }
        }
    }
    return GE2_OK;
}

/* DDP's default bucket_cap_mb. */
#define DEFAULT_BUCKET_BYTES ((int64_t)25 << 20)

/* Data parallel with the flat update: the gradients in buckets, layers last
 * first (the order the backward completes them), a bucket closing once it
 * holds bucket_bytes or as many gradients as a node takes; one ALL_REDUCE
 * each, which the schedule runs as soon as the bucket is complete, before
 * the update sweeps the pools. */
static ge2_status add_flat_all_reduces(ge2_graph *g, ge2_attrs *attrs)
{
    const int64_t cap = GE2_ATTRS(ge2_optim_attrs, *attrs)->config.bucket_bytes > 0 ? GE2_ATTRS(ge2_optim_attrs, *attrs)->config.bucket_bytes : DEFAULT_BUCKET_BYTES;
    int pairs[2 * GE2_MAX_INPUTS], n = 0;
    int64_t bytes = 0;
    for (int layer = g->n_nodes - 1; layer >= 0; layer--) {
        const int n_inputs = g->nodes[layer].n_inputs;
        for (int i = 0; i < n_inputs; i++) {
            if (!updates_at(g, layer, i))
                continue;
            const ge2_tensor *param = g->tensors[g->nodes[layer].inputs[i]];
            pairs[2 * n] = param->id;
            pairs[2 * n + 1] = param->grad;
            n++;
            bytes += ge2_shape_numel(param->shape) * (int64_t)sizeof(float);
            if (n == GE2_MAX_INPUTS || bytes >= cap) {
                GE2_TRY(add_all_reduce(g, pairs, n, attrs));
                n = 0;
                bytes = 0;
            }
        }
    }
    return n ? add_all_reduce(g, pairs, n, attrs) : GE2_OK;
}

ge2_status ge2_no_weight_decay(ge2_graph *graph, ge2_tensor *param)
{
    if (!graph || !param)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_no_weight_decay: %s is NULL", graph ? "param" : "graph");
    if (param->graph != graph)
        return ge2_error(GE2_ERR_GRAPH, "ge2_no_weight_decay: '%s' belongs to another graph", param->name);
    if (param->role != GE2_ROLE_PARAMETER)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_no_weight_decay: '%s' is not a parameter (its role: %s)", param->name,
                         ge2_role_name(param->role));
    if (!param->no_weight_decay)
        graph->changes++; /* the parameter pool's order changes with it */
    param->no_weight_decay = true;
    return GE2_OK;
}

ge2_status ge2_optimizer(ge2_graph *graph, const ge2_optimizer_config *config)
{
    if (!graph)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_optimizer: graph must not be NULL");
    GE2_TRY(ge2_opt_validate(config));
    if (graph->loss < 0)
        return ge2_error(GE2_ERR_STATE, "ge2_optimizer: the graph has no backward yet: call ge2_backward first");
    if (graph->has_optimizer)
        return ge2_error(GE2_ERR_STATE, "ge2_optimizer: the graph already has an optimizer");
    for (int i = 0; i < graph->n_tensors; i++) {
        const ge2_tensor *t = graph->tensors[i];
        if (t->role == GE2_ROLE_PARAMETER && t->dtype != GE2_F32)
            return ge2_error(GE2_ERR_DTYPE, "ge2_optimizer: parameter '%s' is %s; the optimizer updates f32 parameters",
                             t->name, ge2_dtype_name(t->dtype));
    }
    bool per_parameter = false;
    GE2_TRY(choose_per_parameter(graph, config, &per_parameter));

    ge2_attrs attrs;
    memset(&attrs, 0, sizeof attrs);
    GE2_ATTRS(ge2_optim_attrs, attrs)->config = *config;
    GE2_ATTRS(ge2_optim_attrs, attrs)->update_nodes = 1;
    /* Every node or none: roll the node count back if one fails. */
    int n_nodes = graph->n_nodes;
    ge2_status st = GE2_OK;
    if (per_parameter) {
        st = add_per_parameter_updates(graph, &attrs);
    } else {
        if (config->data_parallel)
            st = add_flat_all_reduces(graph, &attrs);
        /* the norm for clipping, and loss scaling's check for infs */
        if (st == GE2_OK && (config->clip_norm > 0 || config->loss_scaling.dynamic))
            st = ge2_graph_add_node(graph, GE2_OP_GRAD_NORM, GE2_PHASE_OPTIMIZER, NULL, 0, 0, &attrs, NULL);
        if (st == GE2_OK)
            st = ge2_graph_add_node(graph, GE2_OP_OPTIMIZER_UPDATE, GE2_PHASE_OPTIMIZER, NULL, 0, 0, &attrs, NULL);
    }
    if (st != GE2_OK) {
        graph->n_nodes = n_nodes;
        return st;
    }
    graph->has_optimizer = true;
    graph->per_parameter_updates = per_parameter;
    /* nanoGPT's groups: vectors (biases, norm gains) take no weight decay */
    for (int i = 0; config->decay_matrices_only && i < graph->n_tensors; i++)
        if (graph->tensors[i]->role == GE2_ROLE_PARAMETER && graph->tensors[i]->shape.ndim < 2)
            graph->tensors[i]->no_weight_decay = true;
    return GE2_OK;
}
