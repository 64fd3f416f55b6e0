/* ge2's own kernel candidates for the conv family, registered through the
 * extension API users have (ge2_kernel_candidate_register), after the
 * built-in ops (ops/registry.c registers those at a higher constructor
 * priority). The kernel registry times each against the op's own kernel
 * per shape and keeps the faster. */
#include <stdio.h>
#include <stdlib.h>

#include "ops/conv/conv.h"

static const ge2_kernel_candidate wgrad_small = {
    .name = "ge2_wgrad_small",
    .applies = ge2_conv2d_wgrad_small_applies,
    .cuda = {NULL, ge2_conv2d_wgrad_small_launch, NULL, ge2_conv2d_wgrad_small_describe},
};

__attribute__((constructor(GE2_OP_CANDIDATES_PRIORITY))) static void ge2_register_conv_candidates(void)
{
    if (ge2_kernel_candidate_register(GE2_OP_CONV2D_GRAD_WEIGHT, &wgrad_small) != GE2_OK) {
        fprintf(stderr, "ge2: conv2d_grad_weight's candidate: %s\n", ge2_last_error());
        abort();
    }
}
