/* CUDA C++ only: the arithmetic of LAYER_NORM_GRAD_INPUT's rows, shared by
 * its kernel (cuda_layer_norm.cu) and the fused layer-norm backward
 * (fusion/ln_backward), so both compute dx by the same expressions (the
 * compiler may still contract them into fused multiply-adds differently
 * in each kernel). With g = dy·w and x̂ = (x - mean)·rstd:
 * dx = rstd · (g - mean(g) - x̂ · mean(g·x̂)). */
#ifndef GE2_OPS_NORM_CUDA_LAYER_NORM_H
#define GE2_OPS_NORM_CUDA_LAYER_NORM_H

#ifndef __CUDACC__
#error "ops/norm/cuda_layer_norm.h is device code for .cu files"
#endif

// One value's part of the row sums Σ g and Σ g·x̂
__device__ __forceinline__ void ge2_ln_grad_sums(float d, float x, float w, float mean, float rstd, float &sg,
                                                 float &sgx)
{
    const float g = d * w;
    sg += g;
    sgx += g * (x - mean) * rstd;
}

// One value of dx, given the row's mean(g) and mean(g·x̂)
__device__ __forceinline__ float ge2_ln_grad_dx(float d, float x, float w, float mean, float rstd, float mg, float mgx)
{
    return __fmul_rn(rstd, d * w - mg - (x - mean) * rstd * mgx);
}

#endif /* GE2_OPS_NORM_CUDA_LAYER_NORM_H */
