/* Inference of the dropout family: y is like x (and like plus, the
 * forward's optional addend). */
#include "ops/dropout/dropout.h"

ge2_status ge2_infer_DROPOUT(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    GE2_TRY(ge2_infer_need_outputs(node, 1, 1));
    GE2_TRY(ge2_infer_need_float(node, &in[0], "x"));
    if (node->n_inputs > 1) {
        GE2_TRY(ge2_infer_need_same_dtype(node, &in[0], &in[1]));
        GE2_TRY(ge2_infer_need_same_shape(node, &in[0], &in[1]));
    }
    const double p = GE2_ATTRS(ge2_dropout_attrs, node->attrs)->p;
    if (!(p >= 0 && p < 1))
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, GE2_OP_PREFIX "%s: p %g must be in [0, 1)", ge2_op_name(node->op), p);
    out[0] = (ge2_desc){in[0].dtype, in[0].shape, NULL};
    return GE2_OK;
}
