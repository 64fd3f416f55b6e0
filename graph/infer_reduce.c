/* Inference of SUM and MEAN: over all elements (scalar) or one axis (dropped). */
#include "graph/graph_internal.h"

ge2_status ge2_infer_SUM(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    GE2_TRY(ge2_infer_need_float(node, &in[0], "x"));
    int axis = node->attrs.reduce.axis;
    if (axis == GE2_AXIS_ALL) {
        out[0] = (ge2_desc){in[0].dtype, ge2_shape0(), NULL};
        return GE2_OK;
    }
    /* attrs are normalized by the builder; a raw negative axis here is a bug or a bad graph */
    int a;
    GE2_TRY(ge2_infer_axis(node, &in[0], axis, &a));
    ge2_shape s = ge2_shape0();
    for (int i = 0; i < in[0].shape.ndim; i++)
        if (i != a)
            s.dim[s.ndim++] = in[0].shape.dim[i];
    out[0] = (ge2_desc){in[0].dtype, s, NULL};
    return GE2_OK;
}

ge2_status ge2_infer_MEAN(const ge2_node *node, const ge2_desc *in, ge2_desc *out) { return ge2_infer_SUM(node, in, out); }
