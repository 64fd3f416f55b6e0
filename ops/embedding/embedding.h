/* The embedding family: EMBEDDING (table [V, C], ids [...] i32 -> y [...,
 * C], the rows the ids pick) and its backward op EMBEDDING_BACKWARD (dy
 * [..., C], ids -> dtable [V, C], ge2_embedding_attrs.rows = V), which adds
 * each position's dy into its row in position order: deterministic, with no
 * float atomics, on both backends.
 *
 * ops.c holds the definitions (registered by ops/builtin.def's lines); the
 * rest of the folder is their parts: infer.c, backward.c, api.c (the public
 * builder), cpu.c, cuda.cu and test.c (test cases and float64 references). */
#ifndef GE2_OPS_EMBEDDING_EMBEDDING_H
#define GE2_OPS_EMBEDDING_EMBEDDING_H

/* nvcc compiles the CUDA launchers as C++: these are C declarations */
#ifdef __cplusplus
extern "C" {
#endif

#include "autograd/autograd.h"
#include "graph/op_support.h"
#include "ops/ops.h"

/* The family's node attributes (graph/ir.h: GE2_ATTRS). */
/* EMBEDDING_BACKWARD: the table's row count (the gradient's first dim). */
typedef struct ge2_embedding_attrs {
    int64_t rows;
} ge2_embedding_attrs;
GE2_ATTRS_FIT(ge2_embedding_attrs);

/* infer.c */
ge2_status ge2_infer_EMBEDDING(const ge2_node *node, const ge2_desc *in, ge2_desc *out);
ge2_status ge2_infer_EMBEDDING_BACKWARD(const ge2_node *node, const ge2_desc *in, ge2_desc *out);

/* backward.c */
ge2_status ge2_backward_embedding(ge2_autograd *ag, const ge2_node *node, const int *dy);

/* cpu.c: the table's dtype (f32, or f64 for gradient checks) */
ge2_status ge2_cpu_embedding(const ge2_launch *l);
ge2_status ge2_cpu_embedding_backward(const ge2_launch *l);

/* cuda.cu (f32): enqueue on launch->stream, capturable */
ge2_status ge2_cuda_embedding_launch(const ge2_launch *launch);
ge2_status ge2_cuda_embedding_backward_launch(const ge2_launch *launch);

/* ops.c */
extern const ge2_op_def ge2_op_def_embedding;
extern const ge2_op_def ge2_op_def_embedding_backward;

#ifdef __cplusplus
}
#endif

#endif /* GE2_OPS_EMBEDDING_EMBEDDING_H */
