/* IEEE binary16 (fp16) <-> float32, for C and CUDA: the sign, 5 exponent
 * bits (bias 15), 10 mantissa bits, subnormals down to 2^-24, largest
 * finite 65504. Widening is exact. Narrowing rounds to nearest, ties to
 * even, as an fp16 tensor-core GEMM's operands are rounded (CUDA's
 * __float2half_rn): a magnitude of 65520 or more becomes infinity, which is
 * what dynamic loss scaling watches for, and one below 2^-25 (or equal to
 * it, the tie going to even) becomes zero. Every NaN becomes 0x7fff, as
 * graph/bf16.h's does. */
#ifndef GE2_GRAPH_F16_H
#define GE2_GRAPH_F16_H

#include <stdint.h>
#include <string.h>

#include "graph/bf16.h" /* GE2_BF16_HD: host and device alike */

static inline GE2_BF16_HD uint16_t ge2_f16_from_f32(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return 0x7fffu;
    if (a >= 0x477ff000u) /* 65520: half a unit past 65504, and ties go to the even inf */
        return sign | 0x7c00u;
    if (a >= 0x38800000u) { /* 2^-14 and up: normal. Re-bias the exponent (127 -> 15), keep 10 mantissa bits */
        uint32_t h = (a >> 13) - (112u << 10);
        const uint32_t dropped = a & 0x1fffu;
        h += dropped > 0x1000u || (dropped == 0x1000u && (h & 1u)); /* a carry steps the exponent */
        return sign | (uint16_t)h;
    }
    if (a <= 0x33000000u) /* 2^-25 and below: zero */
        return sign;
    /* subnormal: |f| / 2^-24 to an integer, nearest even; |f| = mant · 2^(exp - 150) */
    const uint32_t exp = a >> 23, mant = (a & 0x7fffffu) | 0x800000u, shift = 126u - exp; /* 14 .. 24 */
    uint32_t h = mant >> shift;
    const uint32_t dropped = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    h += dropped > half || (dropped == half && (h & 1u));
    return sign | (uint16_t)h;
}

static inline GE2_BF16_HD float ge2_f32_from_f16(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    uint32_t u;
    if (e == 0x1fu)
        u = sign | 0x7f800000u | (m << 13);
    else if (e)
        u = sign | ((e + 112u) << 23) | (m << 13);
    else { /* zero or subnormal: m · 2^-24, exact in float */
        const float v = (float)m * 5.9604644775390625e-8f;
        memcpy(&u, &v, sizeof u);
        u |= sign;
    }
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

#endif /* GE2_GRAPH_F16_H */
