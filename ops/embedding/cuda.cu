// EMBEDDING and its backward op. The forward copies rows (an id outside the
// table gives a row of zeros: a kernel cannot return an error). The
// backward gives each table row to one block, which scans the ids in
// position order, a shared-memory tile at a time, and adds the dy rows of
// its id: every row's sum in position order, no atomics, the same bits as
// every other run. Each block reads all the ids, which suits character and
// small vocabularies; a large vocabulary would want the positions sorted by
// id first.
#include "kernels/cuda/check.h"
#include "ops/embedding/embedding.h"

#define GE2_EMB_THREADS 256
#define GE2_EMB_TILE 1024 // ids staged in shared memory at a time

// ------------------------------------------------------------------- kernels

// table [rows, c], ids [n] -> y [n, c]
__global__ void ge2_embedding_kernel(long long n, int rows, int c, const float *table, const int *ids, float *y)
{
    const long long total = n * c;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        const long long p = e / c;
        const int id = ids[p], i = (int)(e - p * c);
        y[e] = id >= 0 && id < rows ? table[(long long)id * c + i] : 0.0f;
    }
}

// dy [n, c], ids [n] -> dtable [rows, c]: block v sums row v, its threads
// taking the columns in turn
__global__ void ge2_embedding_backward_kernel(long long n, int c, const float *dy, const int *ids, float *dt)
{
    __shared__ int tile[GE2_EMB_TILE];
    const int v = blockIdx.x;
    for (int c0 = 0; c0 < c; c0 += blockDim.x) {
        const int i = c0 + threadIdx.x;
        float acc = 0.0f;
        for (long long p0 = 0; p0 < n; p0 += GE2_EMB_TILE) {
            const int len = n - p0 < GE2_EMB_TILE ? (int)(n - p0) : GE2_EMB_TILE;
            __syncthreads(); // the previous tile is read
            for (int k = threadIdx.x; k < len; k += blockDim.x)
                tile[k] = ids[p0 + k];
            __syncthreads();
            for (int k = 0; k < len; k++)
                if (tile[k] == v && i < c)
                    acc += dy[(p0 + k) * c + i];
        }
        if (i < c)
            dt[(long long)v * c + i] = acc;
    }
}

// ----------------------------------------------------------------- launchers

extern "C" ge2_status ge2_cuda_embedding_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 1u << 1));
    if (!l->out[0].data)
        return GE2_OK;
    const long long rows = l->in[0].shape.dim[0], c = l->in[0].shape.dim[1], n = ge2_shape_numel(l->in[1].shape);
    if (rows > INT32_MAX || c > INT32_MAX - GE2_EMB_THREADS)
        return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_embedding (node %d): a table of %lld x %lld; the CUDA kernel takes "
                         "fewer than 2^31 rows and columns",
                         l->node->id, rows, c);
    ge2_embedding_kernel<<<ge2_cuda_blocks(n * c, GE2_CUDA_THREADS), GE2_CUDA_THREADS, 0, ge2_cuda_stream(l)>>>(
        n, (int)rows, (int)c, (const float *)l->in[0].data, (const int *)l->in[1].data, (float *)l->out[0].data);
    return ge2_cuda_check_launch(l, "ge2_embedding_kernel");
}

extern "C" ge2_status ge2_cuda_embedding_backward_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 1u << 1));
    if (!l->out[0].data)
        return GE2_OK;
    const long long rows = l->out[0].shape.dim[0], c = l->out[0].shape.dim[1], n = ge2_shape_numel(l->in[1].shape);
    if (rows > INT32_MAX || c > INT32_MAX - GE2_EMB_THREADS)
        return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_embedding_backward (node %d): a table of %lld x %lld; the CUDA "
                         "kernel takes fewer than 2^31 rows and columns",
                         l->node->id, rows, c);
    ge2_embedding_backward_kernel<<<(unsigned)rows, GE2_EMB_THREADS, 0, ge2_cuda_stream(l)>>>(
        n, (int)c, (const float *)l->in[0].data, (const int *)l->in[1].data, (float *)l->out[0].data);
    return ge2_cuda_check_launch(l, "ge2_embedding_backward_kernel");
}
