/* Planner properties over a corpus of seeded random training graphs.
 *
 * Everything the plan claims is re-derived here from the graph alone
 * (schedule order, lifetimes, the lower bound) and the assignment is checked
 * pair by pair: two arena tensors alive at the same schedule position never
 * share a byte unless one took the other over in place. Each graph is
 * planned again with per-parameter optimizer updates, whose placement is
 * checked too: after everything they depend on, and no later; and twice
 * more with data-parallel all-reduces (flat with a bucket per gradient, and
 * per-parameter), each right after its gradients' producers and before
 * every reader of what it sums, the backward otherwise in autograd's order.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ir.h"
#include "fusion/head/pattern.h"
#include "planner/plan_internal.h"
#include "tests/planner/random_graph.h"
#include "tests/planner/suite.h"
#include "ops/ops.h"

#define CORPUS 400

static size_t align256(size_t n) { return (n + 255) / 256 * 256; }

static bool is_like_input(const ge2_node *node, int slot)
{
    return slot == 1 && (ge2_op_flags(node->op) & GE2_OPF_LIKE1);
}

/* Position of each node in the schedule, -1 if not scheduled. */
static int *positions(const ge2_graph *g, const ge2_plan *plan)
{
    int *pos = malloc(sizeof(int) * (size_t)(g->n_nodes + 1));
    for (int n = 0; n < g->n_nodes; n++)
        pos[n] = -1;
    for (int p = 0; p < plan->n_steps; p++)
        pos[plan->schedule[p]] = p;
    return pos;
}

static void check_schedule(const ge2_graph *g, const ge2_plan *plan, const int *pos)
{
    for (int p = 0; p < plan->n_steps; p++) {
        const ge2_node *node = &g->nodes[plan->schedule[p]];
        if (plan->key.mode == GE2_MODE_EVAL)
            ck_assert_int_eq(node->phase, GE2_PHASE_FORWARD);
        for (int i = 0; i < node->n_inputs; i++) {
            int producer = g->tensors[node->inputs[i]]->producer;
            if (producer >= 0 && !is_like_input(node, i)) {
                ck_assert_msg(pos[producer] >= 0 && pos[producer] < p, "node %d reads tensor %d before its producer",
                              node->id, node->inputs[i]);
            }
        }
    }
    if (plan->key.mode == GE2_MODE_TRAIN)
        ck_assert_int_eq(plan->n_steps, g->n_nodes);
}

/* The positions each launch's reads and writes count at: its own, or for a
 * launch of a head pair (fusion/head/pattern.h, paired left to right as
 * the fuse pass pairs them) the pair's whole span, since one kernel runs
 * both: reads last to its end, writes start at its start. Caller frees. */
static int *span_positions(const ge2_graph *g, const ge2_plan *plan, int **write_at)
{
    int *at = malloc(sizeof(int) * (size_t)(plan->n_steps + 1));
    *write_at = malloc(sizeof(int) * (size_t)(plan->n_steps + 1));
    for (int p = 0; p < plan->n_steps; p++)
        at[p] = (*write_at)[p] = p;
    for (int p = 0; p + 1 < plan->n_steps; p++)
        if (ge2_head_pair_of(&g->nodes[plan->schedule[p]], &g->nodes[plan->schedule[p + 1]]) != GE2_HEAD_NONE) {
            at[p] = p + 1;
            (*write_at)[p + 1] = p;
            p++;
        }
    return at;
}

/* Lifetimes from the graph: producer position (its head pair's start, if
 * in one) .. last real consumer (its head pair's end, if in one). */
static void check_liveness(const ge2_graph *g, const ge2_plan *plan, const int *pos, int *head_pairs)
{
    int *write_at;
    int *read_at = span_positions(g, plan, &write_at);
    for (int p = 0; p < plan->n_steps; p++)
        *head_pairs += read_at[p] != p;
    for (int t = 0; t < g->n_tensors; t++) {
        const ge2_plan_tensor *pt = &plan->tensors[t];
        if (pt->pool != GE2_POOL_ARENA)
            continue;
        const ge2_tensor *tensor = g->tensors[t];
        ck_assert_int_ge(tensor->producer, 0);
        ck_assert_int_eq(pt->first, write_at[pos[tensor->producer]]);
        int last = -1;
        for (int p = 0; p < plan->n_steps; p++) {
            const ge2_node *node = &g->nodes[plan->schedule[p]];
            for (int i = 0; i < node->n_inputs; i++)
                if (node->inputs[i] == t && !is_like_input(node, i) && read_at[p] > last)
                    last = read_at[p];
        }
        ck_assert_msg(last > pt->first, "arena tensor %s is never read", tensor->name);
        ck_assert_int_eq(pt->last, last);
        ck_assert_msg(!tensor->is_output, "output %s in the arena", tensor->name);
        ck_assert_uint_eq(pt->bytes, (size_t)ge2_shape_numel(pt->shape) * ge2_dtype_size(tensor->dtype));
    }
    free(read_at);
    free(write_at);
}

static bool reads(const ge2_node *node, int tensor)
{
    for (int i = 0; i < node->n_inputs; i++)
        if (node->inputs[i] == tensor && !is_like_input(node, i))
            return true;
    return false;
}

static bool is_update(const ge2_node *node) { return node->op == GE2_OP_OPTIMIZER_UPDATE && node->n_inputs > 0; }

static bool is_all_reduce(const ge2_node *node) { return node->op == GE2_OP_ALL_REDUCE; }

/* Nodes the schedule places as soon as what they wait for has run, in
 * creation order among themselves. */
static bool placed_early(const ge2_node *node) { return is_update(node) || is_all_reduce(node); }

/* The other nodes keep creation order (autograd's, in the backward): fused
 * groups match pairs in that order (the head's input and weight gradients),
 * so a group of one rank runs the kernels one process runs. */
static void check_creation_order(const ge2_graph *g, const ge2_plan *plan)
{
    int last = -1;
    for (int p = 0; p < plan->n_steps; p++) {
        const ge2_node *node = &g->nodes[plan->schedule[p]];
        if (placed_early(node))
            continue;
        ck_assert_msg(node->id > last, "node %d at %d runs after node %d, made later", node->id, p, last);
        last = node->id;
    }
}

/* A data-parallel all-reduce runs after its gradients' producers and after
 * every node made before it that reads them (a backward node wanting this
 * rank's own gradient, as batch norm's input gradient does), right after the
 * last of those (only other early-placed nodes in between), and before every
 * node made after it that reads a gradient it sums; the flat update and the
 * gradient norm, which read every gradient through the pool, after every
 * all-reduce. */
static void check_all_reduce_places(const ge2_graph *g, const ge2_plan *plan, const int *pos)
{
    int last_all_reduce = -1;
    for (int p = 0; p < plan->n_steps; p++) {
        const ge2_node *a = &g->nodes[plan->schedule[p]];
        if (!is_all_reduce(a))
            continue;
        last_all_reduce = p;
        int must_follow = -1;
        for (int i = 0; i < a->n_inputs; i++) {
            const ge2_tensor *grad = g->tensors[a->inputs[i]];
            ck_assert_msg(pos[grad->producer] < p, "all_reduce %d at %d before the producer of %s", a->id, p,
                          grad->name);
            if (pos[grad->producer] > must_follow)
                must_follow = pos[grad->producer];
            for (int q = 0; q < plan->n_steps; q++) {
                const ge2_node *r = &g->nodes[plan->schedule[q]];
                if (r == a || is_all_reduce(r) || !reads(r, grad->id))
                    continue;
                if (r->id < a->id) {
                    ck_assert_msg(q < p, "node %d, made before all_reduce %d, reads %s at %d, after it at %d", r->id,
                                  a->id, grad->name, q, p);
                    if (q > must_follow)
                        must_follow = q;
                } else {
                    ck_assert_msg(q > p, "node %d reads %s at %d, before its all_reduce at %d", r->id, grad->name, q,
                                  p);
                }
            }
        }
        for (int q = must_follow + 1; q < p; q++)
            ck_assert_msg(placed_early(&g->nodes[plan->schedule[q]]), "all_reduce %d at %d could run at %d", a->id, p,
                          must_follow + 1);
    }
    for (int p = 0; p < plan->n_steps; p++) {
        const ge2_node *n = &g->nodes[plan->schedule[p]];
        if ((n->op == GE2_OP_OPTIMIZER_UPDATE && n->n_inputs == 0) || n->op == GE2_OP_GRAD_NORM)
            ck_assert_msg(p > last_all_reduce, "the flat optimizer node %d at %d runs before an all_reduce at %d",
                          n->id, p, last_all_reduce);
    }
}

/* A per-parameter update (inputs: parameter, gradient pairs) runs after its
 * gradients' producers and after every other reader of its parameters (it
 * overwrites them), and right after the last of those: only other updates
 * in between. Data parallel (its gradients summed by an all-reduce), after
 * the last node in creation order instead, so it does not wait for its sum
 * while the backward could go on. Its gradients are arena tensors, live
 * until it has run. */
static void check_update_places(const ge2_graph *g, const ge2_plan *plan, const int *pos)
{
    int last_in_order = -1;
    for (int p = 0; p < plan->n_steps; p++)
        if (!placed_early(&g->nodes[plan->schedule[p]]))
            last_in_order = p;
    int updates = 0;
    for (int p = 0; p < plan->n_steps; p++) {
        const ge2_node *u = &g->nodes[plan->schedule[p]];
        if (!is_update(u))
            continue;
        updates++;
        int must_follow = -1;
        for (int i = 0; i < u->n_inputs; i += 2) {
            const ge2_tensor *param = g->tensors[u->inputs[i]], *grad = g->tensors[u->inputs[i + 1]];
            ck_assert_int_eq(param->role, GE2_ROLE_PARAMETER);
            ck_assert_int_eq(param->grad, grad->id);
            ck_assert_int_eq(plan->tensors[grad->id].pool, GE2_POOL_ARENA);
            ck_assert_int_ge(plan->tensors[grad->id].last, p);
            if (pos[grad->producer] > must_follow)
                must_follow = pos[grad->producer];
            for (int q = 0; q < p; q++) /* the all-reduce summing it, then the backward's end */
                if (is_all_reduce(&g->nodes[plan->schedule[q]]) && reads(&g->nodes[plan->schedule[q]], grad->id)) {
                    ck_assert_int_gt(p, last_in_order);
                    must_follow = q > must_follow ? q : must_follow;
                    must_follow = last_in_order > must_follow ? last_in_order : must_follow;
                }
            for (int q = 0; q < plan->n_steps; q++) {
                const ge2_node *r = &g->nodes[plan->schedule[q]];
                if (r != u && !is_update(r) && !is_all_reduce(r) && reads(r, param->id)) {
                    ck_assert_msg(q < p, "node %d reads %s at %d, after its update at %d", r->id, param->name, q, p);
                    if (q > must_follow)
                        must_follow = q;
                }
            }
        }
        for (int q = must_follow + 1; q < p; q++)
            ck_assert_msg(placed_early(&g->nodes[plan->schedule[q]]), "update node %d at %d could run at %d", u->id,
                          p, must_follow + 1);
    }
    int in_graph = 0;
    for (int n = 0; n < g->n_nodes; n++)
        in_graph += is_update(&g->nodes[n]);
    ck_assert_int_eq(updates, plan->key.mode == GE2_MODE_TRAIN ? in_graph : 0);
}

/* Is t written by an optimizer update or an in-place node? */
static bool written_in_place(const ge2_graph *g, const ge2_plan *plan, int t)
{
    for (int p = 0; p < plan->n_steps; p++) {
        const ge2_node *node = &g->nodes[plan->schedule[p]];
        if (ge2_op_flags(node->op) & (GE2_OPF_OPTIMIZER | GE2_OPF_UPDATE | GE2_OPF_IN_PLACE))
            for (int i = 0; i < node->n_inputs; i++)
                if (node->inputs[i] == t)
                    return true;
    }
    return false;
}

static void check_assignment(const ge2_graph *g, const ge2_plan *plan)
{
    for (int a = 0; a < g->n_tensors; a++) {
        const ge2_plan_tensor *pa = &plan->tensors[a];
        if (pa->pool != GE2_POOL_ARENA)
            continue;
        ck_assert_uint_eq(pa->offset % 256, 0);
        ck_assert_uint_le(pa->offset + pa->bytes, plan->arena_bytes);
        ck_assert(pa->reuses < 0 || pa->view_of < 0);
        if (pa->reuses >= 0) {
            const ge2_plan_tensor *src = &plan->tensors[pa->reuses];
            ck_assert_int_eq(src->pool, GE2_POOL_ARENA);
            ck_assert_uint_eq(src->offset, pa->offset);
            ck_assert_uint_eq(src->bytes, pa->bytes);
            ck_assert_int_eq(src->last, pa->first); /* dies where the output is born */
            const ge2_node *node = &g->nodes[g->tensors[a]->producer];
            const int over = ge2_op_output_over_input(g, node); /* the input its op lets it write over */
            ck_assert_int_ge(over, 0);
            ck_assert_int_eq(node->inputs[over], pa->reuses);
            /* the takeover writes the memory: nothing else on it may be read later */
            for (int m = 0; m < g->n_tensors; m++)
                if (m != a && plan->tensors[m].pool == GE2_POOL_ARENA && plan->tensors[m].first < pa->first &&
                    ge2_plan_memory_of(plan, m) == ge2_plan_memory_of(plan, a))
                    ck_assert_msg(plan->tensors[m].last <= pa->first, "%s is overwritten in place by %s at %d but "
                                  "read until %d", g->tensors[m]->name, g->tensors[a]->name, pa->first,
                                  plan->tensors[m].last);
        }
        if (pa->view_of >= 0) {
            const ge2_plan_tensor *src = &plan->tensors[pa->view_of];
            ck_assert_int_eq(src->pool, GE2_POOL_ARENA);
            ck_assert_uint_eq(src->offset, pa->offset);
            ck_assert_uint_eq(src->bytes, pa->bytes);
            const ge2_node *node = &g->nodes[g->tensors[a]->producer];
            ck_assert(ge2_op_flags(node->op) & GE2_OPF_VIEW);
            ck_assert_int_eq(node->inputs[0], pa->view_of);
            ck_assert(!written_in_place(g, plan, a) && !written_in_place(g, plan, pa->view_of));
        }
        for (int b = a + 1; b < g->n_tensors; b++) {
            const ge2_plan_tensor *pb = &plan->tensors[b];
            if (pb->pool != GE2_POOL_ARENA)
                continue;
            bool time = pa->first <= pb->last && pb->first <= pa->last;
            bool space = pa->offset < pb->offset + pb->bytes && pb->offset < pa->offset + pa->bytes;
            ck_assert_msg(!(time && space) || ge2_plan_memory_of(plan, a) == ge2_plan_memory_of(plan, b),
                          "%s [%d,%d] @%zu+%zu and %s [%d,%d] @%zu+%zu overlap", g->tensors[a]->name, pa->first,
                          pa->last, pa->offset, pa->bytes, g->tensors[b]->name, pb->first, pb->last, pb->offset,
                          pb->bytes);
        }
    }
}

/* Live aligned bytes per position, each memory once: the tensors of a
 * chain (takeovers and views) share theirs, and an in-place output is the
 * same buffer as its input at its birth position, so it counts from the
 * next one. scratch: [n_steps] launch scratch bytes, each live at its own
 * position (NULL: none). */
static size_t independent_lower_bound(const ge2_plan *plan, size_t *naive, const size_t *scratch)
{
    size_t most = 0;
    *naive = 0;
    for (int t = 0; t < plan->n_tensors; t++)
        if (plan->tensors[t].pool == GE2_POOL_ARENA)
            *naive += align256(plan->tensors[t].bytes);
    bool *counted = calloc((size_t)plan->n_tensors + 1, sizeof *counted);
    ck_assert(counted);
    for (int p = 0; p < plan->n_steps; p++) {
        size_t live = 0;
        memset(counted, 0, (size_t)plan->n_tensors * sizeof *counted);
        for (int t = 0; t < plan->n_tensors; t++) {
            const ge2_plan_tensor *pt = &plan->tensors[t];
            int from = pt->reuses >= 0 ? pt->first + 1 : pt->first, root = ge2_plan_memory_of(plan, t);
            if (pt->pool == GE2_POOL_ARENA && from <= p && p <= pt->last && !counted[root]) {
                counted[root] = true;
                live += align256(pt->bytes);
            }
        }
        live += scratch ? align256(scratch[p]) : 0;
        if (live > most)
            most = live;
    }
    free(counted);
    return most;
}

static bool plans_equal(const ge2_plan *a, const ge2_plan *b)
{
    if (a->n_steps != b->n_steps || a->arena_bytes != b->arena_bytes || a->n_tensors != b->n_tensors)
        return false;
    if (memcmp(a->schedule, b->schedule, sizeof(int) * (size_t)a->n_steps) != 0)
        return false;
    for (int t = 0; t < a->n_tensors; t++)
        if (a->tensors[t].pool != b->tensors[t].pool || a->tensors[t].offset != b->tensors[t].offset ||
            a->tensors[t].first != b->tensors[t].first || a->tensors[t].last != b->tensors[t].last ||
            a->tensors[t].reuses != b->tensors[t].reuses || a->tensors[t].view_of != b->tensors[t].view_of)
            return false;
    return true;
}

/* The scratch query of check_scratch: the bytes of a table, and how often
 * each position was asked. */
typedef struct scratch_table {
    const size_t *bytes;
    int *asked;
} scratch_table;

static size_t table_scratch(void *user, const ge2_plan *plan, int step)
{
    const scratch_table *t = user;
    ck_assert_uint_eq(plan->arena_bytes, 0); /* asked before anything is placed */
    t->asked[step]++;
    return t->bytes[step];
}

/* Launch scratch (ge2_plan_scratch_query) on a seeded quarter of the
 * launches of key's plan: each position is asked once; the tensors are
 * still placed as check_assignment wants, no scratch shares a byte with a
 * tensor live at its launch's position (a fused group's other positions
 * may reuse it: only its own kernel uses it), the lower bound counts it,
 * and a query that asks for none gives the plan without scratch. */
static void check_scratch(const ge2_graph *g, const ge2_layout *layout, const ge2_key *key, const ge2_plan *without,
                          uint64_t seed)
{
    const size_t n = (size_t)(without->n_steps > 0 ? without->n_steps : 1);
    size_t *bytes = calloc(n, sizeof *bytes);
    int *asked = calloc(n, sizeof *asked);
    ck_assert(bytes && asked);
    uint64_t state = seed * 7919u + 17u;
    size_t total_aligned = 0;
    bool any = false;
    for (int p = 0; p < without->n_steps; p++)
        if (rg_below(&state, 4) == 0) {
            bytes[p] = 1 + (size_t)rg_below(&state, 1 << 16);
            any = true;
            total_aligned += align256(bytes[p]);
        }
    scratch_table table = {bytes, asked};
    const ge2_plan_scratch_query query = {table_scratch, &table};
    ge2_plan *plan;
    ck_assert_int_eq(ge2_plan_new_dumped(g, layout, key, &query, NULL, &plan), GE2_OK);
    for (int p = 0; p < without->n_steps; p++)
        ck_assert_int_eq(asked[p], 1);
    check_assignment(g, plan);
    size_t naive, lb = independent_lower_bound(plan, &naive, bytes);
    ck_assert_uint_eq(plan->naive_bytes, naive + total_aligned);
    ck_assert_uint_eq(plan->lower_bound_bytes, lb);
    ck_assert_uint_ge(plan->arena_bytes, plan->lower_bound_bytes);
    ck_assert(any || !plan->scratch_bytes);
    for (int p = 0; p < plan->n_steps && any; p++) {
        ck_assert_uint_eq(plan->scratch_bytes[p], bytes[p]);
        if (!bytes[p])
            continue;
        const size_t at = plan->scratch_offset[p], end = at + bytes[p];
        ck_assert_uint_eq(at % 256, 0);
        ck_assert_uint_le(end, plan->arena_bytes);
        for (int t = 0; t < plan->n_tensors; t++) {
            const ge2_plan_tensor *pt = &plan->tensors[t];
            if (pt->pool != GE2_POOL_ARENA || pt->first > p || pt->last < p)
                continue;
            ck_assert_msg(end <= pt->offset || pt->offset + pt->bytes <= at,
                          "seed %llu: the scratch of position %d @%zu+%zu and %s [%d,%d] @%zu+%zu overlap",
                          (unsigned long long)seed, p, at, bytes[p], g->tensors[t]->name, pt->first, pt->last,
                          pt->offset, pt->bytes);
        }
    }
    ge2_plan_free(plan);
    memset(bytes, 0, n * sizeof *bytes);
    ck_assert_int_eq(ge2_plan_new_dumped(g, layout, key, &query, NULL, &plan), GE2_OK);
    ck_assert_ptr_null(plan->scratch_bytes);
    ck_assert_msg(plans_equal(plan, without), "seed %llu: a query that asks for no scratch changed the plan",
                  (unsigned long long)seed);
    ck_assert_uint_eq(plan->lower_bound_bytes, without->lower_bound_bytes);
    ge2_plan_free(plan);
    free(bytes);
    free(asked);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* What each random graph is planned with. */
typedef enum variant {
    NO_OPTIMIZER,
    PER_PARAMETER,
    DATA_PARALLEL_FLAT,          /* a bucket per gradient: as many all-reduces as gradients */
    DATA_PARALLEL_PER_PARAMETER, /* an all-reduce per update node */
} variant;

/* The data-parallel variants' train plans hold every all-reduce: one per
 * gradient (flat, 1-byte buckets) or per update node; other plans none. */
static void check_all_reduce_count(const ge2_graph *g, const ge2_plan *plan, variant v)
{
    int planned = 0, gradients = 0, updates = 0;
    for (int p = 0; p < plan->n_steps; p++)
        planned += is_all_reduce(&g->nodes[plan->schedule[p]]);
    for (int n = 0; n < g->n_nodes; n++)
        updates += is_update(&g->nodes[n]);
    for (int t = 0; t < g->n_tensors; t++)
        gradients += g->tensors[t]->grad_of >= 0 && g->tensors[g->tensors[t]->grad_of]->role == GE2_ROLE_PARAMETER;
    int want = 0;
    if (plan->key.mode == GE2_MODE_TRAIN && v == DATA_PARALLEL_FLAT)
        want = gradients;
    else if (plan->key.mode == GE2_MODE_TRAIN && v == DATA_PARALLEL_PER_PARAMETER)
        want = updates;
    ck_assert_int_eq(planned, want);
}

static void check_graph_plans(uint64_t seed, variant v, double *ratio, int *in_place, int *head_pairs)
{
    rg_graph rg;
    ck_assert_int_eq(rg_build(seed, true, &rg), GE2_OK);
    if (v != NO_OPTIMIZER) {
        ge2_optimizer_config sgd = ge2_optimizer_defaults(GE2_OPT_SGD);
        sgd.update_mode = v == DATA_PARALLEL_FLAT ? GE2_UPDATE_FLAT : GE2_UPDATE_PER_PARAMETER;
        sgd.data_parallel = v == DATA_PARALLEL_FLAT || v == DATA_PARALLEL_PER_PARAMETER;
        sgd.bucket_bytes = 1;
        ck_assert_msg(ge2_optimizer(rg.graph, &sgd) == GE2_OK, "seed %llu: %s", (unsigned long long)seed,
                      ge2_last_error());
    }
    const ge2_graph *g = rg.graph;
    ge2_layout *layout;
    ck_assert_int_eq(ge2_layout_new(g, &layout), GE2_OK);
    for (int m = 0; m < GE2_MODE_COUNT; m++) {
        ge2_key key;
        ck_assert_int_eq(ge2_key_init(g, (ge2_mode)m, &key), GE2_OK);
        ge2_plan *plan, *again;
        ck_assert_int_eq(ge2_plan_new(g, layout, &key, &plan), GE2_OK);
        ck_assert_int_eq(ge2_plan_new(g, layout, &key, &again), GE2_OK);
        int *pos = positions(g, plan);
        check_schedule(g, plan, pos);
        check_liveness(g, plan, pos, head_pairs);
        check_update_places(g, plan, pos);
        check_all_reduce_places(g, plan, pos);
        check_creation_order(g, plan);
        check_all_reduce_count(g, plan, v);
        check_assignment(g, plan);
        size_t naive, lb = independent_lower_bound(plan, &naive, NULL);
        ck_assert_uint_eq(plan->lower_bound_bytes, lb);
        ck_assert_uint_eq(plan->naive_bytes, naive);
        ck_assert_uint_ge(plan->arena_bytes, plan->lower_bound_bytes);
        ck_assert_uint_le(plan->arena_bytes, plan->naive_bytes);
        ck_assert_msg(plans_equal(plan, again), "seed %llu: same graph, different plan", (unsigned long long)seed);
        check_scratch(g, layout, &key, plan, seed * GE2_MODE_COUNT + (uint64_t)m);
        if (m == GE2_MODE_TRAIN) {
            *ratio = lb ? (double)plan->arena_bytes / (double)lb : 1.0;
            for (int t = 0; t < plan->n_tensors; t++)
                *in_place += plan->tensors[t].reuses >= 0;
        }
        free(pos);
        ge2_plan_free(plan);
        ge2_plan_free(again);
    }
    ge2_layout_free(layout);
    rg_free(&rg);
}

START_TEST(test_random_corpus)
{
    static double ratios[CORPUS];
    int in_place = 0, head_pairs = 0;
    for (int i = 0; i < CORPUS; i++) {
        double other_ratio;
        int other_in_place = 0;
        check_graph_plans((uint64_t)i + 1, NO_OPTIMIZER, &ratios[i], &in_place, &head_pairs);
        check_graph_plans((uint64_t)i + 1, PER_PARAMETER, &other_ratio, &other_in_place, &head_pairs);
        check_graph_plans((uint64_t)i + 1, DATA_PARALLEL_FLAT, &other_ratio, &other_in_place, &head_pairs);
        check_graph_plans((uint64_t)i + 1, DATA_PARALLEL_PER_PARAMETER, &other_ratio, &other_in_place, &head_pairs);
    }
    qsort(ratios, CORPUS, sizeof ratios[0], cmp_double);
    int above = 0;
    for (int i = 0; i < CORPUS; i++)
        above += ratios[i] > 1.05;
    printf("plan_property_test: %d random train graphs: arena/lower bound median %.4f, p90 %.4f, worst %.4f, "
           "%d above 1.05; %d in-place outputs; %d head pairs\n",
           CORPUS, ratios[CORPUS / 2], ratios[CORPUS * 9 / 10], ratios[CORPUS - 1], above, in_place, head_pairs);
    fflush(stdout);
    ck_assert_int_gt(in_place, 0);   /* the corpus exercises in-place reuse */
    ck_assert_int_gt(head_pairs, 0); /* and head pairs' lifetimes */
}
END_TEST

/* The same graph built twice (two graph objects) plans identically. */
START_TEST(test_rebuilt_graph_same_plan)
{
    rg_graph a, b;
    ck_assert_int_eq(rg_build(77, true, &a), GE2_OK);
    ck_assert_int_eq(rg_build(77, true, &b), GE2_OK);
    ge2_layout *la, *lb;
    ck_assert_int_eq(ge2_layout_new(a.graph, &la), GE2_OK);
    ck_assert_int_eq(ge2_layout_new(b.graph, &lb), GE2_OK);
    ge2_key ka, kb;
    ck_assert_int_eq(ge2_key_init(a.graph, GE2_MODE_TRAIN, &ka), GE2_OK);
    ck_assert_int_eq(ge2_key_init(b.graph, GE2_MODE_TRAIN, &kb), GE2_OK);
    ck_assert(ge2_key_equal(&ka, &kb));
    ge2_plan *pa, *pb;
    ck_assert_int_eq(ge2_plan_new(a.graph, la, &ka, &pa), GE2_OK);
    ck_assert_int_eq(ge2_plan_new(b.graph, lb, &kb, &pb), GE2_OK);
    ck_assert(plans_equal(pa, pb));
    ge2_plan_free(pa);
    ge2_plan_free(pb);
    ge2_layout_free(la);
    ge2_layout_free(lb);
    rg_free(&a);
    rg_free(&b);
}
END_TEST

/* Keys: the hash and equality see the mode and every feed dim, nothing else. */
START_TEST(test_keys)
{
    rg_graph rg;
    ck_assert_int_eq(rg_build(5, true, &rg), GE2_OK);
    ge2_key train, eval, smaller, same;
    ck_assert_int_eq(ge2_key_init(rg.graph, GE2_MODE_TRAIN, &train), GE2_OK);
    ck_assert_int_eq(ge2_key_init(rg.graph, GE2_MODE_EVAL, &eval), GE2_OK);
    ck_assert_int_eq(train.n_feeds, rg.label ? 2 : 1);
    ck_assert_int_eq(train.feed_ids[0], rg.x->id);
    ck_assert(!ge2_key_equal(&train, &eval));
    ck_assert(train.hash != eval.hash);
    smaller = train;
    smaller.feed_shapes[0].dim[0] -= 1;
    ge2_key_rehash(&smaller);
    ck_assert(!ge2_key_equal(&train, &smaller));
    same = train;
    same.feed_shapes[0].dim[3] = 12345; /* beyond ndim: not part of the key */
    ge2_key_rehash(&same);
    ck_assert(ge2_key_equal(&train, &same));
    rg_free(&rg);
}
END_TEST

/* EVAL drops the backward and leaves outputs nobody reads without memory. */
START_TEST(test_eval_unread_outputs_get_no_memory)
{
    ge2_graph *g;
    ge2_tensor *x, *y, *w, *logits, *loss;
    ck_assert_int_eq(ge2_graph_new(&g), GE2_OK);
    ck_assert_int_eq(ge2_input(g, "x", GE2_F32, ge2_shape2(8, 16), &x), GE2_OK);
    ck_assert_int_eq(ge2_label(g, "y", GE2_I32, ge2_shape1(8), &y), GE2_OK);
    ge2_init init = {GE2_INIT_LINEAR_DEFAULT, 0, 0, 0};
    ck_assert_int_eq(ge2_parameter(g, "w", GE2_F32, ge2_shape2(4, 16), init, &w), GE2_OK);
    ck_assert_int_eq(ge2_linear(g, x, w, NULL, GE2_ACT_NONE, 0, &logits), GE2_OK);
    ck_assert_int_eq(ge2_cross_entropy(g, logits, y, 0, &loss), GE2_OK);
    ck_assert_int_eq(ge2_backward(g, loss), GE2_OK);
    ge2_layout *layout;
    ck_assert_int_eq(ge2_layout_new(g, &layout), GE2_OK);
    ge2_key key;
    ck_assert_int_eq(ge2_key_init(g, GE2_MODE_EVAL, &key), GE2_OK);
    ge2_plan *plan;
    ck_assert_int_eq(ge2_plan_new(g, layout, &key, &plan), GE2_OK);
    const ge2_node *ce = &g->nodes[loss->producer];
    ck_assert_int_eq(ce->n_outputs, 2);
    ck_assert_int_eq(plan->tensors[ce->outputs[1]].pool, GE2_POOL_NONE); /* dlogits */
    ck_assert_int_eq(plan->tensors[loss->id].pool, GE2_POOL_INPUTS);     /* outputs live in the IO buffer */
    ck_assert_int_eq(plan->tensors[ge2_grad(w)->id].pool, GE2_POOL_NONE);
    ck_assert_int_eq(plan->n_steps, 2);
    ge2_plan_free(plan);
    ck_assert_int_eq(ge2_key_init(g, GE2_MODE_TRAIN, &key), GE2_OK);
    ck_assert_int_eq(ge2_plan_new(g, layout, &key, &plan), GE2_OK);
    ck_assert_int_eq(plan->tensors[ge2_grad(w)->id].pool, GE2_POOL_GRADS);
    ck_assert_uint_eq(plan->tensors[ge2_grad(w)->id].offset, layout->offset[w->id]);
    ck_assert_int_eq(plan->tensors[ce->outputs[1]].pool, GE2_POOL_ARENA);
    ge2_plan_free(plan);

    /* A batch whose activations would not fit in memory: an error naming the tensor, no wrap-around. */
    key.feed_shapes[0].dim[0] = key.feed_shapes[1].dim[0] = INT64_MAX / 64;
    ge2_key_rehash(&key);
    ck_assert_int_eq(ge2_plan_new(g, layout, &key, &plan), GE2_ERR_SHAPE);
    ck_assert_msg(strstr(ge2_last_error(), "too large"), "%s", ge2_last_error());
    ge2_layout_free(layout);
    ge2_graph_free(g);
}
END_TEST

/* An op whose result nobody reads or asked for (an unmarked metric) is not
 * scheduled in either mode, so no kernel is handed a NULL output. */
START_TEST(test_dead_op_dropped)
{
    ge2_graph *g;
    ge2_tensor *x, *y, *w, *logits, *loss, *correct;
    ck_assert_int_eq(ge2_graph_new(&g), GE2_OK);
    ck_assert_int_eq(ge2_input(g, "x", GE2_F32, ge2_shape2(8, 16), &x), GE2_OK);
    ck_assert_int_eq(ge2_label(g, "y", GE2_I32, ge2_shape1(8), &y), GE2_OK);
    ge2_init init = {GE2_INIT_LINEAR_DEFAULT, 0, 0, 0};
    ck_assert_int_eq(ge2_parameter(g, "w", GE2_F32, ge2_shape2(4, 16), init, &w), GE2_OK);
    ck_assert_int_eq(ge2_linear(g, x, w, NULL, GE2_ACT_NONE, 0, &logits), GE2_OK);
    ck_assert_int_eq(ge2_cross_entropy(g, logits, y, 0, &loss), GE2_OK);
    ck_assert_int_eq(ge2_accuracy(g, logits, y, &correct), GE2_OK); /* never marked */
    ck_assert_int_eq(ge2_backward(g, loss), GE2_OK);
    ge2_layout *layout;
    ck_assert_int_eq(ge2_layout_new(g, &layout), GE2_OK);
    for (int m = 0; m < GE2_MODE_COUNT; m++) {
        ge2_key key;
        ge2_plan *plan;
        ck_assert_int_eq(ge2_key_init(g, (ge2_mode)m, &key), GE2_OK);
        ck_assert_int_eq(ge2_plan_new(g, layout, &key, &plan), GE2_OK);
        for (int p = 0; p < plan->n_steps; p++)
            ck_assert_int_ne(plan->schedule[p], correct->producer);
        ck_assert_int_eq(plan->tensors[correct->id].pool, GE2_POOL_NONE);
        if (m == GE2_MODE_TRAIN)
            ck_assert_int_eq(plan->n_steps, g->n_nodes - 1);
        ge2_plan_free(plan);
    }
    ge2_layout_free(layout);
    ge2_graph_free(g);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {
        test_random_corpus,
        test_rebuilt_graph_same_plan,
        test_keys,
        test_eval_unread_outputs_get_no_memory,
        test_dead_op_dropped,
    };
    return planner_run_tests("plan_property", tests, (int)(sizeof tests / sizeof tests[0]), 120);
}
