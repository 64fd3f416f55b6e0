/* Launch scratch in the arena.
 *
 * Some launches need device memory only while they run: a bf16 GEMM's
 * copies of its f32 operands, cuDNN attention's workspace. Each such
 * launch's bytes become one more block of the arena, live at the launch's
 * schedule position, so the planner places them in the gaps that the
 * tensors live across that launch leave, instead of the backend holding a
 * separate buffer the size of the largest launch's need for the whole key.
 * Only the launch's own kernel uses its scratch: a fused group that an
 * implementation takes runs that implementation's kernels, which use none
 * (fusion/fusion.h), and one it declines runs node by node, each launch at
 * its own position. So the block lives at that position only.
 */
#include <string.h>

#include "graph/alloc.h"
#include "graph/error.h"
#include "planner/plan_internal.h"

void ge2_plan_drop_scratch(ge2_plan *plan)
{
    ge2_free(plan->scratch_bytes);
    ge2_free(plan->scratch_offset);
    plan->scratch_bytes = plan->scratch_offset = NULL;
}

ge2_status ge2_plan_set_scratch(const ge2_graph *graph, ge2_plan *plan, const size_t *scratch_bytes)
{
    if (!graph || !plan || !scratch_bytes)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_plan_set_scratch: graph, plan and scratch_bytes must not be NULL");
    bool any = false;
    for (int p = 0; p < plan->n_steps; p++) {
        if (scratch_bytes[p] > SIZE_MAX / 4)
            return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_plan_set_scratch: %zu bytes of scratch for node %d %s",
                             scratch_bytes[p], plan->schedule[p], ge2_op_name(graph->nodes[plan->schedule[p]].op));
        any |= scratch_bytes[p] > 0;
    }
    ge2_plan_drop_scratch(plan);
    if (any) {
        const size_t n = (size_t)plan->n_steps;
        plan->scratch_bytes = ge2_malloc(n * sizeof *plan->scratch_bytes);
        plan->scratch_offset = ge2_calloc(n, sizeof *plan->scratch_offset);
        if (!plan->scratch_bytes || !plan->scratch_offset) {
            ge2_plan_drop_scratch(plan);
            return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_plan_set_scratch: %d launches", plan->n_steps);
        }
        memcpy(plan->scratch_bytes, scratch_bytes, n * sizeof *plan->scratch_bytes);
    }
    ge2_status st = ge2_plan_assign(graph, plan);
    if (st != GE2_OK) /* assign fails before it places anything: the plan without scratch stands */
        ge2_plan_drop_scratch(plan);
    return st;
}
