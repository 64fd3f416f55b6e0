/* The public builders of the softmax family: ge2_softmax and ge2_log_softmax. Each checks its
 * arguments, fills the op's attrs and appends one node (which runs the
 * inference). */
#include <string.h>

#include "ops/softmax/softmax.h"

static const char *const unary_what[1] = {"x"};

ge2_status ge2_softmax(ge2_graph *graph, ge2_tensor *x, ge2_tensor **y)
{
    return ge2_graph_add_forward(graph, GE2_OP_SOFTMAX, "ge2_softmax", &x, unary_what, 1, 1, NULL, y);
}

ge2_status ge2_log_softmax(ge2_graph *graph, ge2_tensor *x, ge2_tensor **y)
{
    return ge2_graph_add_forward(graph, GE2_OP_LOG_SOFTMAX, "ge2_log_softmax", &x, unary_what, 1, 1, NULL, y);
}
