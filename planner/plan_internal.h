/* The planner's passes, in the order ge2_plan_new runs them:
 *
 *   schedule  which nodes the key runs, in a deterministic topological order
 *   liveness  each tensor's concrete shape, interval and pool
 *   groups    the fuse pass (fusion/fusion.h): groups of nodes one kernel
 *             runs, and intervals widened to the phases of each group
 *   assign    in-place merges, arena offsets, the plan's statistics
 *
 * Private to planner/ (tests include it to check a pass on its own).
 */
#ifndef GE2_PLANNER_PLAN_INTERNAL_H
#define GE2_PLANNER_PLAN_INTERNAL_H

#include <stdint.h>

#include "planner/plan.h"

static inline size_t ge2_plan_align(size_t bytes, size_t align) { return (bytes + align - 1) / align * align; }

/* The tensor whose memory t is on: t itself, or the first tensor of the
 * in-place and view chain t joined (assign.c's merge_chains) */
static inline int ge2_plan_memory_of(const ge2_plan *plan, int t)
{
    while (plan->tensors[t].reuses >= 0 || plan->tensors[t].view_of >= 0)
        t = plan->tensors[t].reuses >= 0 ? plan->tensors[t].reuses : plan->tensors[t].view_of;
    return t;
}

/* Byte size of a tensor of this dtype and shape. */
static inline size_t ge2_plan_bytes(ge2_dtype dtype, ge2_shape shape)
{
    return (size_t)ge2_shape_numel(shape) * ge2_dtype_size(dtype);
}

/* ge2_plan_bytes without wrap-around: false when the size does not fit in
 * a quarter of the address space (room for offsets and alignment on top). */
static inline bool ge2_plan_bytes_fit(ge2_dtype dtype, ge2_shape shape, size_t *bytes)
{
    size_t n = ge2_dtype_size(dtype);
    for (int d = 0; d < shape.ndim; d++)
        if (shape.dim[d] < 0 || __builtin_mul_overflow(n, (size_t)shape.dim[d], &n) || n > SIZE_MAX / 4)
            return false;
    *bytes = n;
    return true;
}

/* True when input `slot` of the node is a shape-only reference. */
static inline bool ge2_plan_is_like_input(const ge2_node *node, int slot)
{
    return slot == 1 && (ge2_op_flags(node->op) & GE2_OPF_LIKE1);
}

/* TRAIN: every node that computes something the step keeps (outputs,
 * gradients, the optimizer update), in creation order: all of them unless
 * the user left dead ops. EVAL: the forward-phase nodes the outputs (loss,
 * metrics) depend on. Fills plan->schedule and n_steps. */
ge2_status ge2_plan_schedule(const ge2_graph *graph, ge2_plan *plan);

/* Infers the key's concrete shapes along the schedule, then fills first/last
 * and pool (offsets for the persistent pools and the IO buffer) of every
 * tensor, and plan->input_bytes. */
ge2_status ge2_plan_liveness(const ge2_graph *graph, const ge2_layout *layout, ge2_plan *plan);

/* The fuse pass over the key's schedule (the patterns in plan->key.fusions)
 * into plan->groups, and each arena tensor's interval widened to the phases
 * of the groups that use it. log: as ge2_fusion_find's (NULL: none). */
ge2_status ge2_plan_groups(const ge2_graph *graph, ge2_plan *plan, FILE *log);

/* plan->scratch_bytes from the query, before ge2_plan_assign places it
 * (scratch.c), on a plan that has none yet; left NULL when no launch asks
 * for any. */
ge2_status ge2_plan_ask_scratch(const ge2_graph *graph, ge2_plan *plan, const ge2_plan_scratch_query *query);
/* Frees the plan's launch scratch (scratch.c): none is asked for. */
void ge2_plan_drop_scratch(ge2_plan *plan);

/* Arena offsets (greedy by size, best fit, in place where allowed) and
 * arena/lower-bound/naive bytes. */
ge2_status ge2_plan_assign(const ge2_graph *graph, ge2_plan *plan);

/* What the caller reads back after a step: marked outputs, and the gradient
 * of an input asked for with ge2_require_grad. */
static inline bool ge2_plan_is_step_output(const ge2_graph *graph, const ge2_tensor *t)
{
    if (t->is_output)
        return true;
    return t->grad_of >= 0 && graph->tensors[t->grad_of]->role != GE2_ROLE_PARAMETER &&
           graph->tensors[t->grad_of]->grad == t->id;
}

#endif /* GE2_PLANNER_PLAN_INTERNAL_H */
