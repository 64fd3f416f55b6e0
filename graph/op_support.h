/* What op modules (ops/<family>/) use from the graph: shape helpers, the
 * checks inference functions share, and the builder step every public op
 * function ends with. */
#ifndef GE2_GRAPH_OP_SUPPORT_H
#define GE2_GRAPH_OP_SUPPORT_H

#include "graph/error.h"
#include "graph/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

/* "[64,784]" in a temporary that lives until the end of the enclosing block,
 * so error messages can format several shapes in one call. */
#define GE2_SHAPE_STR(s) ge2_shape_str((s), (char[8 + GE2_MAX_DIMS * 21]){0}, 8 + GE2_MAX_DIMS * 21)

/* "ge2_<op name>": the public name every message starts with. */
#define GE2_OP_PREFIX "ge2_"

/* Validates a user-given shape: 0..GE2_MAX_DIMS dims, each >= 1. */
bool ge2_shape_valid(ge2_shape shape);
bool ge2_shape_equal(ge2_shape a, ge2_shape b);
/* Right-aligned broadcast of a and b into *out; false if some dim pair is neither equal nor 1. */
bool ge2_shape_broadcast(ge2_shape a, ge2_shape b, ge2_shape *out);
/* True when `small` broadcasts to `big` (right-aligned, each dim equal or 1, ndim <= big's). */
bool ge2_shape_broadcasts_to(ge2_shape small, ge2_shape big);

/* The float dtypes ops compute in. */
static inline bool ge2_dtype_is_float(ge2_dtype d) { return d == GE2_F32 || d == GE2_F64; }

/* ge2_op_def.stores_bf16 for an op whose CUDA kernel rounds output 0 at
 * its store when that output is a bf16 tensor */
bool ge2_stores_bf16_output0(const ge2_node *node, int output);
/* ge2_op_def.reads_bf16 for an op whose kernels read input 0 (1, 2) as f32
 * or bf16 alike */
bool ge2_reads_bf16_input0(const ge2_node *node, int input);
bool ge2_reads_bf16_input1(const ge2_node *node, int input);
bool ge2_reads_bf16_input2(const ge2_node *node, int input);

/* Inference checks that report "ge2_<op>: <what> ..." and return the status. */
ge2_status ge2_infer_need_float(const ge2_node *node, const ge2_desc *d, const char *what);
ge2_status ge2_infer_need_same_dtype(const ge2_node *node, const ge2_desc *a, const ge2_desc *b);
ge2_status ge2_infer_need_same_shape(const ge2_node *node, const ge2_desc *a, const ge2_desc *b);
ge2_status ge2_infer_need_ndim(const ge2_node *node, const ge2_desc *d, int ndim);
ge2_status ge2_infer_need_outputs(const ge2_node *node, int lo, int hi);
/* Normalizes axis (negative counts from the end) against ndim. */
ge2_status ge2_infer_axis(const ge2_node *node, const ge2_desc *d, int axis, int *out);

/* The end of a public op function (ge2_linear, ...): checks the graph and
 * the tensors ts[0..n) (named what[i] in messages), appends a forward node of
 * op, which runs its inference, and returns its output 0 in *y. fn is the
 * public function's name, for messages. */
ge2_status ge2_graph_add_forward(ge2_graph *graph, ge2_op op, const char *fn, ge2_tensor *const *ts,
                                 const char *const *what, int n, int n_out, const ge2_attrs *attrs, ge2_tensor **y);

#ifdef __cplusplus
}
#endif

/* A registered op's attrs (extension.h's bytes) as a node's ge2_attrs,
 * zero past them; refuses more than GE2_OP_ATTRS_BYTES. */
ge2_status ge2_attrs_from_bytes(const char *op_name, const void *attrs, size_t attrs_bytes, ge2_attrs *out);

#endif /* GE2_GRAPH_OP_SUPPORT_H */
