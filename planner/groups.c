/* The fuse pass's groups and what they mean for lifetimes.
 *
 * A group's implementation may run launches of one phase side by side that
 * the schedule runs in turn: a buffer the arena reuses after its last
 * reader in the schedule may still be read in that reader's phase while
 * another launch of the phase writes its new owner. So every arena tensor a
 * group's node reads or writes lives from the first schedule position of
 * the earliest phase that uses it to the last position of the latest one.
 * The backend's implementation checks the result again on the buffers it
 * binds. The cost is the few buffers the group could have reused; groups
 * are small by their patterns' own limits.
 *
 * The groups are the same on every backend (the matchers see nodes and
 * shapes only), so the CPU plans exactly as the CUDA backend does.
 */
#include "fusion/fusion.h"
#include "graph/alloc.h"
#include "graph/error.h"
#include "planner/plan_internal.h"

static ge2_shape plan_shape_of(const void *ctx, int id)
{
    const ge2_plan *plan = ctx;
    return plan->tensors[id].shape;
}

typedef struct widen_scratch {
    int *phase_lo, *phase_hi;     /* [n_phases] schedule positions each phase spans */
    int *first_phase, *last_phase; /* [n_tensors] phases that use the tensor (-1 / n_phases: none) */
} widen_scratch;

static void widen(const ge2_graph *graph, ge2_plan *plan, const ge2_fusion_group *g, widen_scratch *s)
{
    for (int q = 0; q < g->n_phases; q++) {
        s->phase_lo[q] = plan->n_steps;
        s->phase_hi[q] = -1;
    }
    for (int t = 0; t < plan->n_tensors; t++) {
        s->first_phase[t] = g->n_phases;
        s->last_phase[t] = -1;
    }
    for (int i = 0; i < g->count; i++) {
        const int p = g->first + i, q = g->phase_of[i];
        const ge2_node *node = &graph->nodes[plan->schedule[p]];
        s->phase_lo[q] = p < s->phase_lo[q] ? p : s->phase_lo[q];
        s->phase_hi[q] = p > s->phase_hi[q] ? p : s->phase_hi[q];
        for (int k = 0; k < node->n_inputs + node->n_outputs; k++) {
            if (k < node->n_inputs && ge2_plan_is_like_input(node, k))
                continue;
            const int t = k < node->n_inputs ? node->inputs[k] : node->outputs[k - node->n_inputs];
            s->first_phase[t] = q < s->first_phase[t] ? q : s->first_phase[t];
            s->last_phase[t] = q > s->last_phase[t] ? q : s->last_phase[t];
        }
    }
    for (int t = 0; t < plan->n_tensors; t++) {
        ge2_plan_tensor *pt = &plan->tensors[t];
        if (pt->pool != GE2_POOL_ARENA || s->last_phase[t] < 0)
            continue;
        if (s->phase_lo[s->first_phase[t]] < pt->first)
            pt->first = s->phase_lo[s->first_phase[t]];
        if (s->phase_hi[s->last_phase[t]] > pt->last)
            pt->last = s->phase_hi[s->last_phase[t]];
    }
}

ge2_status ge2_plan_groups(const ge2_graph *graph, ge2_plan *plan, FILE *log)
{
    const int n = plan->n_steps;
    const ge2_node **nodes = ge2_malloc(sizeof *nodes * (size_t)(n > 0 ? n : 1));
    if (!nodes)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_plan: fuse pass over %d nodes", n);
    for (int p = 0; p < n; p++)
        nodes[p] = &graph->nodes[plan->schedule[p]];
    const ge2_fusion_key key = {graph, nodes, n, plan_shape_of, plan};
    ge2_status st = ge2_fusion_find(&key, plan->key.fusions, log, &plan->groups, &plan->n_groups);
    ge2_free(nodes);
    GE2_TRY(st);
    int max_phases = 1;
    for (int g = 0; g < plan->n_groups; g++)
        max_phases = plan->groups[g].n_phases > max_phases ? plan->groups[g].n_phases : max_phases;
    const size_t tensors = (size_t)(plan->n_tensors > 0 ? plan->n_tensors : 1);
    widen_scratch s = {ge2_malloc(sizeof(int) * (size_t)max_phases), ge2_malloc(sizeof(int) * (size_t)max_phases),
                       ge2_malloc(sizeof(int) * tensors), ge2_malloc(sizeof(int) * tensors)};
    if (s.phase_lo && s.phase_hi && s.first_phase && s.last_phase)
        for (int g = 0; g < plan->n_groups; g++)
            widen(graph, plan, &plan->groups[g], &s);
    else
        st = ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_plan: group lifetimes of %d tensors", plan->n_tensors);
    ge2_free(s.phase_lo);
    ge2_free(s.phase_hi);
    ge2_free(s.first_phase);
    ge2_free(s.last_phase);
    return st;
}
