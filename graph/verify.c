/* The verifier: the builder keeps these invariants; this proves them for a
 * graph that may have been edited by hand (tests, tools, future passes). */
#include "graph/graph_internal.h"
#include "graph/verify.h"

static ge2_status verify_node(const ge2_graph *g, const ge2_node *node, int at)
{
    if (node->id != at || !ge2_op_def_of(node->op) || (unsigned)node->phase >= GE2_PHASE_COUNT)
        return ge2_error(GE2_ERR_GRAPH, "ge2_graph_verify: node %d has id %d, op %d, phase %d", at, node->id,
                         (int)node->op, (int)node->phase);
    const ge2_op_def *info = ge2_op_def_of(node->op);
    if (node->n_inputs < info->min_inputs || node->n_inputs > info->max_inputs || node->n_outputs < 0 ||
        node->n_outputs > info->max_outputs)
        return ge2_error(GE2_ERR_GRAPH, "ge2_graph_verify: node %d (%s) has %d inputs, %d outputs", at, info->name,
                         node->n_inputs, node->n_outputs);
    for (int i = 0; i < node->n_inputs; i++) {
        int id = node->inputs[i];
        if (id < 0 || id >= g->n_tensors)
            return ge2_error(GE2_ERR_GRAPH, "ge2_graph_verify: node %d (%s) input %d is tensor %d, not in the graph", at,
                             info->name, i, id);
        /* A producer at or after this node is a cycle (or an edge that points forward in time). */
        int p = g->tensors[id]->producer;
        if (p >= at)
            return ge2_error(GE2_ERR_GRAPH,
                             "ge2_graph_verify: cycle: node %d (%s) consumes '%s', produced by node %d, which does not "
                             "precede it",
                             at, info->name, g->tensors[id]->name, p);
        /* eval runs the forward phase alone, so it may not depend on a later phase */
        if (p >= 0 && g->nodes[p].phase > node->phase)
            return ge2_error(GE2_ERR_GRAPH, "ge2_graph_verify: node %d (%s, phase %d) consumes '%s' from node %d of a later phase %d",
                             at, info->name, (int)node->phase, g->tensors[id]->name, p, (int)g->nodes[p].phase);
    }
    for (int i = 0; i < node->n_outputs; i++) {
        int id = node->outputs[i];
        if (id < 0 || id >= g->n_tensors || g->tensors[id]->producer != at)
            return ge2_error(GE2_ERR_GRAPH, "ge2_graph_verify: node %d (%s) output %d (tensor %d) does not name it as producer",
                             at, info->name, i, id);
    }
    ge2_desc in[GE2_MAX_INPUTS], out[GE2_MAX_OUTPUTS];
    for (int i = 0; i < node->n_inputs; i++) {
        const ge2_tensor *t = g->tensors[node->inputs[i]];
        in[i] = ge2_infer_input_desc(node, i, t, t->shape);
    }
    GE2_TRY(info->infer(node, in, out));
    for (int i = 0; i < node->n_outputs; i++) {
        const ge2_tensor *t = g->tensors[node->outputs[i]];
        /* an f32 output its op may store rounded (the bf16 storage pass's) */
        const bool stored_bf16 = t->dtype == GE2_BF16 && out[i].dtype == GE2_F32 && ge2_op_stores_bf16(node, i);
        if ((t->dtype != out[i].dtype && !stored_bf16) || !ge2_shape_equal(t->shape, out[i].shape))
            return ge2_error(GE2_ERR_GRAPH, "ge2_graph_verify: node %d (%s) output '%s' is %s %s, inference says %s %s", at,
                             info->name, t->name, ge2_dtype_name(t->dtype), GE2_SHAPE_STR(t->shape),
                             ge2_dtype_name(out[i].dtype), GE2_SHAPE_STR(out[i].shape));
    }
    return GE2_OK;
}

ge2_status ge2_graph_verify(const ge2_graph *g)
{
    GE2_TRY(ge2_check_graph(g, "ge2_graph_verify"));
    for (int i = 0; i < g->n_tensors; i++) {
        const ge2_tensor *t = g->tensors[i];
        if (!t || t->id != i || t->graph != g)
            return ge2_error(GE2_ERR_GRAPH, "ge2_graph_verify: tensor slot %d holds a tensor with id %d", i,
                             t ? t->id : -1);
        if (t->producer < -1 || t->producer >= g->n_nodes || (t->producer == -1) != (t->role != GE2_ROLE_ACTIVATION))
            return ge2_error(GE2_ERR_GRAPH, "ge2_graph_verify: tensor '%s' (%s) has producer %d", t->name,
                             ge2_role_name(t->role), t->producer);
        const bool copy = t->role == GE2_ROLE_PARAMETER_COPY;
        if (copy != (t->copy_of >= 0) || t->copy_of >= g->n_tensors ||
            (copy && (g->tensors[t->copy_of]->role != GE2_ROLE_PARAMETER || t->dtype != GE2_BF16 ||
                      !ge2_shape_equal(t->shape, g->tensors[t->copy_of]->shape))))
            return ge2_error(GE2_ERR_GRAPH, "ge2_graph_verify: tensor '%s' (%s %s) is the copy of tensor %d, which "
                             "must be an f32 parameter of its shape (a copy is bf16)",
                             t->name, ge2_role_name(t->role), ge2_dtype_name(t->dtype), t->copy_of);
    }
    for (int n = 0; n < g->n_nodes; n++)
        GE2_TRY(verify_node(g, &g->nodes[n], n));
    return GE2_OK;
}
