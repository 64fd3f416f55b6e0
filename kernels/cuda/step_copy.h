/* A step's copies between pinned host memory and the device, done by the
 * SMs instead of the copy engine.
 *
 * In a CUDA Graph every switch between a memcpy node and a kernel node costs
 * microseconds of replay (bench/RESULTS.md has the probe's figures), so the
 * CUDA backend moves each step's feeds in and its loss out with these. Pinned memory from cudaMallocHost is mapped
 * into the device's address space (unified addressing), so a kernel reads
 * and writes it through the host pointer.
 */
#ifndef GE2_KERNELS_CUDA_STEP_COPY_H
#define GE2_KERNELS_CUDA_STEP_COPY_H

#include <stddef.h>

#include "ge2/ge2.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most copies one launch takes. */
#define GE2_CUDA_MAX_COPIES 4

typedef struct ge2_cuda_copy {
    void *dst;
    const void *src;
    size_t bytes; /* 0: nothing */
} ge2_cuda_copy;

/* The n copies on stream (a cudaStream_t), GE2_CUDA_MAX_COPIES per kernel:
 * one kernel for up to that many; nothing is launched when every copy is
 * empty. */
ge2_status ge2_cuda_copy_launch(const ge2_cuda_copy *copies, int n, void *stream);

#ifdef __cplusplus
}

/* The calling thread's share (thread `tid` of `threads`) of one copy: 16
 * bytes at a time where dst, src and bytes allow it, else 4 or 1. Also used
 * inside the whole-step MLP kernel (mlp_step.cu). */
__device__ __forceinline__ void ge2_copy_share(const ge2_cuda_copy &c, long long tid, long long threads)
{
    const uintptr_t align = (uintptr_t)c.dst | (uintptr_t)c.src | (uintptr_t)c.bytes;
    if (align % 16 == 0) {
        float4 *d = (float4 *)c.dst;
        const float4 *s = (const float4 *)c.src;
        for (long long i = tid; i < (long long)(c.bytes / 16); i += threads)
            d[i] = s[i];
    } else if (align % 4 == 0) {
        float *d = (float *)c.dst;
        const float *s = (const float *)c.src;
        for (long long i = tid; i < (long long)(c.bytes / 4); i += threads)
            d[i] = s[i];
    } else {
        unsigned char *d = (unsigned char *)c.dst;
        const unsigned char *s = (const unsigned char *)c.src;
        for (long long i = tid; i < (long long)c.bytes; i += threads)
            d[i] = s[i];
    }
}
#endif

#endif /* GE2_KERNELS_CUDA_STEP_COPY_H */
