/* The shape family: RESHAPE, TRANSPOSE (2-D), PERMUTE (N-D), CONCAT, SLICE and the
 * SLICE_BACKWARD its backward emits.
 *
 * ops.c holds the definitions (registered by ops/builtin.def's line for
 * each); the rest of the folder is their parts: infer.c, backward.c, api.c
 * (the public builders), cpu.c, the CUDA launchers (cuda*.cu) and test.c
 * (test cases and float64 references). */
#ifndef GE2_OPS_SHAPE_SHAPE_H
#define GE2_OPS_SHAPE_SHAPE_H

/* nvcc compiles the CUDA launchers as C++: these are C declarations */
#ifdef __cplusplus
extern "C" {
#endif

#include "autograd/autograd.h"
#include "graph/op_support.h"
#include "ops/ops.h"

/* The family's node attributes (graph/ir.h: GE2_ATTRS). */
typedef struct ge2_reshape_attrs {
    ge2_shape shape; /* may hold one -1; unused when the like input is given */
} ge2_reshape_attrs;
GE2_ATTRS_FIT(ge2_reshape_attrs);

/* PERMUTE: output dim i is input dim perm[i] (the first ndim entries). */
typedef struct ge2_permute_attrs {
    int perm[GE2_MAX_DIMS];
} ge2_permute_attrs;
GE2_ATTRS_FIT(ge2_permute_attrs);

typedef struct ge2_concat_attrs {
    int axis;
} ge2_concat_attrs;
GE2_ATTRS_FIT(ge2_concat_attrs);

typedef struct ge2_slice_attrs {
    int axis;
    int64_t start, end;
} ge2_slice_attrs;
GE2_ATTRS_FIT(ge2_slice_attrs);

/* infer.c */
ge2_status ge2_infer_RESHAPE(const ge2_node *node, const ge2_desc *in, ge2_desc *out);
ge2_status ge2_infer_TRANSPOSE(const ge2_node *node, const ge2_desc *in, ge2_desc *out);
ge2_status ge2_infer_PERMUTE(const ge2_node *node, const ge2_desc *in, ge2_desc *out);
ge2_status ge2_infer_CONCAT(const ge2_node *node, const ge2_desc *in, ge2_desc *out);
ge2_status ge2_infer_SLICE(const ge2_node *node, const ge2_desc *in, ge2_desc *out);
ge2_status ge2_infer_SLICE_BACKWARD(const ge2_node *node, const ge2_desc *in, ge2_desc *out);

/* backward.c */
ge2_status ge2_backward_reshape(ge2_autograd *ag, const ge2_node *node, const int *dy);
ge2_status ge2_backward_transpose(ge2_autograd *ag, const ge2_node *node, const int *dy);
ge2_status ge2_backward_permute(ge2_autograd *ag, const ge2_node *node, const int *dy);
ge2_status ge2_backward_concat(ge2_autograd *ag, const ge2_node *node, const int *dy);
ge2_status ge2_backward_slice(ge2_autograd *ag, const ge2_node *node, const int *dy);
ge2_status ge2_backward_slice_backward(ge2_autograd *ag, const ge2_node *node, const int *dy);

/* cpu.c: shapes from the launch views, in the dtype of input 0 (f32, or f64
 * for gradient checks); outputs whose data is NULL are skipped */
ge2_status ge2_cpu_reshape(const ge2_launch *l);
ge2_status ge2_cpu_transpose(const ge2_launch *l);
ge2_status ge2_cpu_permute(const ge2_launch *l);
ge2_status ge2_cpu_concat(const ge2_launch *l);
ge2_status ge2_cpu_slice(const ge2_launch *l);
ge2_status ge2_cpu_slice_backward(const ge2_launch *l);

/* CUDA launchers (f32): enqueue on launch->stream, capturable */
ge2_status ge2_cuda_reshape_launch(const ge2_launch *launch);
const char *ge2_cuda_reshape_describe(const ge2_launch *launch);
ge2_status ge2_cuda_transpose_launch(const ge2_launch *launch);
ge2_status ge2_cuda_permute_launch(const ge2_launch *launch);
ge2_status ge2_cuda_concat_launch(const ge2_launch *launch);
ge2_status ge2_cuda_slice_launch(const ge2_launch *launch);
ge2_status ge2_cuda_slice_backward_launch(const ge2_launch *launch);

/* ops.c */
extern const ge2_op_def ge2_op_def_reshape;
extern const ge2_op_def ge2_op_def_transpose;
extern const ge2_op_def ge2_op_def_permute;
extern const ge2_op_def ge2_op_def_concat;
extern const ge2_op_def ge2_op_def_slice;
extern const ge2_op_def ge2_op_def_slice_backward;

#ifdef __cplusplus
}
#endif

#endif /* GE2_OPS_SHAPE_SHAPE_H */
