/* The CUDA kernels' C entry points: one launcher per op family, implemented
 * by the extern "C" launchers at the end of each .cu file in kernels/cuda/ and
 * gathered into ge2_cuda_kernels[] by kernels/cuda/table.c.
 *
 * Every launcher follows ge2_cuda_kernel's rules (kernels/kernel.h): it reads
 * shapes from the launch's views, enqueues on (cudaStream_t)launch->stream,
 * allocates nothing, never synchronizes and reads no host value that changes
 * from step to step, so the whole step can be captured into one CUDA Graph.
 * A family launcher serving several ops (ADD/SUB/MUL, SUM/MEAN, ...) picks the
 * op from launch->node->op. Only f32 is implemented on CUDA: any other dtype
 * returns GE2_ERR_UNSUPPORTED with a message naming the op.
 */
#ifndef GE2_KERNELS_CUDA_CUDA_KERNELS_H
#define GE2_KERNELS_CUDA_CUDA_KERNELS_H

#include "kernels/cuda/step_copy.h"
#include "kernels/kernel.h"

#ifdef __cplusplus
extern "C" {
#endif

/* gemm_lt.cu (cuBLASLt): LINEAR and MATMUL. prepare builds descriptors and
 * picks the algorithm once per graph key, before warm-up and capture. */
ge2_status ge2_cuda_linear_prepare(ge2_launch *launch);
ge2_status ge2_cuda_linear_launch(const ge2_launch *launch);
void ge2_cuda_linear_release(ge2_launch *launch);
const char *ge2_cuda_linear_describe(const ge2_launch *launch);

ge2_status ge2_cuda_matmul_prepare(ge2_launch *launch);
ge2_status ge2_cuda_matmul_launch(const ge2_launch *launch);
void ge2_cuda_matmul_release(ge2_launch *launch);
const char *ge2_cuda_matmul_describe(const ge2_launch *launch);

/* gemm_fused.cu: LINEAR's backward GEMMs with their epilogues (release and
 * describe are LINEAR's) */
ge2_status ge2_cuda_linear_grad_input_prepare(ge2_launch *launch);
ge2_status ge2_cuda_linear_grad_input_launch(const ge2_launch *launch);
ge2_status ge2_cuda_linear_grad_weight_prepare(ge2_launch *launch);
ge2_status ge2_cuda_linear_grad_weight_launch(const ge2_launch *launch);

/* elementwise.cu */
ge2_status ge2_cuda_binary_launch(const ge2_launch *launch);              /* ADD, SUB, MUL (broadcasting) */
ge2_status ge2_cuda_scale_launch(const ge2_launch *launch);               /* SCALE */
ge2_status ge2_cuda_activation_launch(const ge2_launch *launch);          /* ACTIVATION */
ge2_status ge2_cuda_activation_backward_launch(const ge2_launch *launch); /* ACTIVATION_BACKWARD */
ge2_status ge2_cuda_expand_launch(const ge2_launch *launch);              /* EXPAND: broadcast times scale */
const char *ge2_cuda_elementwise_describe(const ge2_launch *launch);

/* reduce.cu */
ge2_status ge2_cuda_reduce_launch(const ge2_launch *launch); /* SUM, MEAN (all elements or one axis), REDUCE_TO */
const char *ge2_cuda_reduce_describe(const ge2_launch *launch);

/* softmax.cu: over the last axis */
ge2_status ge2_cuda_softmax_launch(const ge2_launch *launch);          /* SOFTMAX, LOG_SOFTMAX */
ge2_status ge2_cuda_softmax_backward_launch(const ge2_launch *launch); /* SOFTMAX_BACKWARD, LOG_SOFTMAX_BACKWARD */

/* shape.cu */
ge2_status ge2_cuda_reshape_launch(const ge2_launch *launch);
ge2_status ge2_cuda_transpose_launch(const ge2_launch *launch);
ge2_status ge2_cuda_concat_launch(const ge2_launch *launch);
ge2_status ge2_cuda_slice_launch(const ge2_launch *launch);
ge2_status ge2_cuda_slice_backward_launch(const ge2_launch *launch);

/* loss.cu: deterministic single-launch losses and metrics */
ge2_status ge2_cuda_cross_entropy_launch(const ge2_launch *launch);
ge2_status ge2_cuda_mse_loss_launch(const ge2_launch *launch);
ge2_status ge2_cuda_accuracy_launch(const ge2_launch *launch);

/* optimizer.cu: over the flat pools (or one layer's parameters), state in launch->control */
ge2_status ge2_cuda_grad_norm_launch(const ge2_launch *launch);
ge2_status ge2_cuda_optimizer_update_launch(const ge2_launch *launch);
/* The same, also doing copies[0..n) (n <= GE2_CUDA_MAX_COPIES) in its first
 * block: the step's result read-back when the update is the step's last
 * launch, one kernel fewer. The copies' sources must be final before the
 * update runs (it writes only parameters and their state). */
ge2_status ge2_cuda_optimizer_update_launch_copying(const ge2_launch *launch, const ge2_cuda_copy *copies, int n);
const char *ge2_cuda_optimizer_update_describe(const ge2_launch *launch);

#ifdef __cplusplus
}
#endif

#endif /* GE2_KERNELS_CUDA_CUDA_KERNELS_H */
