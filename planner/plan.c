/* ge2_plan_new: the planner's passes in order (see plan_internal.h), each
 * optionally dumped as it finishes. */
#include "graph/alloc.h"
#include "graph/error.h"
#include "planner/plan_internal.h"

static void dump_schedule(const ge2_graph *graph, const ge2_plan *plan, FILE *dump)
{
    fprintf(dump, "-- pass schedule: %d nodes\n", plan->n_steps);
    for (int p = 0; p < plan->n_steps; p++) {
        const ge2_node *node = &graph->nodes[plan->schedule[p]];
        fprintf(dump, "  %3d: node %d %s\n", p, node->id, ge2_op_name(node->op));
    }
}

ge2_status ge2_plan_new(const ge2_graph *graph, const ge2_layout *layout, const ge2_key *key, ge2_plan **out)
{
    return ge2_plan_new_dumped(graph, layout, key, NULL, NULL, out);
}

ge2_status ge2_plan_new_dumped(const ge2_graph *graph, const ge2_layout *layout, const ge2_key *key,
                               const ge2_plan_scratch_query *scratch, FILE *dump, ge2_plan **out)
{
    if (!graph || !layout || !key || !out)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_plan_new: graph, layout, key and out must not be NULL");
    *out = NULL;
    if (layout->n_tensors > graph->n_tensors)
        return ge2_error(GE2_ERR_STATE, "ge2_plan_new: layout has %d tensors, graph %d", layout->n_tensors,
                         graph->n_tensors);
    ge2_plan *plan = ge2_calloc(1, sizeof *plan);
    if (!plan)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_plan_new: plan");
    plan->key = *key;
    plan->n_tensors = graph->n_tensors;
    plan->tensors = ge2_calloc((size_t)(graph->n_tensors > 0 ? graph->n_tensors : 1), sizeof *plan->tensors);
    ge2_status st = plan->tensors ? GE2_OK : ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_plan_new: %d tensors", graph->n_tensors);
    if (st == GE2_OK)
        st = ge2_plan_schedule(graph, plan);
    if (st == GE2_OK && dump)
        dump_schedule(graph, plan, dump);
    if (st == GE2_OK)
        st = ge2_plan_liveness(graph, layout, plan);
    if (st == GE2_OK && dump)
        fprintf(dump, "-- pass fuse\n");
    if (st == GE2_OK)
        st = ge2_plan_groups(graph, plan, dump);
    if (st == GE2_OK && scratch)
        st = ge2_plan_ask_scratch(graph, plan, scratch);
    if (st == GE2_OK)
        st = ge2_plan_assign(graph, plan);
    if (st == GE2_OK && dump) {
        fprintf(dump, "-- pass plan\n");
        ge2_plan_report(plan, graph, dump);
    }
    if (st != GE2_OK) {
        ge2_plan_free(plan);
        return st;
    }
    *out = plan;
    return GE2_OK;
}

void ge2_plan_free(ge2_plan *plan)
{
    if (!plan)
        return;
    ge2_free(plan->schedule);
    ge2_fusion_groups_free(plan->groups, plan->n_groups);
    ge2_free(plan->tensors);
    ge2_plan_drop_scratch(plan);
    ge2_free(plan);
}
