// A step's host <-> device copies as one kernel (step_copy.h says why).
#include "kernels/cuda/check.h"
#include "kernels/cuda/step_copy.h"

struct ge2_cuda_copies {
    ge2_cuda_copy copy[GE2_CUDA_MAX_COPIES];
    int n;
};

// ------------------------------------------------------------------- kernels

__global__ void ge2_step_copy_kernel(const ge2_cuda_copies copies)
{
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long threads = (long long)gridDim.x * blockDim.x;
    for (int i = 0; i < copies.n; i++)
        ge2_copy_share(copies.copy[i], tid, threads);
    /* a host reader waits for the step's event, but the writes must reach
     * host memory before the kernel counts as done */
    __threadfence_system();
}

// ----------------------------------------------------------------- launchers

// One kernel for up to GE2_CUDA_MAX_COPIES non-empty copies from copies[*at],
// which it advances past what it took.
static ge2_status launch_some(const ge2_cuda_copy *copies, int n, int *at, void *stream)
{
    ge2_cuda_copies c = {};
    size_t largest = 0;
    for (; *at < n && c.n < GE2_CUDA_MAX_COPIES; (*at)++)
        if (copies[*at].bytes > 0) {
            c.copy[c.n++] = copies[*at];
            largest = copies[*at].bytes > largest ? copies[*at].bytes : largest;
        }
    if (c.n == 0)
        return GE2_OK;
    /* 16 bytes per thread in flight: a 200 KB batch over PCIe wants ~50 blocks */
    unsigned blocks = ge2_cuda_blocks((int64_t)((largest + 15) / 16), GE2_CUDA_THREADS);
    if (blocks > 264)
        blocks = 264;
    ge2_step_copy_kernel<<<blocks, GE2_CUDA_THREADS, 0, (cudaStream_t)stream>>>(c);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return ge2_error(GE2_ERR_CUDA, "ge2 cuda backend: the step's copy kernel: %s (%s)", cudaGetErrorString(e),
                         cudaGetErrorName(e));
    return GE2_OK;
}

extern "C" ge2_status ge2_cuda_copy_launch(const ge2_cuda_copy *copies, int n, void *stream)
{
    for (int at = 0; at < n;)
        GE2_TRY(launch_some(copies, n, &at, stream));
    return GE2_OK;
}
