/* The public builder of the embedding family. */
#include "ops/embedding/embedding.h"

ge2_status ge2_embedding(ge2_graph *graph, ge2_tensor *ids, ge2_tensor *table, ge2_tensor **y)
{
    static const char *const what[2] = {"table", "ids"};
    ge2_tensor *ts[2] = {table, ids};
    return ge2_graph_add_forward(graph, GE2_OP_EMBEDDING, "ge2_embedding", ts, what, 2, 1, NULL, y);
}
