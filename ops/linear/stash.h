/* LINEAR's saved second output, the op semantics its backward GEMMs, the
 * fused kernels and the CUDA GEMM epilogues agree on: which activations
 * keep z, and the layout of relu's bit-mask. For C and CUDA. */
#ifndef GE2_OPS_LINEAR_STASH_H
#define GE2_OPS_LINEAR_STASH_H

#include "ops/elementwise/activation_math.h"

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

/* The relu bit-mask is cuBLASLt's aux layout for our row-major y [B, n]
 * (column-major n x B): each row of y is n bits, LSB first, padded to a
 * multiple of 128 bits (CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD counts bits and
 * must be divisible by 128). Bit c of row r is set when z[r, c] > 0. */
#define GE2_RELU_MASK_ALIGN_BITS 128
static inline GE2_HD int64_t ge2_relu_mask_row_bytes(int64_t n)
{
    return (n + GE2_RELU_MASK_ALIGN_BITS - 1) / GE2_RELU_MASK_ALIGN_BITS * (GE2_RELU_MASK_ALIGN_BITS / 8);
}

static inline GE2_HD bool ge2_relu_mask_bit(const uint8_t *row, int64_t c) { return (row[c >> 3] >> (c & 7)) & 1u; }

#endif /* GE2_OPS_LINEAR_STASH_H */
