/* The optimizer ops work on the flat pools and make no outputs. A
 * per-parameter OPTIMIZER_UPDATE names its (parameter, gradient) pairs as
 * inputs: each pair must be two f32 tensors of one shape. */
#include "ops/optimizer/optimizer.h"

ge2_status ge2_infer_GRAD_NORM(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    (void)node, (void)in, (void)out;
    return GE2_OK;
}

ge2_status ge2_infer_OPTIMIZER_UPDATE(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    (void)out;
    if (node->n_inputs % 2)
        return ge2_error(GE2_ERR_GRAPH, "ge2_optimizer_update: takes (parameter, gradient) pairs, got %d inputs",
                         node->n_inputs);
    for (int i = 0; i < node->n_inputs; i += 2) {
        const ge2_desc *p = &in[i], *g = &in[i + 1];
        if (p->dtype != GE2_F32 || g->dtype != GE2_F32 || !ge2_shape_equal(p->shape, g->shape))
            return ge2_error(GE2_ERR_SHAPE,
                             "ge2_optimizer_update: parameter '%s' is %s %s, its gradient '%s' %s %s; both must be "
                             "f32 of one shape",
                             p->name, ge2_dtype_name(p->dtype), GE2_SHAPE_STR(p->shape), g->name,
                             ge2_dtype_name(g->dtype), GE2_SHAPE_STR(g->shape));
    }
    return GE2_OK;
}
