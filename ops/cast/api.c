/* The public builder of the cast family. */
#include <string.h>

#include "ops/cast/cast.h"

ge2_status ge2_cast(ge2_graph *graph, ge2_tensor *x, ge2_dtype to, ge2_tensor **y)
{
    if (!graph)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_cast: graph must not be NULL");
    static const char *const what[1] = {"x"};
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    const ge2_cast_attrs c = {to};
    memcpy(a.bytes, &c, sizeof c);
    return ge2_graph_add_forward(graph, GE2_OP_CAST, "ge2_cast", &x, what, 1, 1, &a, y);
}
