/* Helpers shared by the files of graph/ only (not a cross-module header). */
#ifndef GE2_GRAPH_GRAPH_INTERNAL_H
#define GE2_GRAPH_GRAPH_INTERNAL_H

#include "graph/error.h"
#include "graph/ir.h"
#include "graph/op_support.h"

/* Appends a tensor; name NULL means "<prefix>_<id>". Names are unique per graph. */
ge2_status ge2_graph_new_tensor(ge2_graph *graph, const char *name, const char *prefix, ge2_dtype dtype,
                                ge2_shape shape, ge2_role role, ge2_tensor **out);

/* Public-function argument checks: NULL handles and tensors from another graph. */
ge2_status ge2_check_graph(const ge2_graph *graph, const char *fn);
ge2_status ge2_check_tensor(const ge2_graph *graph, const ge2_tensor *t, const char *fn, const char *what);

#endif /* GE2_GRAPH_GRAPH_INTERNAL_H */
