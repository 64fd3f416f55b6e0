/* The public builder of the dropout family. */
#include <string.h>

#include "ops/dropout/dropout.h"

ge2_status ge2_dropout(ge2_graph *graph, ge2_tensor *x, double p, ge2_tensor **y)
{
    if (!graph)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_dropout: graph must not be NULL");
    static const char *const what[1] = {"x"};
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    GE2_ATTRS(ge2_dropout_attrs, a)->p = p;
    /* the node's id when made: unique in the graph, and kept in the attrs
     * when a later rewrite renumbers the nodes */
    GE2_ATTRS(ge2_dropout_attrs, a)->stream = (uint32_t)graph->n_nodes;
    return ge2_graph_add_forward(graph, GE2_OP_DROPOUT, "ge2_dropout", &x, what, 1, 1, &a, y);
}
