// Asynchronous global -> shared copies (sm_80+ cp.async), for the kernels
// that stage operands through shared memory (gemm_tiled.cu, mlp_step.cu):
// a thread issues all its copies and waits once, so a tile's loads cost one
// memory latency instead of one per load. CUDA C++ only.
#ifndef GE2_KERNELS_CUDA_CP_ASYNC_H
#define GE2_KERNELS_CUDA_CP_ASYNC_H

// One f32 copy; !valid writes 0 and reads nothing (src is then any mapped address).
__device__ __forceinline__ void cp_async_f32(float *dst, const float *src, bool valid)
{
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 4 : 0));
}

// 16 bytes (dst and src 16-byte aligned); only the first `bytes` (0..16) are
// read, the rest of dst is zero-filled.
__device__ __forceinline__ void cp_async_16(float *dst, const float *src, int bytes)
{
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(bytes));
}

__device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::);
}

// Waits until at most N committed groups are still in flight.
template <int N> __device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

#endif /* GE2_KERNELS_CUDA_CP_ASYNC_H */
