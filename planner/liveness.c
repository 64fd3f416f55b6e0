/* Concrete shapes, lifetimes and pools of one key's tensors.
 *
 * A tensor lives from the schedule position of its producer to that of its
 * last consumer. Shape-only inputs (GE2_OPF_LIKE1's input 1) are not reads,
 * so they do not keep a tensor alive. Outputs live to the end of the step in
 * the key's IO buffer; an activation nobody reads and nobody asked for (e.g.
 * CROSS_ENTROPY's dlogits in EVAL) gets no memory at all. Parameter
 * gradients live in the gradient pool, where the flat update (or the
 * caller, without an optimizer) reads them after the step; with
 * per-parameter updates they are arena tensors like any other, read by their
 * layer's update.
 */
#include "graph/alloc.h"
#include "graph/error.h"
#include "graph/specialize.h"
#include "planner/plan_internal.h"

/* The key's concrete shapes: the graph re-runs inference with the feeds'. */
static ge2_status infer_shapes(const ge2_graph *graph, ge2_plan *plan)
{
    size_t n = (size_t)(graph->n_tensors > 0 ? graph->n_tensors : 1);
    ge2_shape *feeds = ge2_calloc(n, sizeof *feeds);
    ge2_shape *shapes = ge2_calloc(n, sizeof *shapes);
    ge2_status st = GE2_OK;
    if (!feeds || !shapes) {
        st = ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_plan: shapes of %d tensors", graph->n_tensors);
    } else {
        for (int f = 0; f < plan->key.n_feeds; f++)
            feeds[plan->key.feed_ids[f]] = plan->key.feed_shapes[f];
        st = ge2_graph_infer_shapes(graph, feeds, shapes);
        for (int i = 0; st == GE2_OK && i < graph->n_tensors; i++)
            plan->tensors[i].shape = shapes[i];
    }
    ge2_free(feeds);
    ge2_free(shapes);
    return st;
}

static void compute_intervals(const ge2_graph *graph, ge2_plan *plan)
{
    for (int p = 0; p < plan->n_steps; p++) {
        const ge2_node *node = &graph->nodes[plan->schedule[p]];
        for (int i = 0; i < node->n_inputs; i++) {
            if (ge2_plan_is_like_input(node, i))
                continue;
            ge2_plan_tensor *pt = &plan->tensors[node->inputs[i]];
            if (pt->first < 0)
                pt->first = p; /* a leaf: its first read */
            pt->last = p;
        }
        for (int o = 0; o < node->n_outputs; o++)
            plan->tensors[node->outputs[o]].first = p;
    }
}

ge2_status ge2_plan_liveness(const ge2_graph *graph, const ge2_layout *layout, ge2_plan *plan)
{
    for (int i = 0; i < plan->n_tensors; i++) {
        ge2_plan_tensor *pt = &plan->tensors[i];
        *pt = (ge2_plan_tensor){GE2_POOL_NONE, 0, 0, graph->tensors[i]->shape, -1, -1, -1, -1};
    }
    GE2_TRY(infer_shapes(graph, plan));
    compute_intervals(graph, plan);

    for (int i = 0; i < plan->n_tensors; i++) {
        const ge2_tensor *t = graph->tensors[i];
        ge2_plan_tensor *pt = &plan->tensors[i];
        if (!ge2_plan_bytes_fit(t->dtype, pt->shape, &pt->bytes)) {
            char s[64];
            return ge2_error(GE2_ERR_SHAPE, "ge2_plan: tensor '%s' would be %s %s, too large to allocate", t->name,
                             ge2_dtype_name(t->dtype), ge2_shape_str(pt->shape, s, sizeof s));
        }
    }

    size_t io = 0;
    for (int f = 0; f < plan->key.n_feeds; f++) {
        ge2_plan_tensor *pt = &plan->tensors[plan->key.feed_ids[f]];
        pt->pool = GE2_POOL_INPUTS;
        pt->offset = io;
        io += ge2_plan_align(pt->bytes, GE2_ARENA_ALIGN);
    }

    for (int i = 0; i < plan->n_tensors; i++) {
        const ge2_tensor *t = graph->tensors[i];
        ge2_plan_tensor *pt = &plan->tensors[i];
        switch (t->role) {
        case GE2_ROLE_PARAMETER:
            pt->pool = GE2_POOL_PARAMS;
            pt->offset = layout->offset[i];
            continue;
        case GE2_ROLE_CONSTANT:
            pt->pool = GE2_POOL_CONSTANTS;
            pt->offset = layout->offset[i];
            continue;
        case GE2_ROLE_BUFFER:
            pt->pool = GE2_POOL_BUFFERS;
            pt->offset = layout->offset[i];
            continue;
        case GE2_ROLE_PARAMETER_COPY:
            pt->pool = GE2_POOL_PARAM_COPIES;
            pt->offset = layout->offset[i];
            continue;
        case GE2_ROLE_INPUT:
        case GE2_ROLE_LABEL:
            continue; /* placed above */
        default:
            break;
        }
        bool produced = t->producer >= 0 && pt->first >= 0;
        if (!produced) {
            pt->first = pt->last = -1; /* not run by this key */
            continue;
        }
        /* With per-parameter updates a gradient is an update node's input:
         * an arena tensor, dead after that update. */
        if (ge2_param_of_grad(graph, t) && !graph->per_parameter_updates) {
            pt->pool = GE2_POOL_GRADS;
            pt->offset = layout->offset[t->grad_of];
            if (pt->last < pt->first)
                pt->last = pt->first;
        } else if (ge2_plan_is_step_output(graph, t)) {
            pt->pool = GE2_POOL_INPUTS;
            pt->offset = io;
            io += ge2_plan_align(pt->bytes, GE2_ARENA_ALIGN);
            pt->last = plan->n_steps - 1;
        } else if (pt->last >= pt->first) {
            pt->pool = GE2_POOL_ARENA;
        } else {
            pt->first = pt->last = -1; /* produced, never read, not asked for */
        }
    }
    plan->input_bytes = io;
    return GE2_OK;
}
