/* Backward of EMBEDDING: the table's gradient is EMBEDDING_BACKWARD; the
 * ids, integers, have none. */
#include <string.h>

#include "ops/embedding/embedding.h"

ge2_status ge2_backward_embedding(ge2_autograd *ag, const ge2_node *node, const int *dy)
{
    int table = node->inputs[0], ids = node->inputs[1], d, g;
    if (!ge2_ag_wants(ag, table))
        return GE2_OK;
    GE2_TRY(ge2_ag_dy_tensor(ag, dy[0], &d));
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    GE2_ATTRS(ge2_embedding_attrs, a)->rows = ag->graph->tensors[table]->shape.dim[0];
    int in[2] = {d, ids};
    GE2_TRY(ge2_ag_emit(ag, GE2_OP_EMBEDDING_BACKWARD, in, 2, &a, &g));
    return ge2_ag_accumulate(ag, table, g);
}
