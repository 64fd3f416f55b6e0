/* The public builders of the elementwise family: ge2_add, ge2_sub, ge2_mul, ge2_scale and ge2_activate. Each checks its
 * arguments, fills the op's attrs and appends one node (which runs the
 * inference). */
#include <string.h>

#include "ops/elementwise/elementwise.h"

static const char *const unary_what[1] = {"x"};

static const char *const binary_what[2] = {"a", "b"};

ge2_status ge2_add(ge2_graph *graph, ge2_tensor *a, ge2_tensor *b, ge2_tensor **y)
{
    ge2_tensor *ts[2] = {a, b};
    return ge2_graph_add_forward(graph, GE2_OP_ADD, "ge2_add", ts, binary_what, 2, 1, NULL, y);
}

ge2_status ge2_sub(ge2_graph *graph, ge2_tensor *a, ge2_tensor *b, ge2_tensor **y)
{
    ge2_tensor *ts[2] = {a, b};
    return ge2_graph_add_forward(graph, GE2_OP_SUB, "ge2_sub", ts, binary_what, 2, 1, NULL, y);
}

ge2_status ge2_mul(ge2_graph *graph, ge2_tensor *a, ge2_tensor *b, ge2_tensor **y)
{
    ge2_tensor *ts[2] = {a, b};
    return ge2_graph_add_forward(graph, GE2_OP_MUL, "ge2_mul", ts, binary_what, 2, 1, NULL, y);
}

ge2_status ge2_scale(ge2_graph *graph, ge2_tensor *x, double alpha, ge2_tensor **y)
{
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    GE2_ATTRS(ge2_scale_attrs, a)->alpha = alpha;
    return ge2_graph_add_forward(graph, GE2_OP_SCALE, "ge2_scale", &x, unary_what, 1, 1, &a, y);
}

ge2_status ge2_activate(ge2_graph *graph, ge2_tensor *x, ge2_activation act, float slope, ge2_tensor **y)
{
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    GE2_ATTRS(ge2_act_attrs, a)->act = act;
    GE2_ATTRS(ge2_act_attrs, a)->slope = slope;
    return ge2_graph_add_forward(graph, GE2_OP_ACTIVATION, "ge2_activate", &x, unary_what, 1, 1, &a, y);
}
