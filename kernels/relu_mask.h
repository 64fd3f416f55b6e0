/* The layout of a relu bit-mask, as cuBLASLt's RELU_AUX epilogues write
 * it and DRELU reads it: the GEMM kernels, the ops that keep one for their
 * backward (a linear layer's, ops/linear/stash.h) and the fused kernels
 * that read it agree on it here. For C and CUDA. */
#ifndef GE2_KERNELS_RELU_MASK_H
#define GE2_KERNELS_RELU_MASK_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/activation_math.h" /* GE2_HD */

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

#endif /* GE2_KERNELS_RELU_MASK_H */
