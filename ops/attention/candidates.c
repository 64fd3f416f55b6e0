/* ge2's own kernel candidates for the attention ops, registered through
 * the extension API users have (ge2_kernel_candidate_register), after the
 * built-in ops: the tiled kernels on tensor cores (cuda.cu). The kernel
 * registry times them against the op's own kernel per shape and keeps the
 * faster. */
#include <stdio.h>
#include <stdlib.h>

#include "ops/attention/attention.h"

static const ge2_kernel_candidate forward_tensor_cores = {
    .name = "ge2_attention_tensor_cores",
    .applies = ge2_cuda_attention_tc_applies,
    .cuda = {ge2_cuda_attention_tc_prepare, ge2_cuda_attention_tc_launch, NULL, ge2_cuda_attention_tc_describe,
             ge2_cuda_attention_scratch_bytes},
};

static const ge2_kernel_candidate backward_tensor_cores = {
    .name = "ge2_attention_tensor_cores",
    .applies = ge2_cuda_attention_tc_applies,
    .cuda = {ge2_cuda_attention_tc_prepare, ge2_cuda_attention_grad_tc_launch, NULL, ge2_cuda_attention_tc_describe,
             ge2_cuda_attention_scratch_bytes},
};

__attribute__((constructor(GE2_OP_CANDIDATES_PRIORITY))) static void ge2_register_attention_candidates(void)
{
    if (ge2_kernel_candidate_register(GE2_OP_ATTENTION, &forward_tensor_cores) != GE2_OK ||
        ge2_kernel_candidate_register(GE2_OP_ATTENTION_GRAD, &backward_tensor_cores) != GE2_OK) {
        fprintf(stderr, "ge2: attention's candidates: %s\n", ge2_last_error());
        abort();
    }
}
