// A device loop's work between steps (step_loop.h, graph/step_loop.h).
#include "kernels/cuda/check.h"
#include "kernels/cuda/step_loop.h"

// --------------------------------------------------------------------- kernels

// One block per example of the batch (a grid-stride over them), its threads
// over the example's row (graph/step_loop.h's helpers, which the CPU's loop
// runs too).
__global__ void ge2_loop_gather_kernel(const ge2_step_loop loop)
{
    __shared__ uint64_t example;
    for (int64_t i = blockIdx.x; i < loop.batch; i += gridDim.x) {
        if (threadIdx.x == 0)
            example = ge2_loop_example(&loop, loop.counters, i);
        __syncthreads();
        for (int f = 0; f < loop.n_fields; f++)
            ge2_loop_copy_row(&loop.field[f], example, i, threadIdx.x, blockDim.x);
        __syncthreads(); // `example` is the next iteration's
    }
}

// One thread: the step counted and summed, and the WHILE node told whether
// to run again.
__global__ void ge2_loop_advance_kernel(const ge2_step_loop loop, cudaGraphConditionalHandle handle)
{
    cudaGraphSetConditional(handle, ge2_loop_advance(&loop, loop.counters) ? 1u : 0u);
}

// ------------------------------------------------------------------- launchers

static ge2_status launched(const char *kernel)
{
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return ge2_error(GE2_ERR_CUDA, "ge2 cuda backend: the device loop's %s: %s (%s)", kernel,
                         cudaGetErrorString(e), cudaGetErrorName(e));
    return GE2_OK;
}

extern "C" ge2_status ge2_cuda_loop_gather(const ge2_step_loop *loop, void *stream)
{
    if (loop->n_fields < 1 || loop->n_fields > GE2_LOOP_MAX_FIELDS || loop->batch < 1)
        return ge2_error(GE2_ERR_STATE, "ge2 cuda backend: a device loop of %d fields and batches of %lld",
                         (int)loop->n_fields, (long long)loop->batch);
    const unsigned blocks = loop->batch < GE2_CUDA_MAX_BLOCKS ? (unsigned)loop->batch : GE2_CUDA_MAX_BLOCKS;
    ge2_loop_gather_kernel<<<blocks, GE2_CUDA_THREADS, 0, (cudaStream_t)stream>>>(*loop);
    return launched("gather");
}

extern "C" ge2_status ge2_cuda_loop_advance(const ge2_step_loop *loop, unsigned long long handle, void *stream)
{
    ge2_loop_advance_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(*loop, (cudaGraphConditionalHandle)handle);
    return launched("advance");
}
