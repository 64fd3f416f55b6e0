/* The batch norm + ReLU pattern (fusion/bn_relu): its three fused ops,
 * which the pattern's rewrite puts where a BATCH_NORM's y was read by a
 * relu alone, and where that relu's derivative fed only the batch norm's
 * backward ops:
 *   BATCH_NORM_RELU (x, weight, bias, running_mean, running_var[,
 *     num_batches_tracked]) -> y = max(0, BATCH_NORM's y), saved
 *   BATCH_NORM_RELU_GRAD_PARAMS (dy, x, saved, y) -> dweight, dbias
 *   BATCH_NORM_RELU_GRAD_INPUT (dy, x, weight, saved, dweight, dbias, y) -> dx
 * where the backward ops take dy where the relu'd y is positive (else 0):
 * BATCH_NORM_GRAD_*'s results for relu'(dy). They run the batch norm's own
 * kernels with its relu (ops/norm/norm.h: the *_with launchers), so a conv
 * block runs one elementwise kernel less forward and one less backward,
 * and neither the pre-relu y nor its gradient is ever stored. The ops are
 * defined and registered here (bn_relu.c); nothing in ops/ knows them. */
#ifndef GE2_FUSION_BN_RELU_BN_RELU_H
#define GE2_FUSION_BN_RELU_BN_RELU_H

#ifdef __cplusplus
extern "C" {
#endif

#include "ops/norm/norm.h"

/* The fused ops' ids (registered when the library loads; -1 if that
 * failed); their attrs are BATCH_NORM's (ge2_batch_norm_attrs). */
ge2_op ge2_op_batch_norm_relu(void);
ge2_op ge2_op_batch_norm_relu_grad_params(void);
ge2_op ge2_op_batch_norm_relu_grad_input(void);

/* bn_relu.cu: the batch norm's CUDA launchers with the relu */
ge2_status ge2_cuda_batch_norm_relu_launch(const ge2_launch *l);
ge2_status ge2_cuda_batch_norm_relu_grad_params_launch(const ge2_launch *l);
ge2_status ge2_cuda_batch_norm_relu_grad_input_launch(const ge2_launch *l);

#ifdef __cplusplus
}
#endif

#endif /* GE2_FUSION_BN_RELU_BN_RELU_H */
