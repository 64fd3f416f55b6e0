/* Graph surgery for the compile-time rewrites of the fuse pass
 * (fusion/fusion.h: a pattern's rewrite): replace a node where it stands,
 * then drop what the replacement made dead and renumber. Kept tensors keep
 * their records' addresses, so the ge2_tensor handles a user holds for them
 * stay valid; their ids may move down. Both bump graph->changes. */
#ifndef GE2_GRAPH_REWRITE_H
#define GE2_GRAPH_REWRITE_H

#include <stdbool.h>

#include "graph/ir.h"

/* Node `at` becomes op(inputs) -> outputs with attrs, keeping its id and
 * phase: the outputs (existing tensors, now produced here) must have the
 * dtype and shape the op infers, and every input must be produced before
 * `at`. Their former producers lose them; the caller drops those nodes. */
ge2_status ge2_graph_replace_node(ge2_graph *g, int at, ge2_op op, const int *inputs, int n_inputs,
                                  const int *outputs, int n_outputs, const ge2_attrs *attrs);

/* Moves node `from` to position `to` (to <= from), the nodes between one
 * later, and renumbers them: how a pass places a node it appended
 * (ge2_graph_add_node) before the first node that reads its output. The
 * caller keeps the order topological: nothing in [to, from) may make what
 * the moved node reads. Bumps graph->changes. */
void ge2_graph_move_node(ge2_graph *g, int from, int to);

/* A new activation tensor a rewrite's node will produce: the tensor `like`
 * names and shapes it ("<like>.<suffix>", like's dtype and shape). */
ge2_status ge2_graph_new_like(ge2_graph *g, int like, const char *suffix, int *id);

/* The bf16 copy of parameter `param` (GE2_ROLE_PARAMETER_COPY, named
 * "<param>.bf16", copy_of = param): the one made before, else a new one.
 * A pass makes its GEMMs read it in place of a cast of the parameter; the
 * program keeps it equal to the rounded parameter (the optimizer writes it
 * as it updates). */
ge2_status ge2_graph_parameter_copy(ge2_graph *g, int param, int *copy);

/* Removes the nodes with drop_node[id] and the tensors with drop_tensor[id]
 * (either may be NULL for none) and renumbers the rest in order: node
 * inputs and outputs, producers, grad, grad_of and the loss follow. No kept
 * node may read or write a dropped tensor (GE2_ERR_GRAPH, and the graph is
 * left as it was); a kept tensor's grad naming a dropped one becomes -1. */
ge2_status ge2_graph_compact(ge2_graph *g, const bool *drop_node, const bool *drop_tensor);

/* What a rewrite keeps while it walks a graph: the nodes and tensors it
 * will drop, and who reads each tensor. */
typedef struct ge2_rewrite_scan {
    ge2_graph *graph;
    int *readers;     /* [n_tensors] how many kept nodes read it (an input slot each) */
    int *last_reader; /* [n_tensors] the last such node, -1 for none */
    bool *drop_node;  /* [n_nodes] */
    bool *drop_tensor; /* [n_tensors] */
} ge2_rewrite_scan;

/* Allocates the scan, nothing dropped, readers counted; `who` names the
 * rewrite in an out-of-memory message. */
ge2_status ge2_rewrite_scan_begin(ge2_graph *g, const char *who, ge2_rewrite_scan *s);
/* Counts the readers again, leaving out the nodes marked for dropping. */
void ge2_rewrite_scan_count(ge2_rewrite_scan *s);
/* Every kept node that reads tensor `from` reads `to` instead. */
void ge2_rewrite_redirect(ge2_rewrite_scan *s, int from, int to);
/* Drops what was marked (ge2_graph_compact) when st is GE2_OK and anything
 * was, and frees the scan; returns st or the compaction's status. */
ge2_status ge2_rewrite_scan_end(ge2_rewrite_scan *s, ge2_status st);

#endif /* GE2_GRAPH_REWRITE_H */
