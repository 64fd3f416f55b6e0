// Device stores of f32 results into f32 or bf16 memory, one element or four
// at a time, and loads back: how a kernel writes an output the bf16 storage
// pass made bf16 (ge2_op_def.stores_bf16), or reads an input it made so
// (ge2_op_def.reads_bf16), with the same code as its f32 form. bf16 rounds
// to nearest even (__float2bfloat16_rn), as graph/bf16.h does on the CPU.
// CUDA C++ only.
#ifndef GE2_KERNELS_CUDA_BF16_STORE_H
#define GE2_KERNELS_CUDA_BF16_STORE_H

#include <cuda_bf16.h>
#include <stdint.h>

static __device__ __forceinline__ void ge2_store(float *y, float v) { *y = v; }
static __device__ __forceinline__ void ge2_store(__nv_bfloat16 *y, float v) { *y = __float2bfloat16_rn(v); }

// y[0..3] = v; y is aligned for the four (16 bytes f32, 8 bytes bf16)
static __device__ __forceinline__ void ge2_store4(float *y, float4 v) { *reinterpret_cast<float4 *>(y) = v; }
static __device__ __forceinline__ void ge2_store4(__nv_bfloat16 *y, float4 v)
{
    __nv_bfloat162 *out = reinterpret_cast<__nv_bfloat162 *>(y);
    out[0] = __floats2bfloat162_rn(v.x, v.y);
    out[1] = __floats2bfloat162_rn(v.z, v.w);
}

// Loads of f32 or bf16 memory as f32 (bf16 widens exactly)
static __device__ __forceinline__ float ge2_load(const float *x) { return *x; }
static __device__ __forceinline__ float ge2_load(const __nv_bfloat16 *x) { return __bfloat162float(*x); }

// x[0..3] as f32; x is aligned for the four (16 bytes f32, 8 bytes bf16)
static __device__ __forceinline__ float4 ge2_load4(const float *x) { return *reinterpret_cast<const float4 *>(x); }
static __device__ __forceinline__ float4 ge2_load4(const __nv_bfloat16 *x)
{
    const __nv_bfloat162 *in = reinterpret_cast<const __nv_bfloat162 *>(x);
    const float2 a = __bfloat1622float2(in[0]), b = __bfloat1622float2(in[1]);
    return make_float4(a.x, a.y, b.x, b.y);
}

// Whether y can take ge2_store4 (and ge2_load4, which needs the same) at every
// multiple of four elements
template <typename Y> static inline bool ge2_store4_aligned(const Y *y)
{
    return (uintptr_t)y % (4 * sizeof(Y)) == 0;
}

#endif // GE2_KERNELS_CUDA_BF16_STORE_H
