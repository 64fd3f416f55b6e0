// A device loop's work between steps (step_loop.h, graph/step_loop.h).
#include <math.h>

#include "graph/epoch_order.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/step_loop.h"

// --------------------------------------------------------------------- kernels

// One block per example of the batch (a grid-stride over them), its threads
// over the example's row. The example's index is the same function of
// (seed, epoch, position) the host's batcher and ge2_program_run use.
__global__ void ge2_loop_gather_kernel(const ge2_step_loop loop)
{
    __shared__ uint64_t example;
    const ge2_loop_counters *c = loop.counters;
    for (int64_t i = blockIdx.x; i < loop.batch; i += gridDim.x) {
        if (threadIdx.x == 0) {
            const ge2_epoch_order order = ge2_epoch_order_of(loop.seed, (uint64_t)c->epoch, loop.examples);
            const uint64_t position = (uint64_t)(c->batch_in_epoch * loop.batch + i);
            example = ge2_epoch_shard_at(&order, loop.shuffle, loop.rank, loop.world, position);
        }
        __syncthreads();
        for (int f = 0; f < loop.n_fields; f++) {
            const ge2_loop_field *fd = &loop.field[f];
            if (fd->widen) {
                const unsigned char *src = (const unsigned char *)fd->rows + example * (uint64_t)fd->row;
                float *dst = (float *)fd->feed + i * fd->row;
                for (int64_t j = threadIdx.x; j < fd->row; j += blockDim.x)
                    dst[j] = (float)src[j] / fd->divisor; // IEEE division, as the CPU's
                continue;
            }
            const int64_t bytes = fd->row * fd->elem_bytes;
            const unsigned char *src = (const unsigned char *)fd->rows + example * (uint64_t)bytes;
            unsigned char *dst = (unsigned char *)fd->feed + i * bytes;
            if (((uintptr_t)src | (uintptr_t)dst | (uintptr_t)bytes) % 4 == 0) {
                for (int64_t j = threadIdx.x; j < bytes / 4; j += blockDim.x)
                    ((uint32_t *)dst)[j] = ((const uint32_t *)src)[j];
            } else {
                for (int64_t j = threadIdx.x; j < bytes; j += blockDim.x)
                    dst[j] = src[j];
            }
        }
        __syncthreads(); // `example` is the next iteration's
    }
}

// One thread: the sums in result order, as the host folds a step.
__global__ void ge2_loop_advance_kernel(const ge2_step_loop loop, cudaGraphConditionalHandle handle)
{
    ge2_loop_counters *c = loop.counters;
    const int64_t step = ++c->step_number;
    c->steps_run++;
    const int64_t bad = *loop.bad_index_count;
    if (bad > c->bad_index_count) { // the host fails this step: not counted, the position stays
        c->bad_index_count = bad;
        c->failed = 1;
        cudaGraphSetConditional(handle, 0u);
        return;
    }
    for (int r = 0; r < loop.n_results; r++) {
        const ge2_loop_result *res = &loop.results[r];
        const double v = !res->src ? 0.0 : res->is_f64 ? *(const double *)res->src : (double)*(const float *)res->src;
        loop.sums[r] += v;
        if (res->role == GE2_LOOP_LOSS) {
            c->loss_sum += v;
            if (!isfinite(v) && c->first_nonfinite == 0)
                c->first_nonfinite = step;
        } else if (res->role == GE2_LOOP_METRIC) {
            c->metric_sum += v;
        }
    }
    if (++c->batch_in_epoch == loop.batches) {
        c->batch_in_epoch = 0;
        c->epoch++;
    }
    cudaGraphSetConditional(handle, --c->remaining > 0 ? 1u : 0u);
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
