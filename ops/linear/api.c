/* The public builders of the linear family: ge2_linear and ge2_matmul. Each checks its
 * arguments, fills the op's attrs and appends one node (which runs the
 * inference). */
#include <string.h>

#include "ops/linear/linear.h"

ge2_status ge2_linear(ge2_graph *graph, ge2_tensor *x, ge2_tensor *w, ge2_tensor *b, ge2_activation act, float slope,
                      ge2_tensor **y)
{
    ge2_tensor *ts[3] = {x, w, b};
    static const char *const what[3] = {"x", "w", "b"};
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    GE2_ATTRS(ge2_linear_attrs, a)->act = act;
    GE2_ATTRS(ge2_linear_attrs, a)->slope = slope;
    if ((unsigned)act >= GE2_ACT_COUNT)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_linear: unknown activation %d", (int)act);
    int n_out = ge2_linear_stash_of(act, slope) == GE2_STASH_NONE ? 1 : 2;
    return ge2_graph_add_forward(graph, GE2_OP_LINEAR, "ge2_linear", ts, what, b ? 3 : 2, n_out, &a, y);
}

ge2_status ge2_matmul(ge2_graph *graph, ge2_tensor *a, ge2_tensor *b, bool trans_a, bool trans_b, ge2_tensor **y)
{
    ge2_tensor *ts[2] = {a, b};
    static const char *const what[2] = {"a", "b"};
    ge2_attrs at;
    memset(&at, 0, sizeof at);
    GE2_ATTRS(ge2_matmul_attrs, at)->trans_a = trans_a;
    GE2_ATTRS(ge2_matmul_attrs, at)->trans_b = trans_b;
    return ge2_graph_add_forward(graph, GE2_OP_MATMUL, "ge2_matmul", ts, what, 2, 1, &at, y);
}
