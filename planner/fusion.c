/* Lifetimes for a backend that runs several of a key's launches at once.
 *
 * The CUDA backend runs a small MLP's whole training step as one kernel
 * (kernels/cuda/mlp_step.h) whose phases run launches side by side that the
 * schedule runs in turn: a buffer the arena reuses after its last reader in
 * the schedule may still be read in that reader's phase while another launch
 * of the phase writes its new owner. So when the key is such a step
 * (kernels/mlp_step_pattern.h, backend-independent: the CPU plans the same),
 * every arena tensor lives from the first schedule position of the earliest
 * phase that uses it to the last position of the latest one. The kernel's
 * matcher checks the result again on the buffers it binds.
 *
 * The cost is the few buffers the step could have reused; such steps are
 * small by definition (every GEMM within GE2_MLP_STEP_MAX_FMAS).
 *
 * A key that runs its launches one by one may still run a classifier
 * head's launch pairs as one kernel each (kernels/head_pattern.h): there
 * every arena tensor either launch of a pair reads lives through both, so
 * the second's outputs never take the first's inputs' bytes. The cost is a
 * relu mask or a logits buffer kept one position longer.
 */
#include "graph/alloc.h"
#include "graph/error.h"
#include "kernels/head_pattern.h"
#include "kernels/mlp_step_pattern.h"
#include "planner/plan_internal.h"

static ge2_shape plan_shape_of(const void *ctx, int id)
{
    const ge2_plan *plan = ctx;
    return plan->tensors[id].shape;
}

/* Widens every arena tensor to the positions of the phases that use it. */
static void widen(const ge2_graph *graph, ge2_plan *plan, const ge2_mlp_step_pattern *pat, int *phase_lo,
                  int *phase_hi, int *first_phase, int *last_phase)
{
    for (int q = 0; q < pat->n_phases; q++) {
        phase_lo[q] = plan->n_steps;
        phase_hi[q] = -1;
    }
    for (int t = 0; t < plan->n_tensors; t++) {
        first_phase[t] = pat->n_phases;
        last_phase[t] = -1;
    }
    for (int p = 0; p < plan->n_steps; p++) {
        const ge2_node *node = &graph->nodes[plan->schedule[p]];
        const int q = ge2_mlp_step_phase_of(pat, p);
        phase_lo[q] = p < phase_lo[q] ? p : phase_lo[q];
        phase_hi[q] = p > phase_hi[q] ? p : phase_hi[q];
        for (int k = 0; k < node->n_inputs + node->n_outputs; k++) {
            if (k < node->n_inputs && ge2_plan_is_like_input(node, k))
                continue;
            const int t = k < node->n_inputs ? node->inputs[k] : node->outputs[k - node->n_inputs];
            first_phase[t] = q < first_phase[t] ? q : first_phase[t];
            last_phase[t] = q > last_phase[t] ? q : last_phase[t];
        }
    }
    for (int t = 0; t < plan->n_tensors; t++) {
        ge2_plan_tensor *pt = &plan->tensors[t];
        if (pt->pool != GE2_POOL_ARENA || last_phase[t] < 0)
            continue;
        if (phase_lo[first_phase[t]] < pt->first)
            pt->first = phase_lo[first_phase[t]];
        if (phase_hi[last_phase[t]] > pt->last)
            pt->last = phase_hi[last_phase[t]];
    }
}

/* Every arena tensor a head pair at p, p + 1 reads lives through p + 1. */
static void widen_head_pairs(const ge2_graph *graph, ge2_plan *plan)
{
    for (int p = 0; p + 1 < plan->n_steps; p++) {
        const ge2_node *a = &graph->nodes[plan->schedule[p]], *b = &graph->nodes[plan->schedule[p + 1]];
        if (ge2_head_pair_of(a, b) == GE2_HEAD_NONE)
            continue;
        for (int k = 0; k < 2; k++) {
            const ge2_node *node = k ? b : a;
            for (int i = 0; i < node->n_inputs; i++) {
                ge2_plan_tensor *pt = &plan->tensors[node->inputs[i]];
                if (pt->pool == GE2_POOL_ARENA && !ge2_plan_is_like_input(node, i) && pt->last < p + 1)
                    pt->last = p + 1;
            }
        }
        p++;
    }
}

ge2_status ge2_plan_fusion_lifetimes(const ge2_graph *graph, ge2_plan *plan)
{
    const int n = plan->n_steps;
    const ge2_node **nodes = ge2_malloc(sizeof *nodes * (size_t)(n > 0 ? n : 1));
    if (!nodes)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_plan: fusion lifetimes of %d nodes", n);
    for (int p = 0; p < n; p++)
        nodes[p] = &graph->nodes[plan->schedule[p]];
    ge2_mlp_step_pattern pat;
    char why[160];
    const bool step = ge2_mlp_step_pattern_find(nodes, n, plan_shape_of, plan, &pat, why, sizeof why);
    ge2_free(nodes);
    if (!step) {
        widen_head_pairs(graph, plan); /* launches run one by one, but for head pairs */
        return GE2_OK;
    }
    const size_t tensors = (size_t)(plan->n_tensors > 0 ? plan->n_tensors : 1);
    int *phase_lo = ge2_malloc(sizeof(int) * (size_t)pat.n_phases);
    int *phase_hi = ge2_malloc(sizeof(int) * (size_t)pat.n_phases);
    int *first_phase = ge2_malloc(sizeof(int) * tensors);
    int *last_phase = ge2_malloc(sizeof(int) * tensors);
    ge2_status st = GE2_OK;
    if (phase_lo && phase_hi && first_phase && last_phase)
        widen(graph, plan, &pat, phase_lo, phase_hi, first_phase, last_phase);
    else
        st = ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_plan: fusion lifetimes of %d tensors", plan->n_tensors);
    ge2_free(phase_lo);
    ge2_free(phase_hi);
    ge2_free(first_phase);
    ge2_free(last_phase);
    return st;
}
