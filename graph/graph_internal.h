/* Helpers shared by the files of graph/ only (not a cross-module header). */
#ifndef GE2_GRAPH_GRAPH_INTERNAL_H
#define GE2_GRAPH_GRAPH_INTERNAL_H

#include "graph/error.h"
#include "graph/ir.h"

/* "[64,784]" in a temporary that lives until the end of the enclosing block,
 * so error messages can format several shapes in one call. */
#define GE2_SHAPE_STR(s) ge2_shape_str((s), (char[8 + GE2_MAX_DIMS * 21]){0}, 8 + GE2_MAX_DIMS * 21)

/* "ge2_<op name>": the public name every message starts with. */
#define GE2_OP_PREFIX "ge2_"
static inline const char *ge2_op_name(ge2_op op) { return ge2_op_table[op].name; }

/* Validates a user-given shape: 0..GE2_MAX_DIMS dims, each >= 1. */
bool ge2_shape_valid(ge2_shape shape);
bool ge2_shape_equal(ge2_shape a, ge2_shape b);
/* Right-aligned broadcast of a and b into *out; false if some dim pair is neither equal nor 1. */
bool ge2_shape_broadcast(ge2_shape a, ge2_shape b, ge2_shape *out);
/* True when `small` broadcasts to `big` (right-aligned, each dim equal or 1, ndim <= big's). */
bool ge2_shape_broadcasts_to(ge2_shape small, ge2_shape big);

/* The float dtypes ops compute in. */
static inline bool ge2_dtype_is_float(ge2_dtype d) { return d == GE2_F32 || d == GE2_F64; }

/* Inference checks that report "ge2_<op>: <what> ..." and return the status. */
ge2_status ge2_infer_need_float(const ge2_node *node, const ge2_desc *d, const char *what);
ge2_status ge2_infer_need_same_dtype(const ge2_node *node, const ge2_desc *a, const ge2_desc *b);
ge2_status ge2_infer_need_same_shape(const ge2_node *node, const ge2_desc *a, const ge2_desc *b);
ge2_status ge2_infer_need_ndim(const ge2_node *node, const ge2_desc *d, int ndim);
ge2_status ge2_infer_need_outputs(const ge2_node *node, int lo, int hi);
/* Normalizes axis (negative counts from the end) against ndim. */
ge2_status ge2_infer_axis(const ge2_node *node, const ge2_desc *d, int axis, int *out);

/* Appends a tensor; name NULL means "<prefix>_<id>". Names are unique per graph. */
ge2_status ge2_graph_new_tensor(ge2_graph *graph, const char *name, const char *prefix, ge2_dtype dtype,
                                ge2_shape shape, ge2_role role, ge2_tensor **out);

/* Public-function argument checks: NULL handles and tensors from another graph. */
ge2_status ge2_check_graph(const ge2_graph *graph, const char *fn);
ge2_status ge2_check_tensor(const ge2_graph *graph, const ge2_tensor *t, const char *fn, const char *what);

/* The infer function of every op, defined one family per file (infer_*.c). */
#define GE2_OP(id, name, min_in, max_in, max_out, flags) ge2_status ge2_infer_##id(const ge2_node *, const ge2_desc *, ge2_desc *);
#include "graph/ops.def"
#undef GE2_OP

#endif /* GE2_GRAPH_GRAPH_INTERNAL_H */
