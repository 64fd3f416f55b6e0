/* The single source of activation math, for C (CPU kernels, tests) and CUDA.
 *
 *   ge2_act_f32(act, z, slope)                       y = act(z)
 *   ge2_act_grad_f32(act, saved, from_output, slope) dy/dz, from z (saved = z)
 *                                                    or from y (saved = y)
 *   and the same in f64.
 *
 * Definitions follow PyTorch: gelu_tanh is GELU(approximate='tanh'), gelu_erf
 * the exact GELU, silu = z·sigmoid(z), leaky_relu = z > 0 ? z : slope·z.
 * The derivative can be had from y for relu, leaky_relu with slope >= 0,
 * sigmoid and tanh (each is monotone in z, so y decides the branch); gelu and
 * silu need z — the LINEAR "Z-stash" (ops/linear/stash.h) exists for those.
 */
#ifndef GE2_KERNELS_ACTIVATION_MATH_H
#define GE2_KERNELS_ACTIVATION_MATH_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "ge2/ge2.h"
#include "graph/host_device.h"


/* gelu_tanh(z) = 0.5 z (1 + tanh(k (z + c z^3))) */
#define GE2_GELU_K 0.7978845608028654 /* sqrt(2/pi) */
#define GE2_GELU_C 0.044715

/* Whether dy/dz can be computed from y = act(z) alone. */
static inline GE2_HD bool ge2_act_grad_from_output(ge2_activation act, float slope)
{
    switch (act) {
    case GE2_ACT_NONE:
    case GE2_ACT_RELU:
    case GE2_ACT_SIGMOID:
    case GE2_ACT_TANH:
        return true;
    case GE2_ACT_LEAKY_RELU:
        return slope >= 0.0f;
    default:
        return false;
    }
}

/* One body for both precisions: T the type, S the math-function suffix (f or nothing). */
#define GE2_ACT_DEFINE(T, SUF, S)                                                                              \
    static inline GE2_HD T ge2_sigmoid_##SUF(T z)                                                               \
    {                                                                                                           \
        /* never exp of a large positive number */                                                             \
        if (z >= (T)0)                                                                                          \
            return (T)1 / ((T)1 + exp##S(-z));                                                                  \
        T e = exp##S(z);                                                                                        \
        return e / ((T)1 + e);                                                                                  \
    }                                                                                                           \
    static inline GE2_HD T ge2_act_##SUF(ge2_activation act, T z, float slope)                                 \
    {                                                                                                           \
        const T k = (T)GE2_GELU_K;                                                    \
        const T c = (T)GE2_GELU_C;                                                                                \
        switch (act) {                                                                                          \
        case GE2_ACT_RELU:                                                                                      \
            return z > (T)0 ? z : (T)0;                                                                         \
        case GE2_ACT_LEAKY_RELU:                                                                                \
            return z > (T)0 ? z : (T)slope * z;                                                                 \
        case GE2_ACT_GELU_TANH:                                                                                 \
            return (T)0.5 * z * ((T)1 + tanh##S(k * (z + c * z * z * z)));                                      \
        case GE2_ACT_GELU_ERF:                                                                                  \
            return (T)0.5 * z * ((T)1 + erf##S(z * (T)0.7071067811865476));                                     \
        case GE2_ACT_SIGMOID:                                                                                   \
            return ge2_sigmoid_##SUF(z);                                                                        \
        case GE2_ACT_TANH:                                                                                      \
            return tanh##S(z);                                                                                  \
        case GE2_ACT_SILU:                                                                                      \
            return z * ge2_sigmoid_##SUF(z);                                                                    \
        default:                                                                                                \
            return z;                                                                                           \
        }                                                                                                       \
    }                                                                                                           \
    static inline GE2_HD T ge2_act_grad_##SUF(ge2_activation act, T saved, bool from_output, float slope)      \
    {                                                                                                           \
        const T k = (T)GE2_GELU_K;                                                                      \
        const T c = (T)GE2_GELU_C;                                                                                \
        switch (act) {                                                                                          \
        case GE2_ACT_RELU:                                                                                      \
            return saved > (T)0 ? (T)1 : (T)0;                                                                  \
        case GE2_ACT_LEAKY_RELU:                                                                                \
            return saved > (T)0 ? (T)1 : (T)slope;                                                              \
        case GE2_ACT_GELU_TANH: {                                                                               \
            T t = tanh##S(k * (saved + c * saved * saved * saved));                                             \
            return (T)0.5 * ((T)1 + t) +                                                                        \
                   (T)0.5 * saved * ((T)1 - t * t) * k * ((T)1 + (T)3 * c * saved * saved);                     \
        }                                                                                                       \
        case GE2_ACT_GELU_ERF:                                                                                  \
            return (T)0.5 * ((T)1 + erf##S(saved * (T)0.7071067811865476)) +                                    \
                   saved * exp##S((T)-0.5 * saved * saved) * (T)0.3989422804014327; /* 1/sqrt(2 pi) */          \
        case GE2_ACT_SIGMOID: {                                                                                 \
            T s = from_output ? saved : ge2_sigmoid_##SUF(saved);                                               \
            return s * ((T)1 - s);                                                                              \
        }                                                                                                       \
        case GE2_ACT_TANH: {                                                                                    \
            T t = from_output ? saved : tanh##S(saved);                                                         \
            return (T)1 - t * t;                                                                                \
        }                                                                                                       \
        case GE2_ACT_SILU: {                                                                                    \
            T s = ge2_sigmoid_##SUF(saved);                                                                     \
            return s * ((T)1 + saved * ((T)1 - s));                                                             \
        }                                                                                                       \
        default:                                                                                                \
            return (T)1;                                                                                        \
        }                                                                                                       \
    }

GE2_ACT_DEFINE(float, f32, f)
GE2_ACT_DEFINE(double, f64, )

#ifdef __CUDACC__
/* For CUDA kernels that store bf16 (the storage pass's outputs): gelu_tanh
 * as z·sigmoid(2u), u = k (z + c z^3), the same function ((1 + tanh u) / 2
 * is sigmoid(2u)), through the fast exp and divide: a few instructions
 * where tanhf takes dozens, which made those kernels compute-bound. Its
 * error (~1e-6 relative, no cancellation at either tail) is far below the
 * bf16 rounding that follows. Every other activation is ge2_act_f32's. */
static __device__ __forceinline__ float ge2_act_for_bf16(ge2_activation act, float z, float slope)
{
    if (act != GE2_ACT_GELU_TANH)
        return ge2_act_f32(act, z, slope);
    const float u = (float)GE2_GELU_K * (z + (float)GE2_GELU_C * z * z * z);
    return __fdividef(z, 1.0f + __expf(-2.0f * u));
}

/* d/dz of the same: s + z s (1 - s) 2 u', s = sigmoid(2u) */
static __device__ __forceinline__ float ge2_act_grad_for_bf16(ge2_activation act, float saved, bool from_output,
                                                            float slope)
{
    if (act != GE2_ACT_GELU_TANH || from_output)
        return ge2_act_grad_f32(act, saved, from_output, slope);
    const float z = saved, u = (float)GE2_GELU_K * (z + (float)GE2_GELU_C * z * z * z);
    const float s = __fdividef(1.0f, 1.0f + __expf(-2.0f * u));
    return s + z * s * (1.0f - s) * 2.0f * (float)GE2_GELU_K * (1.0f + 3.0f * (float)GE2_GELU_C * z * z);
}
#endif

#undef GE2_ACT_DEFINE

#endif /* GE2_KERNELS_ACTIVATION_MATH_H */
