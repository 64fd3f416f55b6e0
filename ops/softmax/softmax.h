/* The softmax family, over the last axis: SOFTMAX, LOG_SOFTMAX and their
 * backward ops, which read the forward output.
 *
 * ops.c holds the definitions (registered by ops/builtin.def's line for
 * each); the rest of the folder is their parts: infer.c, backward.c, api.c
 * (the public builders), cpu.c, the CUDA launchers (cuda*.cu) and test.c
 * (test cases and float64 references). */
#ifndef GE2_OPS_SOFTMAX_SOFTMAX_H
#define GE2_OPS_SOFTMAX_SOFTMAX_H

/* nvcc compiles the CUDA launchers as C++: these are C declarations */
#ifdef __cplusplus
extern "C" {
#endif

#include "autograd/autograd.h"
#include "graph/op_support.h"
#include "ops/ops.h"

/* infer.c */
ge2_status ge2_infer_SOFTMAX(const ge2_node *node, const ge2_desc *in, ge2_desc *out);
ge2_status ge2_infer_LOG_SOFTMAX(const ge2_node *node, const ge2_desc *in, ge2_desc *out);
ge2_status ge2_infer_SOFTMAX_BACKWARD(const ge2_node *node, const ge2_desc *in, ge2_desc *out);
ge2_status ge2_infer_LOG_SOFTMAX_BACKWARD(const ge2_node *node, const ge2_desc *in, ge2_desc *out);

/* backward.c */
ge2_status ge2_backward_softmax(ge2_autograd *ag, const ge2_node *node, const int *dy);

/* cpu.c: shapes from the launch views, in the dtype of input 0 (f32, or f64
 * for gradient checks); outputs whose data is NULL are skipped */
ge2_status ge2_cpu_softmax(const ge2_launch *l);
ge2_status ge2_cpu_softmax_backward(const ge2_launch *l);

/* CUDA launchers (f32): enqueue on launch->stream, capturable */
ge2_status ge2_cuda_softmax_launch(const ge2_launch *launch);          /* SOFTMAX, LOG_SOFTMAX */
ge2_status ge2_cuda_softmax_backward_launch(const ge2_launch *launch); /* their backward ops */

/* ops.c */
extern const ge2_op_def ge2_op_def_softmax;
extern const ge2_op_def ge2_op_def_log_softmax;
extern const ge2_op_def ge2_op_def_softmax_backward;
extern const ge2_op_def ge2_op_def_log_softmax_backward;

#ifdef __cplusplus
}
#endif

#endif /* GE2_OPS_SOFTMAX_SOFTMAX_H */
