/* LINEAR's saved second output, the op semantics its backward GEMMs, the
 * fused kernels and the CUDA GEMM epilogues agree on: which activations
 * keep z (relu's bit-mask: kernels/relu_mask.h). For C and CUDA. */
#ifndef GE2_OPS_LINEAR_STASH_H
#define GE2_OPS_LINEAR_STASH_H

#include "kernels/activation_math.h"
#include "kernels/relu_mask.h"

/* What LINEAR keeps as its second output for the backward: nothing when the
 * derivative comes from y; relu's bit-mask, which cuBLASLt's RELU_AUX_BIAS
 * epilogue writes and DRELU_BGRAD reads, so the backward GEMM fuses it; z for
 * the rest (GELU_AUX_BIAS writes it, DGELU_BGRAD reads it). */
typedef enum ge2_linear_stash {
    GE2_STASH_NONE,
    GE2_STASH_Z,         /* [B, out] like y */
    GE2_STASH_RELU_MASK, /* [B, ge2_relu_mask_row_bytes(out)] U8 */
    GE2_STASH_COUNT
} ge2_linear_stash;

static inline GE2_HD ge2_linear_stash ge2_linear_stash_of(ge2_activation act, float slope)
{
    if (act == GE2_ACT_RELU)
        return GE2_STASH_RELU_MASK;
    return ge2_act_grad_from_output(act, slope) ? GE2_STASH_NONE : GE2_STASH_Z;
}

#endif /* GE2_OPS_LINEAR_STASH_H */
