/* The graph verifier: run by ge2_compile before anything trusts the IR. */
#ifndef GE2_GRAPH_VERIFY_H
#define GE2_GRAPH_VERIFY_H

#include "graph/ir.h"

/* Checks ids, arity, that every consumed tensor exists and is produced by an
 * earlier node (so creation order is a topological order and there is no
 * cycle), that each output names its producer, and that shapes and dtypes
 * still agree with inference. GE2_ERR_GRAPH with the first problem found. */
ge2_status ge2_graph_verify(const ge2_graph *g);

#endif /* GE2_GRAPH_VERIFY_H */
