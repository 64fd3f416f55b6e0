/* The reduce family: SUM and MEAN (all elements or one axis), and the
 * pair each is the other's backward of: EXPAND (broadcast up to a `like`
 * input's shape, times a scale) and REDUCE_TO (sum down to it).
 *
 * ops.c holds the definitions (registered by ops/builtin.def's line for
 * each); the rest of the folder is their parts: infer.c, backward.c, api.c
 * (the public builders), cpu.c, the CUDA launchers (cuda*.cu) and test.c
 * (test cases and float64 references). */
#ifndef GE2_OPS_REDUCE_REDUCE_H
#define GE2_OPS_REDUCE_REDUCE_H

/* nvcc compiles the CUDA launchers as C++: these are C declarations */
#ifdef __cplusplus
extern "C" {
#endif

#include "autograd/autograd.h"
#include "graph/op_support.h"
#include "ops/ops.h"

/* The family's node attributes (graph/ir.h: GE2_ATTRS). */

/* ge2_reduce_attrs.axis for "all elements". */
#define GE2_AXIS_ALL (-100)
typedef struct ge2_reduce_attrs {
    int axis; /* normalized to [0, ndim), or GE2_AXIS_ALL */
} ge2_reduce_attrs;
GE2_ATTRS_FIT(ge2_reduce_attrs);

/* EXPAND and REDUCE_TO (each is the other's backward): out = (x broadcast
 * up, or summed down, to like's shape) * scale [/ factor when mean]. Builders
 * always set scale (1 for a plain broadcast or sum). */
typedef struct ge2_expand_attrs {
    double scale; /* EXPAND multiplies by this (mean's backward: 1/n) */
    /* Also divide by numel(larger shape) / numel(smaller shape), taken from the
     * launch's concrete shapes: mean's 1/n stays right when a graph key changes
     * the batch, which a literal scale would not. */
    bool mean;
} ge2_expand_attrs;
GE2_ATTRS_FIT(ge2_expand_attrs);

/* infer.c */
ge2_status ge2_infer_SUM(const ge2_node *node, const ge2_desc *in, ge2_desc *out);
ge2_status ge2_infer_MEAN(const ge2_node *node, const ge2_desc *in, ge2_desc *out);
ge2_status ge2_infer_EXPAND(const ge2_node *node, const ge2_desc *in, ge2_desc *out);
ge2_status ge2_infer_REDUCE_TO(const ge2_node *node, const ge2_desc *in, ge2_desc *out);

/* backward.c */
ge2_status ge2_backward_reduce(ge2_autograd *ag, const ge2_node *node, const int *dy);
ge2_status ge2_backward_expand(ge2_autograd *ag, const ge2_node *node, const int *dy);
ge2_status ge2_backward_reduce_to(ge2_autograd *ag, const ge2_node *node, const int *dy);

/* cpu.c: shapes from the launch views, in the dtype of input 0 (f32, or f64
 * for gradient checks); outputs whose data is NULL are skipped */
ge2_status ge2_cpu_reduce(const ge2_launch *l);
ge2_status ge2_cpu_expand(const ge2_launch *l);
ge2_status ge2_cpu_reduce_to(const ge2_launch *l);

/* CUDA launchers (f32): enqueue on launch->stream, capturable */
ge2_status ge2_cuda_reduce_launch(const ge2_launch *launch); /* SUM, MEAN, REDUCE_TO */
const char *ge2_cuda_reduce_describe(const ge2_launch *launch);
/* y [n] (f32) = the column sums of x [rows, n] (a bias gradient; x f32 or
 * bf16, summed in fp32), deterministic, on launch's stream: for other ops'
 * launchers (LINEAR's backward) */
ge2_status ge2_cuda_column_sums(const ge2_launch *launch, const void *x, ge2_dtype x_dtype, int64_t rows, int64_t n,
                                float *y);

/* ops.c */
extern const ge2_op_def ge2_op_def_sum;
extern const ge2_op_def ge2_op_def_mean;
extern const ge2_op_def ge2_op_def_expand;
extern const ge2_op_def ge2_op_def_reduce_to;

#ifdef __cplusplus
}
#endif

#endif /* GE2_OPS_REDUCE_REDUCE_H */
