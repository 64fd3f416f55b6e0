/* The optimizer ops, which the engine's optimizer module (optim/) emits:
 * GRAD_NORM (global L2 norm into the control block, for clipping) and
 * OPTIMIZER_UPDATE (SGD, Adam, AdamW). They read and write the flat pools
 * through ge2_launch.pools. An OPTIMIZER_UPDATE without inputs sweeps the
 * whole pools; with inputs it updates its (parameter, gradient) pairs in
 * place, at most one pair per output of the node that made the gradients
 * (a layer's weight and bias). The math is optim/optimizer_math.h.
 *
 * ops.c holds the definitions (registered by ops/builtin.def's line for
 * each); the rest of the folder is their parts: infer.c, backward.c, api.c
 * (the public builders), cpu.c, the CUDA launchers (cuda*.cu) and test.c
 * (test cases and float64 references). */
#ifndef GE2_OPS_OPTIMIZER_OPTIMIZER_H
#define GE2_OPS_OPTIMIZER_OPTIMIZER_H

/* nvcc compiles the CUDA launchers as C++: these are C declarations */
#ifdef __cplusplus
extern "C" {
#endif

#include "autograd/autograd.h"
#include "graph/op_support.h"
#include "ops/ops.h"

/* infer.c */
ge2_status ge2_infer_GRAD_NORM(const ge2_node *node, const ge2_desc *in, ge2_desc *out);
ge2_status ge2_infer_OPTIMIZER_UPDATE(const ge2_node *node, const ge2_desc *in, ge2_desc *out);

/* cpu.c: shapes from the launch views, in the dtype of input 0 (f32, or f64
 * for gradient checks); outputs whose data is NULL are skipped */
ge2_status ge2_cpu_grad_norm(const ge2_launch *l);
ge2_status ge2_cpu_optimizer_update(const ge2_launch *l);

/* CUDA launchers (f32): enqueue on launch->stream, capturable */
ge2_status ge2_cuda_grad_norm_launch(const ge2_launch *launch);
ge2_status ge2_cuda_optimizer_update_launch(const ge2_launch *launch);
/* The same, also doing copies[0..n) (n <= GE2_CUDA_MAX_COPIES) in its first
 * block: the step's result read-back when the update is the step's last
 * launch, one kernel fewer. The copies' sources must be final before the
 * update runs (it writes only parameters and their state). */
struct ge2_cuda_copy; /* kernels/cuda/step_copy.h */
ge2_status ge2_cuda_optimizer_update_launch_copying(const ge2_launch *launch, const struct ge2_cuda_copy *copies,
                                                    int n);
const char *ge2_cuda_optimizer_update_describe(const ge2_launch *launch);

/* ops.c */
extern const ge2_op_def ge2_op_def_grad_norm;
extern const ge2_op_def ge2_op_def_optimizer_update;

#ifdef __cplusplus
}
#endif

#endif /* GE2_OPS_OPTIMIZER_OPTIMIZER_H */
