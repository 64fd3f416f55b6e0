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
 * Exceptions to creation order, the early nodes, each placed as soon as
 * every node it must follow is (of early nodes that become ready together,
 * all-reduces go first, then the rest in creation order):
 * - A per-parameter OPTIMIZER_UPDATE (one with inputs), created after the
 *   whole backward, runs right after the later of the nodes producing its
 *   gradients, the all-reduce summing them, and the last other node reading
 *   the parameters it overwrites. Its gradients then die there, so the arena
 *   reuses them while the backward goes on; run at the end, every gradient
 *   would be live at once.
 * - A data-parallel ALL_REDUCE (GE2_OPF_IN_PLACE) runs right after its
 *   gradients are made, so the ranks sum a bucket while the backward goes
 *   on; and after every node made before it that reads what it overwrites
 *   (batch norm's input gradient reads this rank's own sums of the
 *   parameter gradients) or writes what it reads (an earlier all-reduce).
 * The nodes making the gradients an all-reduce sums keep autograd's order
 * (a layer's input gradient, then its weight gradient): fused groups match
 * pairs in that order (the classifier head's backward), so moving a weight
 * gradient first would make a rank run other kernels than one process, and
 * other bits.
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

static bool reads_tensor(const ge2_node *node, int t, bool skip_like_inputs)
{
    for (int i = 0; i < node->n_inputs; i++)
        if (node->inputs[i] == t && !(skip_like_inputs && ge2_plan_is_like_input(node, i)))
            return true;
    return false;
}

/* early[n]: whether needed node n is an early node (see the top of the file) */
static void find_early_nodes(const ge2_graph *graph, const bool *node_needed, bool *early)
{
    for (int n = 0; n < graph->n_nodes; n++)
        early[n] = node_needed[n] && (updates_in_place(&graph->nodes[n]) || writes_inputs(&graph->nodes[n]));
}

/* Whether early node u must follow needed node m (m != u) */
static bool must_follow(const ge2_graph *graph, int u, int m)
{
    const ge2_node *node = &graph->nodes[u], *other = &graph->nodes[m];
    for (int o = 0; o < other->n_outputs; o++)
        if (reads_tensor(node, other->outputs[o], false))
            return true; /* its producer */
    if (m < u && writes_inputs(other) && shares_input(other, node))
        return true; /* an earlier in-place node writing what it reads */
    if (updates_in_place(other) || writes_inputs(other))
        return false;
    if (writes_inputs(node) && m < u)
        for (int i = 0; i < node->n_inputs; i++)
            if (reads_tensor(other, node->inputs[i], true))
                return true; /* an earlier node reading what it overwrites */
    if (!updates_in_place(node))
        return false;
    for (int j = 0; j < node->n_inputs; j += 2)
        if (reads_tensor(other, node->inputs[j], true))
            return true; /* a reader of a parameter it overwrites */
    return false;
}

/* What the early nodes wait for: early node u may run once the creation-order
 * nodes up to main_bound[u] are placed and so are the early nodes
 * deps[first[u], first[u + 1]). */
typedef struct early_deps {
    int *main_bound, *first, *deps;
} early_deps;

static ge2_status find_early_deps(const ge2_graph *graph, const bool *node_needed, const bool *early,
                                  early_deps *d)
{
    const int n_nodes = graph->n_nodes;
    size_t cells = (size_t)n_nodes + 1;
    d->main_bound = ge2_malloc(cells * sizeof *d->main_bound);
    d->first = ge2_calloc(cells, sizeof *d->first);
    d->deps = NULL;
    if (!d->main_bound || !d->first)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_plan: schedule of %d nodes", n_nodes);
    /* two passes: count the early dependencies, then fill them in */
    for (int pass = 0; pass < 2; pass++) {
        int total = 0;
        for (int u = 0; u < n_nodes; u++) {
            d->first[u] = total;
            d->main_bound[u] = -1;
            if (!early[u])
                continue;
            for (int m = 0; m < n_nodes; m++) {
                if (m == u || !node_needed[m] || !must_follow(graph, u, m))
                    continue;
                if (!early[m])
                    d->main_bound[u] = m > d->main_bound[u] ? m : d->main_bound[u];
                else if (pass == 1)
                    d->deps[total++] = m;
                else
                    total++;
            }
        }
        d->first[n_nodes] = total;
        if (pass == 0 && !(d->deps = ge2_malloc((size_t)(total > 0 ? total : 1) * sizeof *d->deps)))
            return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_plan: schedule of %d nodes", n_nodes);
    }
    return GE2_OK;
}

static void early_deps_free(early_deps *d)
{
    ge2_free(d->main_bound);
    ge2_free(d->first);
    ge2_free(d->deps);
}

static bool early_ready(const bool *early, const early_deps *d, int cursor, const bool *placed, int u)
{
    if (!early[u] || placed[u] || d->main_bound[u] > cursor)
        return false;
    for (int k = d->first[u]; k < d->first[u + 1]; k++)
        if (!placed[d->deps[k]])
            return false;
    return true;
}

/* Appends every early node that may run now, one at a time (each may let
 * others run): an all-reduce first, so the ranks' communication starts while
 * the rest computes, then the others in creation order. cursor: the last
 * creation-order node placed. */
static void place_ready_early(const ge2_graph *graph, const bool *early, const early_deps *d, int cursor, bool *placed,
                              ge2_plan *plan)
{
    for (;;) {
        int pick = -1;
        for (int u = 0; u < graph->n_nodes && pick < 0; u++)
            if (writes_inputs(&graph->nodes[u]) && early_ready(early, d, cursor, placed, u))
                pick = u;
        for (int u = 0; u < graph->n_nodes && pick < 0; u++)
            if (early_ready(early, d, cursor, placed, u))
                pick = u;
        if (pick < 0)
            return;
        placed[pick] = true;
        plan->schedule[plan->n_steps++] = pick;
    }
}

ge2_status ge2_plan_schedule(const ge2_graph *graph, ge2_plan *plan)
{
    int n_nodes = graph->n_nodes;
    size_t cells = (size_t)n_nodes + 1;
    plan->schedule = ge2_malloc(cells * sizeof *plan->schedule);
    bool *tensor_needed = ge2_calloc((size_t)graph->n_tensors + 1, sizeof *tensor_needed);
    bool *node_needed = ge2_calloc(cells, sizeof *node_needed);
    bool *early = ge2_calloc(cells, sizeof *early);
    bool *placed = ge2_calloc(cells, sizeof *placed);
    early_deps deps = {0};
    ge2_status st = GE2_OK;
    if (!plan->schedule || !tensor_needed || !node_needed || !early || !placed) {
        st = ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_plan: schedule of %d nodes", n_nodes);
    } else {
        mark_needed(graph, plan->key.mode, tensor_needed, node_needed);
        find_early_nodes(graph, node_needed, early);
        st = find_early_deps(graph, node_needed, early, &deps);
    }
    if (st == GE2_OK) {
        plan->n_steps = 0;
        place_ready_early(graph, early, &deps, -1, placed, plan);
        /* Creation-order nodes go in unchecked: creation order is
         * topological, and every early node they could read from (an
         * all-reduce) waits only on nodes made before
         * it, so it is placed before the next creation-order node. Only
         * updates wait on later-made nodes, and nothing reads an update. */
        for (int n = 0; n < n_nodes; n++) {
            if (!node_needed[n] || early[n])
                continue;
            placed[n] = true;
            plan->schedule[plan->n_steps++] = n;
            place_ready_early(graph, early, &deps, n, placed, plan);
        }
        for (int n = 0; n < n_nodes; n++)
            if (node_needed[n] && !placed[n]) {
                st = ge2_error(GE2_ERR_GRAPH, "ge2_plan: node %d (%s) waits on itself through in-place writes", n,
                               ge2_op_name(graph->nodes[n].op));
                break;
            }
    }
    early_deps_free(&deps);
    ge2_free(tensor_needed);
    ge2_free(node_needed);
    ge2_free(early);
    ge2_free(placed);
    return st;
}
