/* Which nodes a key runs, and in what order.
 *
 * Nodes are stored in creation order, which is topological (a node can only
 * consume tensors that exist). That order is also the one a user reads in the
 * graph dump and the one autograd emits (backward in reverse of the forward),
 * which keeps activations short-lived, so the schedule keeps it and only
 * drops what the key does not need. Same graph, same mode: same schedule.
 *
 * Needed: in TRAIN whatever leads to an output, a parameter's or a required
 * input's gradient, or an op without outputs (the optimizer); in EVAL only
 * forward ops leading to an output. An op nobody needs (an unmarked metric,
 * say) is dropped rather than run with nowhere to write.
 */
#include "graph/alloc.h"
#include "graph/error.h"
#include "planner/plan_internal.h"

static bool is_root(const ge2_graph *graph, const ge2_tensor *t, ge2_mode mode)
{
    if (mode == GE2_MODE_EVAL)
        return t->is_output;
    return ge2_plan_is_step_output(graph, t) || ge2_plan_is_param_grad(graph, t);
}

/* Marks needed nodes walking in reverse creation order, so one pass sees
 * every consumer before its producer. */
static void mark_needed(const ge2_graph *graph, ge2_mode mode, bool *tensor_needed, bool *node_needed)
{
    for (int i = 0; i < graph->n_tensors; i++)
        tensor_needed[i] = is_root(graph, graph->tensors[i], mode);
    for (int n = graph->n_nodes - 1; n >= 0; n--) {
        const ge2_node *node = &graph->nodes[n];
        if (mode == GE2_MODE_EVAL && node->phase != GE2_PHASE_FORWARD)
            continue;
        bool needed = node->n_outputs == 0;
        for (int o = 0; o < node->n_outputs; o++)
            needed = needed || tensor_needed[node->outputs[o]];
        node_needed[n] = needed;
        if (!needed)
            continue;
        for (int i = 0; i < node->n_inputs; i++)
            tensor_needed[node->inputs[i]] = true;
    }
}

ge2_status ge2_plan_schedule(const ge2_graph *graph, ge2_plan *plan)
{
    int n_nodes = graph->n_nodes;
    plan->schedule = ge2_malloc((size_t)(n_nodes > 0 ? n_nodes : 1) * sizeof *plan->schedule);
    bool *tensor_needed = ge2_calloc((size_t)graph->n_tensors + 1, sizeof *tensor_needed);
    bool *node_needed = ge2_calloc((size_t)n_nodes + 1, sizeof *node_needed);
    ge2_status st = GE2_OK;
    if (!plan->schedule || !tensor_needed || !node_needed) {
        st = ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_plan: schedule of %d nodes", n_nodes);
    } else {
        mark_needed(graph, plan->key.mode, tensor_needed, node_needed);
        plan->n_steps = 0;
        for (int n = 0; n < n_nodes; n++)
            if (node_needed[n])
                plan->schedule[plan->n_steps++] = n;
    }
    ge2_free(tensor_needed);
    ge2_free(node_needed);
    return st;
}
