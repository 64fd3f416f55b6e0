/* The public builder of the convolution family: ge2_conv2d. */
#include <string.h>

#include "ops/conv/conv.h"

ge2_conv2d_params ge2_conv2d_defaults(void)
{
    ge2_conv2d_params p = {{1, 1}, {0, 0}, {1, 1}, 1};
    return p;
}

ge2_status ge2_conv2d(ge2_graph *graph, ge2_tensor *x, ge2_tensor *w, ge2_tensor *b, const ge2_conv2d_params *params,
                      ge2_tensor **y)
{
    static const char *const what[3] = {"x", "w", "b"};
    ge2_conv2d_params p = params ? *params : ge2_conv2d_defaults();
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    for (int i = 0; i < 2; i++) {
        GE2_ATTRS(ge2_conv2d_attrs, a)->stride[i] = p.stride[i];
        GE2_ATTRS(ge2_conv2d_attrs, a)->padding[i] = p.padding[i];
        GE2_ATTRS(ge2_conv2d_attrs, a)->dilation[i] = p.dilation[i];
    }
    GE2_ATTRS(ge2_conv2d_attrs, a)->groups = p.groups;
    ge2_tensor *ts[3] = {x, w, b};
    return ge2_graph_add_forward(graph, GE2_OP_CONV2D, "ge2_conv2d", ts, what, b ? 3 : 2, 1, &a, y);
}
