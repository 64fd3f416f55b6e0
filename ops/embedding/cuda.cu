// EMBEDDING and its backward op. The forward copies rows (an id outside the
// table gives a row of zeros and is counted: a kernel cannot fail). The
// backward cuts the positions into segments; a block per (8 table rows,
// segment) scans its segment's ids in position order and adds the dy rows
// of its ids into partial sums in the workspace, and a second kernel adds
// each row's partials in segment order: every sum in a fixed order, no
// atomics, the same bits as every other run, and as many blocks as table
// rows / 8 times segments (a small vocabulary alone would leave most of
// the GPU idle; a block per row scanned each segment 8 times as often,
// which was most of the op's time). Where the workspace cannot hold two partials per row, a block per
// table row scans all the ids. Every block reads all the ids of its
// segment, which suits character and small vocabularies. A vocabulary
// whose partials do not fit (GPT-2's 50,304 rows; a BPE's 8192) sorts the
// positions by id first instead (a count per row, their running sums, the
// positions scattered into their rows' ranges, each range put back in
// position order by rank), and a block per row sums its own dy rows in
// position order: the work is the positions', not rows x positions.
#include "kernels/cuda/bad_index.h"
#include "kernels/cuda/check.h"
#include "ops/embedding/embedding.h"

#define GE2_EMB_THREADS 256
#define GE2_EMB_TILE 1024 // ids staged in shared memory at a time
#define GE2_EMB_SEGMENT 256 // positions per segment of the segmented backward
#define GE2_EMB_GROUP 8     // table rows a block of the segmented backward sums

// ------------------------------------------------------------------- kernels

// table [rows, c], ids [n] -> y [n, c]. An id outside [0, rows) gives a
// row of zeros and is counted in the control block, by the thread of the
// position's first column (the program then fails the step).
__global__ void ge2_embedding_kernel(long long n, int rows, int c, const float *table, const int *ids, float *y,
                                     ge2_control *ctl, int node)
{
    const long long total = n * c;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        const long long p = e / c;
        const int id = ids[p], i = (int)(e - p * c);
        const bool ok = i == 0 ? ge2_index_ok(ctl, node, GE2_BAD_ID, p, id, rows) : id >= 0 && id < rows;
        y[e] = ok ? table[(long long)id * c + i] : 0.0f;
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

// dy [n, c], ids [n] -> part [segments, rows, c]: block (g, s) sums, for
// each id v of rows 8g .. 8g+7, the dy rows of id v among positions
// s·GE2_EMB_SEGMENT ..., in order (a row's sum only ever adds its own dy
// rows, so the unrolled selection leaves each sum's order as it was)
__global__ void ge2_embedding_backward_part_kernel(long long n, int rows, int c, const float *dy, const int *ids,
                                                   float *part)
{
    __shared__ unsigned tile[GE2_EMB_SEGMENT];
    const int v0 = blockIdx.x * GE2_EMB_GROUP;
    const long long p0 = (long long)blockIdx.y * GE2_EMB_SEGMENT;
    const int len = n - p0 < GE2_EMB_SEGMENT ? (int)(n - p0) : GE2_EMB_SEGMENT;
    for (int k = threadIdx.x; k < len; k += blockDim.x)
        tile[k] = (unsigned)ids[p0 + k] - (unsigned)v0; // its place in the group; 8 or more: not this group's
    __syncthreads();
    float *out = part + ((long long)blockIdx.y * rows + v0) * c;
    for (int i = threadIdx.x; i < c; i += blockDim.x) {
        float acc[GE2_EMB_GROUP] = {};
        for (int k = 0; k < len; k++) {
            const unsigned at = tile[k];
            if (at >= GE2_EMB_GROUP)
                continue;
            const float d = dy[(p0 + k) * c + i];
#pragma unroll
            for (int j = 0; j < GE2_EMB_GROUP; j++)
                if (at == (unsigned)j)
                    acc[j] += d;
        }
#pragma unroll
        for (int j = 0; j < GE2_EMB_GROUP; j++)
            if (v0 + j < rows)
                out[(long long)j * c + i] = acc[j];
    }
}

// ids [n] -> counts [rows] (zero before): each valid id counted
__global__ void ge2_embedding_count_kernel(long long n, int rows, const int *ids, int *counts)
{
    for (long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x; p < n; p += (long long)gridDim.x * blockDim.x)
        if (ids[p] >= 0 && ids[p] < rows)
            atomicAdd(&counts[ids[p]], 1);
}

// x [count] = 0
__global__ void ge2_embedding_zero_kernel(long long count, int *x)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count;
         i += (long long)gridDim.x * blockDim.x)
        x[i] = 0;
}

// counts [rows] -> starts [rows + 1], their exclusive running sums, and
// cursor [rows] = starts; one block: each thread a contiguous chunk
__global__ void ge2_embedding_starts_kernel(int rows, const int *counts, int *starts, int *cursor)
{
    __shared__ int sums[GE2_EMB_THREADS];
    const int per = (rows + blockDim.x - 1) / blockDim.x, lo = threadIdx.x * per;
    const int hi = lo + per < rows ? lo + per : rows;
    int own = 0;
    for (int v = lo; v < hi; v++)
        own += counts[v];
    sums[threadIdx.x] = own;
    __syncthreads();
    for (int off = 1; off < (int)blockDim.x; off *= 2) { // inclusive scan of the chunks' sums
        const int add = threadIdx.x >= (unsigned)off ? sums[threadIdx.x - off] : 0;
        __syncthreads();
        sums[threadIdx.x] += add;
        __syncthreads();
    }
    int run = sums[threadIdx.x] - own;
    for (int v = lo; v < hi; v++) {
        starts[v] = cursor[v] = run;
        run += counts[v];
    }
    if (threadIdx.x == blockDim.x - 1)
        starts[rows] = sums[threadIdx.x];
}

// each valid position into its row's range of order, in any order
__global__ void ge2_embedding_scatter_kernel(long long n, int rows, const int *ids, int *cursor, int *order)
{
    for (long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x; p < n; p += (long long)gridDim.x * blockDim.x)
        if (ids[p] >= 0 && ids[p] < rows)
            order[atomicAdd(&cursor[ids[p]], 1)] = (int)p;
}

// block v: its positions into sorted in position order (each one's rank
// among them: positions are distinct), then dt row v = their dy rows summed
// in that order (zero for a row no position has)
__global__ void ge2_embedding_gather_kernel(int c, const float *dy, const int *starts, const int *order, int *sorted,
                                            float *dt)
{
    const int v = blockIdx.x, lo = starts[v], len = starts[v + 1] - lo;
    for (int i = threadIdx.x; i < len; i += blockDim.x) {
        const int p = order[lo + i];
        int rank = 0;
        for (int j = 0; j < len; j++)
            rank += order[lo + j] < p;
        sorted[lo + rank] = p;
    }
    __syncthreads(); // this block's sorted range, visible to its threads
    for (int i = threadIdx.x; i < c; i += blockDim.x) {
        float acc = 0.0f;
        for (int k = 0; k < len; k++)
            acc += dy[(long long)sorted[lo + k] * c + i];
        dt[(long long)v * c + i] = acc;
    }
}

// dt [rows, c] = the sum over segments of part [segments, rows, c], in order
__global__ void ge2_embedding_backward_sum_kernel(long long total, int segments, const float *part, float *dt)
{
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        float acc = 0.0f;
        for (int s = 0; s < segments; s++)
            acc += part[s * total + e];
        dt[e] = acc;
    }
}

// ----------------------------------------------------------------- launchers

extern "C" ge2_status ge2_cuda_embedding_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 1u << 1));
    GE2_TRY(ge2_cuda_require_control(l));
    if (!l->out[0].data)
        return GE2_OK;
    const long long rows = l->in[0].shape.dim[0], c = l->in[0].shape.dim[1], n = ge2_shape_numel(l->in[1].shape);
    if (rows > INT32_MAX || c > INT32_MAX - GE2_EMB_THREADS)
        return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_embedding (node %d): a table of %lld x %lld; the CUDA kernel takes "
                         "fewer than 2^31 rows and columns",
                         l->node->id, rows, c);
    ge2_embedding_kernel<<<ge2_cuda_blocks(n * c, GE2_CUDA_THREADS), GE2_CUDA_THREADS, 0, ge2_cuda_stream(l)>>>(
        n, (int)rows, (int)c, (const float *)l->in[0].data, (const int *)l->in[1].data, (float *)l->out[0].data,
        l->control, l->node->id);
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
    const float *dy = (const float *)l->in[0].data;
    const int *ids = (const int *)l->in[1].data;
    float *dt = (float *)l->out[0].data;
    long long segments = (n + GE2_EMB_SEGMENT - 1) / GE2_EMB_SEGMENT;
    const long long fit = rows * c > 0 ? (long long)(l->workspace_bytes / sizeof(float)) / (rows * c) : 0;
    if (segments > fit)
        segments = fit;
    if (segments > 65535)
        segments = 65535;
    /* the sort's ints: counts, starts, cursor [rows (+ 1)], order and sorted [n] */
    const size_t sort_bytes = sizeof(int) * (size_t)(3 * rows + 1 + 2 * n);
    if ((segments < 2 || n > segments * GE2_EMB_SEGMENT) && l->workspace && sort_bytes <= l->workspace_bytes &&
        n < INT32_MAX) {
        int *counts = (int *)l->workspace, *starts = counts + rows, *cursor = starts + rows + 1, *order = cursor + rows;
        cudaStream_t stream = ge2_cuda_stream(l);
        ge2_embedding_zero_kernel<<<ge2_cuda_blocks(rows, GE2_CUDA_THREADS), GE2_CUDA_THREADS, 0, stream>>>(rows,
                                                                                                          counts);
        GE2_TRY(ge2_cuda_check_launch(l, "ge2_embedding_zero_kernel"));
        ge2_embedding_count_kernel<<<ge2_cuda_blocks(n, GE2_CUDA_THREADS), GE2_CUDA_THREADS, 0, stream>>>(
            n, (int)rows, ids, counts);
        GE2_TRY(ge2_cuda_check_launch(l, "ge2_embedding_count_kernel"));
        ge2_embedding_starts_kernel<<<1, GE2_EMB_THREADS, 0, stream>>>((int)rows, counts, starts, cursor);
        GE2_TRY(ge2_cuda_check_launch(l, "ge2_embedding_starts_kernel"));
        ge2_embedding_scatter_kernel<<<ge2_cuda_blocks(n, GE2_CUDA_THREADS), GE2_CUDA_THREADS, 0, stream>>>(
            n, (int)rows, ids, cursor, order);
        GE2_TRY(ge2_cuda_check_launch(l, "ge2_embedding_scatter_kernel"));
        ge2_embedding_gather_kernel<<<(unsigned)rows, GE2_EMB_THREADS, 0, stream>>>((int)c, dy, starts, order,
                                                                                    order + n, dt);
        return ge2_cuda_check_launch(l, "ge2_embedding_gather_kernel");
    }
    if (segments < 2 || !l->workspace || n > segments * GE2_EMB_SEGMENT) { /* one segment, or too many */
        ge2_embedding_backward_kernel<<<(unsigned)rows, GE2_EMB_THREADS, 0, ge2_cuda_stream(l)>>>(n, (int)c, dy, ids,
                                                                                                  dt);
        return ge2_cuda_check_launch(l, "ge2_embedding_backward_kernel");
    }
    float *part = (float *)l->workspace;
    const unsigned groups = (unsigned)((rows + GE2_EMB_GROUP - 1) / GE2_EMB_GROUP);
    ge2_embedding_backward_part_kernel<<<dim3(groups, (unsigned)segments), GE2_EMB_THREADS, 0, ge2_cuda_stream(l)>>>(
        n, (int)rows, (int)c, dy, ids, part);
    GE2_TRY(ge2_cuda_check_launch(l, "ge2_embedding_backward_part_kernel"));
    ge2_embedding_backward_sum_kernel<<<ge2_cuda_blocks(rows * c, GE2_CUDA_THREADS), GE2_CUDA_THREADS, 0,
                                        ge2_cuda_stream(l)>>>(rows * c, (int)segments, part, dt);
    return ge2_cuda_check_launch(l, "ge2_embedding_backward_sum_kernel");
}
