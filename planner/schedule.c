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
 *   gradients and the last other node reading the parameters it overwrites
 *   (or their bf16 copies, which it rewrites). Its gradients then die there, so the arena
 *   reuses them while the backward goes on; run at the end, every gradient
 *   would be live at once. Data parallel, it runs after the whole backward
 *   instead (after its all-reduce), its gradients live until then: right
 *   after the all-reduce it would wait for the sum at once with nothing
 *   else to do, leaving the communication exposed, while at the end the
 *   updates of the first buckets run as the last buckets are still being
 *   summed.
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

static bool reads_tensor(const ge2_node *node, int t, bool skip_like_inputs)
{
    for (int i = 0; i < node->n_inputs; i++)
        if (node->inputs[i] == t && !(skip_like_inputs && ge2_plan_is_like_input(node, i)))
            return true;
    return false;
}

/* Whether node reads the bf16 copy of parameter p (GE2_ROLE_PARAMETER_COPY),
 * which p's update rewrites with p */
static bool reads_copy_of(const ge2_graph *graph, const ge2_node *node, int p)
{
    for (int i = 0; i < node->n_inputs; i++)
        if (graph->tensors[node->inputs[i]]->copy_of == p)
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
    if (m < u && writes_inputs(other) && ge2_nodes_share_input(other, node))
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
        if (reads_tensor(other, node->inputs[j], true) || reads_copy_of(graph, other, node->inputs[j]))
            return true; /* a reader of a parameter it overwrites, or of its copy */
    return false;
}

/* anchor[u]: for early node u, the last creation-order node it must follow
 * (-1: none), through the early nodes it must follow too. Those were all
 * made before it (must_follow: an early node follows another only as an
 * earlier in-place node), so one pass in creation order sees their anchors. */
static void find_anchors(const ge2_graph *graph, const bool *node_needed, const bool *early, int *anchor)
{
    int last_in_order = -1; /* the last needed creation-order node: the backward's end */
    for (int n = 0; n < graph->n_nodes; n++)
        if (node_needed[n] && !early[n])
            last_in_order = n;
    for (int u = 0; u < graph->n_nodes; u++) {
        anchor[u] = -1;
        if (!early[u])
            continue;
        bool after_all_reduce = false;
        for (int m = 0; m < graph->n_nodes; m++) {
            if (m == u || !node_needed[m] || !must_follow(graph, u, m))
                continue;
            const int bound = early[m] ? anchor[m] : m;
            anchor[u] = bound > anchor[u] ? bound : anchor[u];
            after_all_reduce = after_all_reduce || writes_inputs(&graph->nodes[m]);
        }
        if (updates_in_place(&graph->nodes[u]) && after_all_reduce)
            anchor[u] = last_in_order;
    }
}

/* Appends the early nodes anchored at `at`: the all-reduces first, so the
 * ranks' communication starts while the rest computes (and an update after
 * the all-reduce it waits for), then the others; each in creation order. */
static void place_anchored(const ge2_graph *graph, const bool *early, const int *anchor, int at, ge2_plan *plan)
{
    for (int all_reduces = 1; all_reduces >= 0; all_reduces--)
        for (int u = 0; u < graph->n_nodes; u++)
            if (early[u] && anchor[u] == at && writes_inputs(&graph->nodes[u]) == (bool)all_reduces)
                plan->schedule[plan->n_steps++] = u;
}

ge2_status ge2_plan_schedule(const ge2_graph *graph, ge2_plan *plan)
{
    int n_nodes = graph->n_nodes;
    size_t cells = (size_t)n_nodes + 1;
    plan->schedule = ge2_malloc(cells * sizeof *plan->schedule);
    bool *tensor_needed = ge2_calloc((size_t)graph->n_tensors + 1, sizeof *tensor_needed);
    bool *node_needed = ge2_calloc(cells, sizeof *node_needed);
    bool *early = ge2_calloc(cells, sizeof *early);
    int *anchor = ge2_malloc(cells * sizeof *anchor);
    ge2_status st = GE2_OK;
    if (!plan->schedule || !tensor_needed || !node_needed || !early || !anchor) {
        st = ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_plan: schedule of %d nodes", n_nodes);
    } else {
        mark_needed(graph, plan->key.mode, tensor_needed, node_needed);
        find_early_nodes(graph, node_needed, early);
        find_anchors(graph, node_needed, early, anchor);
        plan->n_steps = 0;
        place_anchored(graph, early, anchor, -1, plan);
        /* Creation-order nodes go in unchecked: creation order is
         * topological, and every early node they could read from (an
         * all-reduce) follows only nodes made before it, so it is placed
         * before the next creation-order node. Only updates wait on
         * later-made nodes, and nothing reads an update. */
        for (int n = 0; n < n_nodes; n++) {
            if (!node_needed[n] || early[n])
                continue;
            plan->schedule[plan->n_steps++] = n;
            place_anchored(graph, early, anchor, n, plan);
        }
    }
    ge2_free(tensor_needed);
    ge2_free(node_needed);
    ge2_free(early);
    ge2_free(anchor);
    return st;
}
