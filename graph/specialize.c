/* Shape inference over a whole graph with new feed shapes. Infer functions
 * see only descriptors and attrs, so re-running them is all it takes. */
#include "graph/graph_internal.h"
#include "graph/specialize.h"

ge2_status ge2_graph_infer_shapes(const ge2_graph *g, const ge2_shape *feed_shapes, ge2_shape *out_shapes)
{
    GE2_TRY(ge2_check_graph(g, "ge2_graph_infer_shapes"));
    if (!out_shapes)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_graph_infer_shapes: out_shapes is NULL");
    for (int i = 0; i < g->n_tensors; i++) {
        const ge2_tensor *t = g->tensors[i];
        out_shapes[i] = t->shape;
        bool feed = t->role == GE2_ROLE_INPUT || t->role == GE2_ROLE_LABEL;
        if (!feed || !feed_shapes || feed_shapes[i].ndim <= 0)
            continue;
        if (feed_shapes[i].ndim != t->shape.ndim || !ge2_shape_valid(feed_shapes[i]))
            return ge2_error(GE2_ERR_SHAPE, "ge2_graph_infer_shapes: feed for '%s' is %s, built as %s", t->name,
                             GE2_SHAPE_STR(feed_shapes[i]), GE2_SHAPE_STR(t->shape));
        out_shapes[i] = feed_shapes[i];
    }
    for (int n = 0; n < g->n_nodes; n++) {
        const ge2_node *node = &g->nodes[n];
        ge2_desc in[GE2_MAX_INPUTS], out[GE2_MAX_OUTPUTS];
        for (int i = 0; i < node->n_inputs; i++) {
            const ge2_tensor *t = g->tensors[node->inputs[i]];
            in[i] = ge2_infer_input_desc(node, i, t, out_shapes[t->id]);
        }
        GE2_TRY(ge2_op_def_of(node->op)->infer(node, in, out));
        for (int i = 0; i < node->n_outputs; i++)
            out_shapes[node->outputs[i]] = out[i].shape;
    }
    return GE2_OK;
}
