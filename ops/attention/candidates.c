/* ge2's own kernel candidates for the attention ops, registered through
 * the extension API users have (ge2_kernel_candidate_register), after the
 * built-in ops: under precision FP32 and FP16, the tiled kernels on tensor
 * cores in three TF32 passes (tensor_cores.cu), which keep fp32's
 * accuracy. The kernel registry times them against the op's own fp32
 * kernels per shape and keeps the faster: the same numerics either way. */
#include <stdio.h>
#include <stdlib.h>

#include "ops/attention/attention.h"

static const ge2_kernel_candidate forward_3xtf32 = {
    .name = "ge2_attention_3xtf32",
    .applies = ge2_cuda_attention_tc_applies,
    .cuda = {ge2_cuda_attention_tc_prepare, ge2_cuda_attention_tc_launch, NULL, ge2_cuda_attention_tc_describe,
             ge2_cuda_attention_scratch_bytes},
};

static const ge2_kernel_candidate backward_3xtf32 = {
    .name = "ge2_attention_3xtf32",
    .applies = ge2_cuda_attention_tc_applies,
    .cuda = {ge2_cuda_attention_tc_prepare, ge2_cuda_attention_grad_tc_launch, NULL, ge2_cuda_attention_tc_describe,
             ge2_cuda_attention_scratch_bytes},
};

__attribute__((constructor(GE2_OP_CANDIDATES_PRIORITY))) static void ge2_register_attention_candidates(void)
{
    if (ge2_kernel_candidate_register(GE2_OP_ATTENTION, &forward_3xtf32) != GE2_OK ||
        ge2_kernel_candidate_register(GE2_OP_ATTENTION_GRAD, &backward_3xtf32) != GE2_OK) {
        fprintf(stderr, "ge2: attention's candidates: %s\n", ge2_last_error());
        abort();
    }
}
