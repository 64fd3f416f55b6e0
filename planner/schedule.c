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
 *
 * One exception to creation order: a per-parameter OPTIMIZER_UPDATE (one
 * with inputs), created after the whole backward, runs as early as it may:
 * right after the later of the nodes producing its gradients and the last
 * other node reading the parameters it overwrites. Its gradients then die
 * there, so the arena reuses them while the backward goes on; run at the
 * end, every gradient would be live at once. A data-parallel ALL_REDUCE
 * (GE2_OPF_IN_PLACE) likewise runs right after its gradients are made, so
 * the ranks sum a bucket while the backward goes on; an update that reads
 * gradients an earlier all-reduce sums runs after that all-reduce.
 */
#include "graph/alloc.h"
#include "graph/error.h"
#include "planner/plan_internal.h"

static bool is_root(const ge2_graph *graph, const ge2_tensor *t, ge2_mode mode)
{
    if (mode == GE2_MODE_EVAL)
        return t->is_output;
    return ge2_plan_is_step_output(graph, t) || ge2_param_of_grad(graph, t);
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

static bool updates_in_place(const ge2_node *node)
{
    return (ge2_op_flags(node->op) & GE2_OPF_UPDATE) && node->n_inputs > 0;
}

static bool writes_inputs(const ge2_node *node)
{
    return (ge2_op_flags(node->op) & GE2_OPF_IN_PLACE) && node->n_inputs > 0;
}

static bool shares_input(const ge2_node *a, const ge2_node *b)
{
    for (int i = 0; i < a->n_inputs; i++)
        for (int j = 0; j < b->n_inputs; j++)
            if (a->inputs[i] == b->inputs[j])
                return true;
    return false;
}

/* after[n]: for each needed per-parameter update or in-place node, the
 * needed node it must follow (see the top of the file); -1 for every other
 * node. Nodes placed after the same node keep their creation order. */
static void find_update_places(const ge2_graph *graph, const bool *node_needed, int *after)
{
    for (int n = 0; n < graph->n_nodes; n++) {
        const ge2_node *u = &graph->nodes[n];
        after[n] = -1;
        if (!node_needed[n] || !(updates_in_place(u) || writes_inputs(u)))
            continue;
        for (int i = 0; i < u->n_inputs; i++) {
            int producer = graph->tensors[u->inputs[i]]->producer;
            if (producer > after[n])
                after[n] = producer;
        }
        /* an earlier in-place node writing what this one reads: after it */
        for (int m = 0; m < n; m++)
            if (node_needed[m] && writes_inputs(&graph->nodes[m]) && shares_input(&graph->nodes[m], u) &&
                after[m] > after[n])
                after[n] = after[m];
        if (!updates_in_place(u))
            continue;
        /* Readers of a parameter: a scan of the nodes before this one. An
         * update is created after every node that reads its parameters. */
        for (int r = after[n] + 1; r < n; r++) {
            const ge2_node *reader = &graph->nodes[r];
            if (!node_needed[r] || updates_in_place(reader) || writes_inputs(reader))
                continue;
            for (int i = 0; i < reader->n_inputs; i++)
                for (int j = 0; j < u->n_inputs; j += 2)
                    if (reader->inputs[i] == u->inputs[j] && !ge2_plan_is_like_input(reader, i))
                        after[n] = r;
        }
    }
}

ge2_status ge2_plan_schedule(const ge2_graph *graph, ge2_plan *plan)
{
    int n_nodes = graph->n_nodes;
    size_t cells = (size_t)n_nodes + 1;
    plan->schedule = ge2_malloc(cells * sizeof *plan->schedule);
    bool *tensor_needed = ge2_calloc((size_t)graph->n_tensors + 1, sizeof *tensor_needed);
    bool *node_needed = ge2_calloc(cells, sizeof *node_needed);
    int *after = ge2_malloc(cells * sizeof *after);
    int *waiting = ge2_malloc(cells * sizeof *waiting); /* the placed updates, in creation order */
    ge2_status st = GE2_OK;
    if (!plan->schedule || !tensor_needed || !node_needed || !after || !waiting) {
        st = ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_plan: schedule of %d nodes", n_nodes);
    } else {
        mark_needed(graph, plan->key.mode, tensor_needed, node_needed);
        find_update_places(graph, node_needed, after);
        int n_waiting = 0;
        for (int n = 0; n < n_nodes; n++)
            if (after[n] >= 0)
                waiting[n_waiting++] = n;
        plan->n_steps = 0;
        for (int n = 0; n < n_nodes; n++) {
            if (!node_needed[n] || after[n] >= 0)
                continue;
            plan->schedule[plan->n_steps++] = n;
            for (int w = 0; w < n_waiting; w++)
                if (after[waiting[w]] == n)
                    plan->schedule[plan->n_steps++] = waiting[w];
        }
    }
    ge2_free(tensor_needed);
    ge2_free(node_needed);
    ge2_free(after);
    ge2_free(waiting);
    return st;
}
