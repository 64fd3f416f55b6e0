/* ge2_backward: which tensors need gradients, the reverse walk over the
 * forward nodes, accumulation, and handing parameters their gradients. */
#include <stdio.h>
#include <string.h>

#include "autograd/autograd.h"
#include "graph/alloc.h"
#include "graph/error.h"
#include "graph/op_support.h"
#include "ops/ops.h" /* ADD sums a gradient used twice, LOSS_SCALE seeds the backward */

bool ge2_ag_wants(const ge2_autograd *ag, int id) { return id >= 0 && id < ag->n_forward_tensors && ag->needs[id]; }

ge2_status ge2_ag_emit_n(ge2_autograd *ag, ge2_op op, const int *inputs, int n_inputs, int n_outputs,
                         const ge2_attrs *attrs, int *out)
{
    int node;
    GE2_TRY(ge2_graph_add_node(ag->graph, op, GE2_PHASE_BACKWARD, inputs, n_inputs, n_outputs, attrs, &node));
    for (int i = 0; i < n_outputs; i++)
        out[i] = ag->graph->nodes[node].outputs[i];
    return GE2_OK;
}

ge2_status ge2_ag_emit_op(ge2_autograd *ag, ge2_op op, const int *inputs, int n_inputs, const void *attrs,
                          size_t attrs_bytes, int n_outputs, int *outputs)
{
    ge2_attrs a;
    GE2_TRY(ge2_attrs_from_bytes(ge2_op_name(op), attrs, attrs_bytes, &a));
    return ge2_ag_emit_n(ag, op, inputs, n_inputs, n_outputs, &a, outputs);
}

ge2_status ge2_ag_emit(ge2_autograd *ag, ge2_op op, const int *inputs, int n_inputs, const ge2_attrs *attrs, int *out)
{
    return ge2_ag_emit_n(ag, op, inputs, n_inputs, 1, attrs, out);
}

ge2_status ge2_ag_emit2(ge2_autograd *ag, ge2_op op, int a, int b, const ge2_attrs *attrs, int *out)
{
    int in[2] = {a, b};
    return ge2_ag_emit(ag, op, in, 2, attrs, out);
}

ge2_status ge2_ag_dy_tensor(ge2_autograd *ag, int dy, int *out)
{
    if (dy != GE2_GRAD_SEED) {
        *out = dy;
        return GE2_OK;
    }
    if (ag->seed < 0) {
        /* d loss / d loss: 1, times the loss scale under dynamic loss
         * scaling (ge2_loss_scaling), so the seed is read from the control
         * block every step */
        ge2_graph *g = ag->graph;
        ge2_attrs a;
        memset(&a, 0, sizeof a);
        GE2_ATTRS(ge2_loss_scale_attrs, a)->dtype = g->tensors[g->loss]->dtype;
        GE2_TRY(ge2_ag_emit(ag, GE2_OP_LOSS_SCALE, NULL, 0, &a, &ag->seed));
        snprintf(g->tensors[ag->seed]->name, sizeof g->tensors[ag->seed]->name, "ge2_grad_seed");
    }
    *out = ag->seed;
    return GE2_OK;
}

/* A rule's gradient must be the tensor's own shape and dtype: the planner
 * writes a parameter's gradient into its slot of the gradient pool, so a
 * larger one would spill into the next parameter's and a smaller one would
 * leave part of the parameter untrained. A rule that broadcasts reduces its
 * gradient itself before handing it in. */
static ge2_status check_gradient(const ge2_autograd *ag, int id, int grad)
{
    const ge2_graph *g = ag->graph;
    if (grad < 0 || grad >= g->n_tensors)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_ag_accumulate: gradient %d is not a tensor of the graph (pass a "
                         "tensor id, not GE2_GRAD_NONE or GE2_GRAD_SEED)", grad);
    if (id < 0 || id >= ag->n_forward_tensors)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT,
                         "ge2_ag_accumulate: tensor %d is not a tensor of the forward graph (ids 0..%d); its gradient "
                         "'%s' would go nowhere", id, ag->n_forward_tensors - 1, g->tensors[grad]->name);
    const ge2_tensor *t = g->tensors[id], *d = g->tensors[grad];
    if (!ge2_shape_equal(t->shape, d->shape) || t->dtype != d->dtype) {
        char ts[64], ds[64];
        return ge2_error(t->dtype != d->dtype ? GE2_ERR_DTYPE : GE2_ERR_SHAPE,
                         "ge2_ag_accumulate: the gradient of '%s' (%s %s) is '%s' (%s %s): a rule must hand in a "
                         "gradient of its tensor's shape and dtype (reduce a broadcast one first)",
                         t->name, ge2_dtype_name(t->dtype), ge2_shape_str(t->shape, ts, sizeof ts), d->name,
                         ge2_dtype_name(d->dtype), ge2_shape_str(d->shape, ds, sizeof ds));
    }
    return GE2_OK;
}

ge2_status ge2_ag_accumulate(ge2_autograd *ag, int id, int grad)
{
    GE2_TRY(check_gradient(ag, id, grad));
    if (!ge2_ag_wants(ag, id))
        return GE2_OK;
    if (ag->grad[id] == GE2_GRAD_NONE) {
        ag->grad[id] = grad;
        return GE2_OK;
    }
    return ge2_ag_emit2(ag, GE2_OP_ADD, ag->grad[id], grad, NULL, &ag->grad[id]);
}

ge2_status ge2_require_grad(ge2_graph *graph, ge2_tensor *input)
{
    if (!graph || !input)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_require_grad: %s is NULL", graph ? "input" : "graph");
    if (input->graph != graph)
        return ge2_error(GE2_ERR_GRAPH, "ge2_require_grad: '%s' belongs to another graph", input->name);
    if (graph->loss >= 0)
        return ge2_error(GE2_ERR_STATE, "ge2_require_grad: '%s': the graph already has its backward", input->name);
    if (input->role != GE2_ROLE_INPUT)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT,
                         "ge2_require_grad: '%s' is a %s; only inputs take it (parameters always get gradients, "
                         "labels and constants never)",
                         input->name, ge2_role_name(input->role));
    input->requires_grad = true;
    return GE2_OK;
}

ge2_tensor *ge2_grad(const ge2_tensor *t)
{
    return t && t->grad >= 0 ? t->graph->tensors[t->grad] : NULL;
}

/* Forward: a tensor needs a gradient when it is a parameter, a required
 * input, or the output of a differentiable op fed by one. */
static void mark_needs(ge2_autograd *ag)
{
    ge2_graph *g = ag->graph;
    for (int i = 0; i < ag->n_forward_tensors; i++) {
        const ge2_tensor *t = g->tensors[i];
        ag->needs[i] = t->role == GE2_ROLE_PARAMETER || (t->role == GE2_ROLE_INPUT && t->requires_grad);
    }
    for (int n = 0; n < g->n_nodes; n++) {
        const ge2_node *node = &g->nodes[n];
        unsigned flags = ge2_op_flags(node->op);
        if (node->phase != GE2_PHASE_FORWARD || (flags & GE2_OPF_NO_GRAD))
            continue;
        bool any = false;
        for (int i = 0; i < node->n_inputs; i++)
            any |= !(i == 1 && (flags & GE2_OPF_LIKE1)) && ag->needs[node->inputs[i]];
        for (int i = 0; i < node->n_outputs; i++)
            ag->needs[node->outputs[i]] = any;
    }
}

/* The planner writes a parameter's gradient tensor straight into the
 * gradient pool, so that tensor must be the gradient's alone: made by a
 * backward node and not already another parameter's. Otherwise copy it. */
static ge2_status give_gradient(ge2_autograd *ag, ge2_tensor *leaf, int grad)
{
    ge2_graph *g = ag->graph;
    const ge2_tensor *gt = g->tensors[grad];
    if (gt->producer < 0 || g->nodes[gt->producer].phase != GE2_PHASE_BACKWARD || gt->grad_of >= 0) {
        ge2_attrs a;
        memset(&a, 0, sizeof a);
        GE2_ATTRS(ge2_scale_attrs, a)->alpha = 1.0;
        GE2_TRY(ge2_ag_emit(ag, GE2_OP_SCALE, &grad, 1, &a, &grad));
    }
    ge2_tensor *t = g->tensors[grad];
    char name[GE2_NAME_MAX];
    /* "grad/<name>" reads well in DOT and summaries; keep the generated name if it would clash */
    if (snprintf(name, sizeof name, "grad/%s", leaf->name) < (int)sizeof name && !ge2_graph_find(g, name))
        strcpy(t->name, name);
    t->grad_of = leaf->id;
    leaf->grad = grad;
    return GE2_OK;
}

static ge2_status check_loss(ge2_graph *g, const ge2_tensor *loss)
{
    if (!g || !loss)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_backward: %s is NULL", g ? "loss" : "graph");
    if (loss->graph != g)
        return ge2_error(GE2_ERR_GRAPH, "ge2_backward: loss '%s' belongs to another graph", loss->name);
    if (g->loss >= 0)
        return ge2_error(GE2_ERR_STATE, "ge2_backward: called twice; the graph already has the backward of '%s'",
                         g->tensors[g->loss]->name);
    if (loss->shape.ndim != 0) {
        char buf[64];
        return ge2_error(GE2_ERR_GRAPH, "ge2_backward: loss must be a scalar, '%s' is %s", loss->name,
                         ge2_shape_str(loss->shape, buf, sizeof buf));
    }
    if (loss->dtype != GE2_F32 && loss->dtype != GE2_F64)
        return ge2_error(GE2_ERR_DTYPE, "ge2_backward: loss '%s' is %s, expected f32 or f64", loss->name,
                         ge2_dtype_name(loss->dtype));
    if (g->n_parameters == 0)
        return ge2_error(GE2_ERR_GRAPH, "ge2_backward: the graph has no parameters to differentiate");
    return GE2_OK;
}

static ge2_status walk(ge2_autograd *ag, int n_forward_nodes)
{
    ge2_graph *g = ag->graph;
    for (int n = n_forward_nodes - 1; n >= 0; n--) {
        /* copy: emitting nodes may move g->nodes */
        ge2_node node = g->nodes[n];
        if (node.phase != GE2_PHASE_FORWARD)
            continue;
        int dy[GE2_MAX_OUTPUTS];
        bool any = false;
        for (int i = 0; i < node.n_outputs; i++) {
            GE2_TRY(ge2_ag_settle(ag, node.outputs[i]));
            dy[i] = ag->grad[node.outputs[i]];
            any |= dy[i] != GE2_GRAD_NONE;
        }
        if (!any)
            continue;
        ge2_backward_rule rule = ge2_op_def_of(node.op)->backward;
        if (!rule)
            return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_backward: op %s (node %d) has no backward rule",
                             ge2_op_name(node.op), n);
        GE2_TRY(rule(ag, &node, dy));
    }
    return GE2_OK;
}

/* Undoes a failed backward: the graph is left as the user built it. */
static void roll_back(ge2_graph *g, int n_nodes, int n_tensors, ge2_tensor *loss, bool was_output)
{
    while (g->n_tensors > n_tensors) {
        ge2_tensor *t = g->tensors[--g->n_tensors];
        ge2_free(t->constant_data);
        ge2_free(t);
    }
    for (int i = 0; i < n_tensors; i++)
        if (g->tensors[i]->grad >= n_tensors)
            g->tensors[i]->grad = -1;
    g->n_nodes = n_nodes;
    g->loss = -1;
    loss->is_output = was_output;
}

/* Lists the parameters the walk gave no gradient, as options ask. */
static ge2_status report_unused(const ge2_autograd *ag, const ge2_backward_options *o)
{
    if (o->unused_parameters == GE2_UNUSED_PARAMETERS_ALLOW)
        return GE2_OK;
    const ge2_graph *g = ag->graph;
    char names[768];
    size_t used = 0;
    int n = 0;
    names[0] = '\0';
    for (int i = 0; i < ag->n_forward_tensors; i++) {
        const ge2_tensor *t = g->tensors[i];
        if (t->role != GE2_ROLE_PARAMETER || ag->grad[i] >= 0)
            continue;
        if (used < sizeof names - 1) {
            int k = snprintf(names + used, sizeof names - used, "%s'%s'", n ? ", " : "", t->name);
            used = k < 0 ? sizeof names - 1 : used + (size_t)k;
            if (used >= sizeof names - 1) /* cut: end on an ellipsis */
                memcpy(names + sizeof names - 5, "...", 4);
        }
        n++;
    }
    if (n == 0)
        return GE2_OK;
    if (o->unused_parameters == GE2_UNUSED_PARAMETERS_ERROR)
        return ge2_error(GE2_ERR_GRAPH, "ge2_backward: loss '%s' does not depend on %d parameter(s), which would "
                         "never train: %s", g->tensors[g->loss]->name, n, names);
    fprintf(stderr, "ge2: warning: ge2_backward: loss '%s' does not depend on %d parameter(s), which will not "
            "train: %s\n", g->tensors[g->loss]->name, n, names);
    return GE2_OK;
}

ge2_status ge2_backward(ge2_graph *graph, ge2_tensor *loss)
{
    return ge2_backward_with(graph, loss, NULL);
}

ge2_status ge2_backward_with(ge2_graph *graph, ge2_tensor *loss, const ge2_backward_options *options)
{
    const ge2_backward_options defaults = {.unused_parameters = GE2_UNUSED_PARAMETERS_WARN};
    const ge2_backward_options *o = options ? options : &defaults;
    if ((unsigned)o->unused_parameters >= GE2_UNUSED_PARAMETERS_COUNT)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_backward: unused_parameters is %d, not a "
                         "ge2_unused_parameters", (int)o->unused_parameters);
    GE2_TRY(check_loss(graph, loss));
    ge2_autograd ag = {.graph = graph, .n_forward_tensors = graph->n_tensors, .seed = -1};
    int n_nodes = graph->n_nodes;
    bool was_output = loss->is_output;
    ag.needs = ge2_calloc((size_t)graph->n_tensors, sizeof *ag.needs);
    ag.grad = ge2_malloc((size_t)graph->n_tensors * sizeof *ag.grad);
    ge2_status st = GE2_OK;
    if (!ag.needs || !ag.grad) {
        st = ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_backward: out of memory");
        goto done;
    }
    mark_needs(&ag);
    if (!ag.needs[loss->id]) {
        st = ge2_error(GE2_ERR_GRAPH, "ge2_backward: loss '%s' does not depend on any parameter", loss->name);
        goto done;
    }
    for (int i = 0; i < graph->n_tensors; i++)
        ag.grad[i] = GE2_GRAD_NONE;
    ag.grad[loss->id] = GE2_GRAD_SEED;
    graph->loss = loss->id;
    loss->is_output = true;
    if ((st = walk(&ag, graph->n_nodes)) != GE2_OK)
        goto done;
    for (int i = 0; i < ag.n_forward_tensors && st == GE2_OK; i++) /* leaves' parts */
        st = ge2_ag_settle(&ag, i);
    if (st == GE2_OK)
        st = report_unused(&ag, o);
    for (int i = 0; i < ag.n_forward_tensors && st == GE2_OK; i++) {
        ge2_tensor *t = graph->tensors[i];
        bool leaf = t->role == GE2_ROLE_PARAMETER || (t->role == GE2_ROLE_INPUT && t->requires_grad);
        if (ag.grad[i] < 0)
            continue;
        if (leaf)
            st = give_gradient(&ag, t, ag.grad[i]);
        else
            t->grad = ag.grad[i];
    }
done:
    if (st != GE2_OK)
        roll_back(graph, n_nodes, ag.n_forward_tensors, loss, was_output);
    ge2_free(ag.needs);
    ge2_free(ag.grad);
    ge2_free(ag.parts);
    return st;
}
