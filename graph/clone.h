/* A deep copy of a graph, for a compile that must change the graph without
 * changing the user's: a pass that alters the numbers (mixed precision's
 * storage pass, docs/mixed-precision.md) works on a copy the program owns,
 * since the user may compile the same graph again another way. */
#ifndef GE2_GRAPH_CLONE_H
#define GE2_GRAPH_CLONE_H

#include "graph/error.h"
#include "graph/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

/* *out: a graph equal to graph in every tensor (same ids, names, shapes,
 * roles, initializers, gradients, copies of constant data) and node, with
 * its seed, loss and optimizer state; its tensors belong to it. Free it with
 * ge2_graph_free. */
ge2_status ge2_graph_clone(const ge2_graph *graph, ge2_graph **out);

#ifdef __cplusplus
}
#endif

#endif /* GE2_GRAPH_CLONE_H */
