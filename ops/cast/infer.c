/* Inference of CAST: y has x's shape and the node's dtype. */
#include "ops/cast/cast.h"

ge2_status ge2_infer_CAST(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    GE2_TRY(ge2_infer_need_outputs(node, 1, 1));
    const ge2_dtype to = ge2_cast_to(node);
    if (!ge2_cast_supported(in[0].dtype, to))
        return ge2_error(GE2_ERR_DTYPE, GE2_OP_PREFIX "cast: x is %s, to %s; a cast takes f32 or f64 to bf16, or bf16 "
                                        "to f32 or f64",
                         ge2_dtype_name(in[0].dtype), ge2_dtype_name(to));
    out[0] = (ge2_desc){to, in[0].shape, NULL};
    return GE2_OK;
}
