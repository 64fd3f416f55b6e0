// ge2_cuda_hold: one thread spinning on %globaltimer (nanoseconds).
#include <cuda_runtime.h>

#include "graph/error.h"
#include "kernels/cuda/hold.h"

__device__ __forceinline__ unsigned long long ge2_global_ns()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void ge2_hold_kernel(unsigned long long ns)
{
    const unsigned long long end = ge2_global_ns() + ns;
    while (ge2_global_ns() < end)
        __nanosleep(1000);
}

extern "C" ge2_status ge2_cuda_hold(void *stream, unsigned microseconds)
{
    ge2_hold_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(1000ull * microseconds);
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? GE2_OK
                            : ge2_error(GE2_ERR_CUDA, "ge2_cuda_hold: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
}
