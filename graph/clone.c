/* ge2_graph_clone (clone.h). Nodes hold tensor ids and attrs by value, so
 * they copy as they are; tensors are copied one by one, pointing at the new
 * graph, with their constant data duplicated. */
#include <string.h>

#include "graph/alloc.h"
#include "graph/clone.h"
#include "graph/graph_internal.h"

static ge2_status clone_fail(ge2_graph *copy)
{
    ge2_graph_free(copy);
    return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_graph_clone: out of host memory");
}

ge2_status ge2_graph_clone(const ge2_graph *graph, ge2_graph **out)
{
    GE2_TRY(ge2_check_graph(graph, "ge2_graph_clone"));
    if (!out)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_graph_clone: out is NULL");
    *out = NULL;
    ge2_graph *copy = ge2_calloc(1, sizeof *copy);
    if (!copy)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_graph_clone: out of host memory");
    *copy = *graph;
    copy->tensors = NULL;
    copy->nodes = NULL;
    copy->n_tensors = copy->cap_tensors = copy->n_nodes = copy->cap_nodes = 0;
    if (graph->n_tensors > 0) {
        copy->tensors = ge2_calloc((size_t)graph->n_tensors, sizeof *copy->tensors);
        if (!copy->tensors)
            return clone_fail(copy);
        copy->cap_tensors = graph->n_tensors;
    }
    for (int i = 0; i < graph->n_tensors; i++) {
        const ge2_tensor *t = graph->tensors[i];
        ge2_tensor *c = ge2_malloc(sizeof *c);
        if (!c)
            return clone_fail(copy);
        *c = *t;
        c->graph = copy;
        c->constant_data = NULL;
        copy->tensors[copy->n_tensors++] = c; /* counted now, so a failure below frees it */
        if (t->constant_data) {
            const size_t bytes = (size_t)ge2_shape_numel(t->shape) * ge2_dtype_size(t->dtype);
            if (!(c->constant_data = ge2_malloc(bytes ? bytes : 1)))
                return clone_fail(copy);
            memcpy(c->constant_data, t->constant_data, bytes);
        }
    }
    if (graph->n_nodes > 0) {
        copy->nodes = ge2_malloc(sizeof *copy->nodes * (size_t)graph->n_nodes);
        if (!copy->nodes)
            return clone_fail(copy);
        memcpy(copy->nodes, graph->nodes, sizeof *copy->nodes * (size_t)graph->n_nodes);
        copy->n_nodes = copy->cap_nodes = graph->n_nodes;
    }
    *out = copy;
    return GE2_OK;
}
