/* The all-reduce sums f32 gradients in place: it checks them and makes nothing. */
#include "ops/collective/collective.h"

ge2_status ge2_infer_ALL_REDUCE(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    (void)out;
    for (int i = 0; i < node->n_inputs; i++)
        if (in[i].dtype != GE2_F32)
            return ge2_error(GE2_ERR_DTYPE, "ge2_all_reduce: gradient '%s' is %s %s; the all-reduce sums f32",
                             in[i].name, ge2_dtype_name(in[i].dtype), GE2_SHAPE_STR(in[i].shape));
    return GE2_OK;
}
