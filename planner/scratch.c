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

ge2_status ge2_plan_ask_scratch(const ge2_graph *graph, ge2_plan *plan, const ge2_plan_scratch_query *query)
{
    if (!query->bytes || plan->n_steps <= 0)
        return GE2_OK;
    const size_t n = (size_t)plan->n_steps;
    size_t *bytes = ge2_malloc(n * sizeof *bytes);
    if (!bytes)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_plan_new: the scratch of %d launches", plan->n_steps);
    bool any = false;
    for (int p = 0; p < plan->n_steps; p++) {
        bytes[p] = query->bytes(query->user, plan, p);
        if (bytes[p] > SIZE_MAX / 4) {
            const int node = plan->schedule[p];
            ge2_status st = ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_plan_new: %zu bytes of scratch for node %d %s",
                                      bytes[p], node, ge2_op_name(graph->nodes[node].op));
            ge2_free(bytes);
            return st;
        }
        any |= bytes[p] > 0;
    }
    size_t *offsets = any ? ge2_calloc(n, sizeof *offsets) : NULL;
    if (!any || !offsets) {
        ge2_free(bytes);
        return any ? ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_plan_new: the scratch of %d launches", plan->n_steps)
                   : GE2_OK;
    }
    plan->scratch_bytes = bytes;
    plan->scratch_offset = offsets;
    return GE2_OK;
}
