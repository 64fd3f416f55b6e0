/* The optimizer ops work on the flat pools: no tensor inputs, no outputs. */
#include "graph/graph_internal.h"

ge2_status ge2_infer_GRAD_NORM(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    (void)node, (void)in, (void)out;
    return GE2_OK;
}

ge2_status ge2_infer_OPTIMIZER_UPDATE(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    return ge2_infer_GRAD_NORM(node, in, out);
}
