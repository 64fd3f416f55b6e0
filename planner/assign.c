/* Arena offsets: greedy by size, best fit.
 *
 * First, chains of tensors on one memory (merge_chains): a reshape's output
 * is a view of its input, and a node whose input dies at that node (with
 * every view of it) and has its output's byte size writes that output over
 * the input where its op allows it (ge2_op_output_over_input: input 0 of an
 * elementwise op; ge2_op_over_output: output 0 but for cross-entropy's
 * gradient). Each chain becomes one block (one buffer over the
 * union of their intervals), so every later step sees blocks, not tensors.
 *
 * Then blocks are placed largest first (ties by lowest tensor id, so the
 * result is deterministic): each goes into the smallest gap between already
 * placed blocks whose lifetimes overlap its own, or on top of them. Large
 * buffers placed first pin the arena's shape; the many small ones fill the
 * holes between them. Three other orders (size x lifetime, lifetime, birth)
 * are tried too and one is kept only when strictly smaller: on a corpus of
 * random graphs that takes the 90th-percentile arena/lower-bound ratio from
 * 1.03 to 1.00. The lower bound is the most bytes of blocks live at any one
 * schedule position: no placement can beat it.
 *
 * A launch's scratch (scratch.c) is one more block, live at its position.
 */
#include <stdlib.h>

#include "graph/alloc.h"
#include "graph/error.h"
#include "planner/plan_internal.h"

typedef struct block {
    int head;     /* lowest tensor id (n_tensors + p: launch p's scratch): the tie-break, and the block's name */
    int first, last;
    size_t bytes; /* aligned */
    size_t offset;
} block;

static int cmp_size_desc(const void *pa, const void *pb)
{
    const block *a = *(const block *const *)pa, *b = *(const block *const *)pb;
    if (a->bytes != b->bytes)
        return a->bytes > b->bytes ? -1 : 1;
    return (a->head > b->head) - (a->head < b->head);
}

/* Other orders tried after size: greedy by size is the rule, but on a few
 * graphs placing long-lived or early blocks first packs tighter, and each
 * try is only a sort and one sweep. */
static int lifetime(const block *b) { return b->last - b->first + 1; }

static int cmp_area_desc(const void *pa, const void *pb)
{
    const block *a = *(const block *const *)pa, *b = *(const block *const *)pb;
    double x = (double)a->bytes * lifetime(a), y = (double)b->bytes * lifetime(b);
    if (x != y)
        return x > y ? -1 : 1;
    return cmp_size_desc(pa, pb);
}

static int cmp_lifetime_desc(const void *pa, const void *pb)
{
    const block *a = *(const block *const *)pa, *b = *(const block *const *)pb;
    if (lifetime(a) != lifetime(b))
        return lifetime(a) > lifetime(b) ? -1 : 1;
    return cmp_size_desc(pa, pb);
}

static int cmp_first_asc(const void *pa, const void *pb)
{
    const block *a = *(const block *const *)pa, *b = *(const block *const *)pb;
    if (a->first != b->first)
        return a->first < b->first ? -1 : 1;
    return cmp_size_desc(pa, pb);
}

static int cmp_offset(const void *pa, const void *pb)
{
    const block *a = *(const block *const *)pa, *b = *(const block *const *)pb;
    if (a->offset != b->offset)
        return a->offset < b->offset ? -1 : 1;
    return (a->head > b->head) - (a->head < b->head);
}

/* Tensors that a node writes in place (an update's or an all-reduce's
 * inputs): a view of one would see the write. */
static void mark_written(const ge2_graph *graph, const ge2_plan *plan, bool *written)
{
    for (int p = 0; p < plan->n_steps; p++) {
        const ge2_node *node = &graph->nodes[plan->schedule[p]];
        if (ge2_op_flags(node->op) & (GE2_OPF_OPTIMIZER | GE2_OPF_UPDATE | GE2_OPF_IN_PLACE))
            for (int i = 0; i < node->n_inputs; i++)
                written[node->inputs[i]] = true;
    }
}

/* Whether every output of node has memory in this key: an op that writes
 * output 0 over an input may need its other outputs as room meanwhile
 * (a linear input gradient that makes act(z) again puts its GEMM result
 * into act(z)'s tensor: fusion/recompute_act) */
static bool outputs_placed(const ge2_plan *plan, const ge2_node *node)
{
    for (int o = 0; o < node->n_outputs; o++)
        if (plan->tensors[node->outputs[o]].pool == GE2_POOL_NONE)
            return false;
    return true;
}

/* Chains of tensors on one memory. head[t] is the first tensor of t's
 * chain; only heads become blocks, living from the head's birth to the
 * last death in the chain (chain_last[head]).
 * - A view (GE2_OPF_VIEW: a reshape) joins its input's chain at once; both
 *   may live on, since neither is written again.
 * - An in-place takeover: an output of a node (ge2_op_over_output, output
 *   0 but for cross-entropy's gradient) joins the chain of the input its op
 *   lets it write over (ge2_op_output_over_input: input 0 of an elementwise
 *   op) when everything on that memory dies at the node (the input and any
 *   view of it), since the node writes over it. */
static void merge_chains(const ge2_graph *graph, ge2_plan *plan, int *head, int *chain_last, const bool *written)
{
    for (int t = 0; t < plan->n_tensors; t++)
        chain_last[t] = plan->tensors[t].last;
    for (int p = 0; p < plan->n_steps; p++) {
        const ge2_node *node = &graph->nodes[plan->schedule[p]];
        const unsigned flags = ge2_op_flags(node->op);
        const int over = flags & GE2_OPF_VIEW ? 0 : ge2_op_output_over_input(graph, node);
        const int taker = flags & GE2_OPF_VIEW ? 0 : ge2_op_over_output(node);
        if (over < 0 || over >= node->n_inputs || taker >= node->n_outputs ||
            (!(flags & (GE2_OPF_ELEMENTWISE | GE2_OPF_VIEW)) && !outputs_placed(plan, node)))
            continue;
        int in = node->inputs[over], out = node->outputs[taker], h = head[in];
        ge2_plan_tensor *ti = &plan->tensors[in], *to = &plan->tensors[out];
        if (ti->pool != GE2_POOL_ARENA || to->pool != GE2_POOL_ARENA || ti->bytes != to->bytes)
            continue;
        if (flags & GE2_OPF_VIEW) {
            if (written[in] || written[out])
                continue;
            to->view_of = in;
        } else if (ti->last == p && chain_last[h] <= p) {
            to->reuses = in;
        } else {
            continue;
        }
        head[out] = h;
        if (to->last > chain_last[h])
            chain_last[h] = to->last;
    }
}

/* Smallest gap free over [b->first, b->last] among placed blocks, else on top. */
static size_t best_fit(const block *b, block **placed, int n_placed, block **by_offset)
{
    int n = 0;
    for (int i = 0; i < n_placed; i++)
        if (placed[i]->first <= b->last && b->first <= placed[i]->last)
            by_offset[n++] = placed[i];
    qsort(by_offset, (size_t)n, sizeof *by_offset, cmp_offset);
    size_t cursor = 0, best = 0, best_gap = SIZE_MAX;
    for (int i = 0; i < n; i++) {
        if (by_offset[i]->offset > cursor) {
            size_t gap = by_offset[i]->offset - cursor;
            if (gap >= b->bytes && gap < best_gap) {
                best_gap = gap;
                best = cursor;
            }
        }
        size_t end = by_offset[i]->offset + by_offset[i]->bytes;
        if (end > cursor)
            cursor = end;
    }
    return best_gap != SIZE_MAX ? best : cursor;
}

/* Places the blocks in the given order, each at its best fit; the arena size. */
static size_t place(block *blocks, int n_blocks, int (*cmp)(const void *, const void *), block **order, block **by_offset)
{
    for (int i = 0; i < n_blocks; i++)
        order[i] = &blocks[i];
    qsort(order, (size_t)n_blocks, sizeof *order, cmp);
    size_t arena = 0;
    for (int i = 0; i < n_blocks; i++) {
        block *b = order[i];
        b->offset = best_fit(b, order, i, by_offset);
        if (b->offset + b->bytes > arena)
            arena = b->offset + b->bytes;
    }
    return arena;
}

/* Most aligned bytes of blocks live at one schedule position (difference
 * array), and the first position that has them. */
static size_t lower_bound(const block *blocks, int n_blocks, int n_steps, size_t *delta, int *at)
{
    for (int p = 0; p <= n_steps; p++)
        delta[p] = 0;
    for (int i = 0; i < n_blocks; i++) {
        delta[blocks[i].first] += blocks[i].bytes;
        delta[blocks[i].last + 1] -= blocks[i].bytes; /* wraps, and unwraps in the running sum */
    }
    size_t live = 0, most = 0;
    *at = 0;
    for (int p = 0; p < n_steps; p++) {
        live += delta[p];
        if (live > most) {
            most = live;
            *at = p;
        }
    }
    return most;
}

ge2_status ge2_plan_assign(const ge2_graph *graph, ge2_plan *plan)
{
    int n = plan->n_tensors;
    size_t cells = (size_t)(n > 0 ? n : 1);
    /* a block per arena chain, and one per launch with scratch */
    size_t block_cells = cells + (plan->scratch_bytes ? (size_t)plan->n_steps : 0);
    int *block_of = ge2_malloc(cells * sizeof *block_of);
    int *head = ge2_malloc(cells * sizeof *head);
    int *chain_last = ge2_malloc(cells * sizeof *chain_last);
    bool *written = ge2_calloc(cells, sizeof *written);
    block *blocks = ge2_calloc(block_cells, sizeof *blocks);
    block **order = ge2_malloc(block_cells * sizeof *order);
    block **by_offset = ge2_malloc(block_cells * sizeof *by_offset);
    size_t *best = ge2_malloc(block_cells * sizeof *best);
    size_t *delta = ge2_malloc(((size_t)plan->n_steps + 1) * sizeof *delta);
    ge2_status st = GE2_OK;
    if (!block_of || !head || !chain_last || !written || !blocks || !order || !by_offset || !best || !delta) {
        st = ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_plan: assigning %d tensors", n);
        goto done;
    }

    plan->naive_bytes = 0;
    for (int t = 0; t < n; t++) {
        head[t] = t;
        plan->tensors[t].reuses = plan->tensors[t].view_of = -1;
        if (plan->tensors[t].pool == GE2_POOL_ARENA)
            plan->naive_bytes += ge2_plan_align(plan->tensors[t].bytes ? plan->tensors[t].bytes : 1, GE2_ARENA_ALIGN);
    }
    mark_written(graph, plan, written);
    merge_chains(graph, plan, head, chain_last, written);

    /* A chain is created in tensor-id order, so its head comes first here. */
    int n_blocks = 0;
    for (int t = 0; t < n; t++) {
        const ge2_plan_tensor *pt = &plan->tensors[t];
        block_of[t] = -1;
        if (pt->pool != GE2_POOL_ARENA)
            continue;
        if (head[t] != t) { /* the chain's block: its last use is the head's chain_last */
            block_of[t] = block_of[head[t]];
            continue;
        }
        size_t bytes = ge2_plan_align(pt->bytes ? pt->bytes : 1, GE2_ARENA_ALIGN);
        blocks[n_blocks] = (block){t, pt->first, chain_last[t], bytes, 0};
        block_of[t] = n_blocks++;
    }
    const int n_tensor_blocks = n_blocks;
    for (int p = 0; plan->scratch_bytes && p < plan->n_steps; p++) {
        if (!plan->scratch_bytes[p])
            continue;
        block *b = &blocks[n_blocks++];
        *b = (block){n + p, p, p, ge2_plan_align(plan->scratch_bytes[p], GE2_ARENA_ALIGN), 0};
        plan->naive_bytes += b->bytes;
    }

    /* Greedy by size first; another order is kept only if strictly smaller. */
    static int (*const orders[])(const void *, const void *) = {cmp_size_desc, cmp_area_desc, cmp_lifetime_desc,
                                                                cmp_first_asc};
    plan->arena_bytes = SIZE_MAX;
    for (size_t k = 0; k < sizeof orders / sizeof orders[0]; k++) {
        size_t arena = place(blocks, n_blocks, orders[k], order, by_offset);
        if (arena < plan->arena_bytes) {
            plan->arena_bytes = arena;
            for (int i = 0; i < n_blocks; i++)
                best[i] = blocks[i].offset;
        }
    }
    for (int i = 0; i < n_blocks; i++)
        blocks[i].offset = best[i];
    for (int t = 0; t < n; t++)
        if (block_of[t] >= 0)
            plan->tensors[t].offset = blocks[block_of[t]].offset;
    for (int i = n_tensor_blocks; i < n_blocks; i++)
        plan->scratch_offset[blocks[i].head - n] = blocks[i].offset;
    plan->lower_bound_bytes = lower_bound(blocks, n_blocks, plan->n_steps, delta, &plan->peak_position);

done:
    ge2_free(block_of);
    ge2_free(head);
    ge2_free(chain_last);
    ge2_free(written);
    ge2_free(blocks);
    ge2_free(order);
    ge2_free(by_offset);
    ge2_free(best);
    ge2_free(delta);
    return st;
}
