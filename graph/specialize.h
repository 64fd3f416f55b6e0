/* Shape specialization for graph keys: the planner asks what every tensor's
 * shape is when the inputs and labels come in other shapes (a smaller last
 * batch, an eval batch). */
#ifndef GE2_GRAPH_SPECIALIZE_H
#define GE2_GRAPH_SPECIALIZE_H

#include "graph/ir.h"

/* Re-runs shape inference in node order with the INPUT and LABEL shapes taken
 * from feed_shapes_by_tensor_id[id] and writes every tensor's shape to
 * out_shapes[0..n_tensors). feed_shapes_by_tensor_id may be NULL, and an
 * entry with ndim <= 0 keeps the built shape (a zero-filled array means "as
 * built"; a scalar feed has nothing to specialize). Entries of other tensors
 * are ignored. A feed whose ndim differs from the built one, or that makes an
 * op's shapes inconsistent, is GE2_ERR_SHAPE with the op's message. */
ge2_status ge2_graph_infer_shapes(const ge2_graph *g, const ge2_shape *feed_shapes_by_tensor_id,
                                  ge2_shape *out_shapes);

#endif /* GE2_GRAPH_SPECIALIZE_H */
