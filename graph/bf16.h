/* bfloat16 <-> float32, for C and CUDA. A bf16 is the upper 16 bits of an
 * IEEE float32: the sign, the same 8 exponent bits, 7 mantissa bits. Widening
 * is exact. Narrowing rounds to nearest, ties to even, as a bf16 tensor-core
 * GEMM's operands are rounded; a value past the largest bf16 by half a unit
 * or more becomes infinity. Every NaN becomes 0x7fff, the quiet NaN CUDA's
 * __float2bfloat16_rn returns, so the CPU backend and the GPU agree bit for
 * bit (PyTorch keeps 0x7fc0; both are NaN). */
#ifndef GE2_GRAPH_BF16_H
#define GE2_GRAPH_BF16_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define GE2_BF16_HD __host__ __device__
#else
#define GE2_BF16_HD
#endif

static inline GE2_BF16_HD uint16_t ge2_bf16_from_f32(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return 0x7fffu;
    /* adding 0x7fff, plus one when the kept part is odd, carries into the
     * kept bits exactly when the dropped half is above (or, kept odd, at)
     * one half; a carry out of the mantissa steps the exponent, up to inf */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline GE2_BF16_HD float ge2_f32_from_bf16(uint16_t h)
{
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

#endif /* GE2_GRAPH_BF16_H */
