/* CUDA C++ only: one dropout element's arithmetic and a draw's four, shared
 * by DROPOUT's kernel (cuda.cu) and the fused dropout-then-layer-norm
 * (fusion/dropout_ln), so both keep exactly the same elements and round
 * them the same way. */
#ifndef GE2_OPS_DROPOUT_CUDA_DROPOUT_H
#define GE2_OPS_DROPOUT_CUDA_DROPOUT_H

#ifndef __CUDACC__
#error "ops/dropout/cuda_dropout.h is device code for .cu files"
#endif

#include "ops/dropout/dropout.h"

// One element: x·scale where its word keeps it, else 0, rounded on its
// own (no fused multiply-add into plus), then plus added when there is one:
// the bits DROPOUT and an ADD after it give
__device__ __forceinline__ float ge2_dropout_one(uint32_t bits, float p, float scale, float x, const float *plus)
{
    const float kept = ge2_dropout_kept(bits, p) ? __fmul_rn(x, scale) : 0.0f;
    return plus ? *plus + kept : kept;
}

// The four elements of draw r (a group: element 4g + k takes word k),
// plus the four addends when plus is not NULL
__device__ __forceinline__ float4 ge2_dropout_four(const ge2_philox4 &r, float p, float scale, float4 x,
                                                   const float4 *plus)
{
    return make_float4(ge2_dropout_one(r.v[0], p, scale, x.x, plus ? &plus->x : NULL),
                       ge2_dropout_one(r.v[1], p, scale, x.y, plus ? &plus->y : NULL),
                       ge2_dropout_one(r.v[2], p, scale, x.z, plus ? &plus->z : NULL),
                       ge2_dropout_one(r.v[3], p, scale, x.w, plus ? &plus->w : NULL));
}

#endif /* GE2_OPS_DROPOUT_CUDA_DROPOUT_H */
