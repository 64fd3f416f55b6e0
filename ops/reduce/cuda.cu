// Sums over dims: SUM and MEAN (all elements or one axis) and REDUCE_TO (sum
// over the dims a broadcast expanded). All three are the same problem — an
// output whose padded 4-D shape has 1 where the input is summed — so one
// launcher serves them, with a final scale (1/len for MEAN), picking among
// five kernels by how many outputs there are and how their terms lie.
//
// Deterministic: each output is summed in a fixed order by a fixed tree, no
// atomics, so replays reproduce eager runs bit for bit.
#include <cuda_bf16.h>
#include "kernels/broadcast.h"
#include "kernels/cuda/block_reduce.h"
#include "kernels/cuda/check.h"
#include "ops/reduce/reduce.h"

// Thread rows splitting a strided reduction (ge2_reduce_cols_kernel).
#define GE2_REDUCE_SLICES 16
// Up to this many terms a thread sums an output alone.
#define GE2_REDUCE_SERIAL 16
// A block per output when there are at most this many outputs...
#define GE2_REDUCE_BLOCK_OUTPUTS 1024
// ...each of at least this many terms.
#define GE2_REDUCE_BLOCK_TERMS 2048

// ------------------------------------------------------------------- kernels

// x viewed as 4-D (right-aligned, leading 1s). Output dim d is either x's dim
// (kept) or 1 (summed: red_dim[d] = x's dim); an output coordinate plus a
// reduction coordinate addresses one x element.
struct ge2_reduce_geom {
    int64_t x_stride[GE2_MAX_DIMS]; // x's own row-major strides
    int64_t out_dim[GE2_MAX_DIMS];  // 1 where summed
    int64_t red_dim[GE2_MAX_DIMS];  // 1 where kept
    int64_t n_red;                  // product of red_dim
};

__device__ __forceinline__ long long ge2_reduce_base(const ge2_reduce_geom &g, long long o)
{
    long long off = 0;
    for (int d = GE2_MAX_DIMS - 1; d >= 0; d--) {
        off += (o % g.out_dim[d]) * g.x_stride[d];
        o /= g.out_dim[d];
    }
    return off;
}

__device__ __forceinline__ long long ge2_reduce_step(const ge2_reduce_geom &g, long long r)
{
    long long off = 0;
    for (int d = GE2_MAX_DIMS - 1; d >= 0; d--) {
        off += (r % g.red_dim[d]) * g.x_stride[d];
        r /= g.red_dim[d];
    }
    return off;
}

// Short reductions (at most GE2_REDUCE_SERIAL terms): one thread per output.
__global__ void ge2_reduce_thread_kernel(long long n_out, const float *x /* [x dims] */, float *y /* [n_out] */,
                                         ge2_reduce_geom g, float scale)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x; o < n_out; o += stride) {
        const float *base = x + ge2_reduce_base(g, o);
        float acc = 0.0f;
        for (long long r = 0; r < g.n_red; r++)
            acc += base[ge2_reduce_step(g, r)];
        y[o] = acc * scale;
    }
}

// Summed dims outside the kept ones (a bias gradient [B, K] -> [K]):
// adjacent outputs are adjacent in memory, so 32 outputs per block read
// coalesced rows, and GE2_REDUCE_SLICES thread rows split the reduction,
// their partials added in row order.
__global__ void ge2_reduce_cols_kernel(long long n_out, const float *x /* [x dims] */, float *y /* [n_out] */,
                                       ge2_reduce_geom g, float scale)
{
    __shared__ float part[GE2_REDUCE_SLICES][GE2_WARP + 1];
    long long o = (long long)blockIdx.x * GE2_WARP + threadIdx.x;
    float acc = 0.0f;
    if (o < n_out) {
        const float *base = x + ge2_reduce_base(g, o);
        for (long long r = threadIdx.y; r < g.n_red; r += GE2_REDUCE_SLICES)
            acc += base[ge2_reduce_step(g, r)];
    }
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && o < n_out) {
        float sum = 0.0f;
        for (int k = 0; k < GE2_REDUCE_SLICES; k++)
            sum += part[k][threadIdx.x];
        y[o] = sum * scale;
    }
}

// The innermost dim is summed (a row sum): one warp per output, lanes
// striding along the contiguous row.
__global__ void ge2_reduce_warp_kernel(long long n_out, const float *x /* [x dims] */, float *y /* [n_out] */,
                                       ge2_reduce_geom g, float scale)
{
    int lane = threadIdx.x % GE2_WARP;
    long long o = ge2_grid_warp();
    if (o >= n_out)
        return;
    const float *base = x + ge2_reduce_base(g, o);
    float acc = 0.0f;
    for (long long r = lane; r < g.n_red; r += GE2_WARP)
        acc += base[ge2_reduce_step(g, r)];
    acc = ge2_warp_sum(acc);
    if (lane == 0)
        y[o] = acc * scale;
}

// Tall column sums (a bias gradient [rows, n] -> [n]) in two passes, so that
// enough blocks read at once: blocks of 32 columns x GE2_COLSUM_LANES thread
// rows each sum one chunk of rows into partial [chunk, n] (the launch's
// workspace), then a thread per column adds the chunks' partials in order.
// The REDUCE_COLS and REDUCE_BLOCK kernels run a block per 32 columns or per
// column: a few dozen blocks for a layer's bias, too few to fill the GPU.
#define GE2_COLSUM_LANES 8
#define GE2_COLSUM_CHUNK 256 // rows per chunk at least: 32 per thread
#define GE2_COLSUM_MAX_CHUNKS 256 // longer columns take longer chunks: the finish adds at most this many

template <typename T>
__global__ void ge2_column_partials_kernel(long long rows, long long n, long long chunk_rows,
                                           const T *x /* [rows, n] */, float *partial /* [chunks, n] */)
{
    __shared__ float part[GE2_COLSUM_LANES][GE2_WARP + 1];
    const long long c = (long long)blockIdx.x * GE2_WARP + threadIdx.x, r0 = (long long)blockIdx.y * chunk_rows;
    const long long r1 = r0 + chunk_rows < rows ? r0 + chunk_rows : rows;
    float acc = 0.0f;
    if (c < n) {
#pragma unroll 4
        for (long long r = r0 + threadIdx.y; r < r1; r += GE2_COLSUM_LANES)
            acc += (float)x[r * n + c];
    }
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < n) {
        float sum = 0.0f;
        for (int k = 0; k < GE2_COLSUM_LANES; k++)
            sum += part[k][threadIdx.x];
        partial[blockIdx.y * n + c] = sum;
    }
}

__global__ void ge2_column_finish_kernel(long long n, int chunks, const float *partial /* [chunks, n] */,
                                         float *y /* [n] */, float scale)
{
    const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= n)
        return;
    float sum = 0.0f;
    for (int k = 0; k < chunks; k++)
        sum += partial[k * n + c];
    y[c] = sum * scale;
}

// Few outputs over long reductions (sum of everything): one block per output.
__global__ void ge2_reduce_block_kernel(const float *x /* [x dims] */, float *y /* [gridDim.x] */,
                                        ge2_reduce_geom g, float scale)
{
    const float *base = x + ge2_reduce_base(g, blockIdx.x);
    float acc = 0.0f;
    for (long long r = threadIdx.x; r < g.n_red; r += blockDim.x)
        acc += base[ge2_reduce_step(g, r)];
    acc = ge2_block_sum(acc);
    if (threadIdx.x == 0)
        y[blockIdx.x] = acc * scale;
}

// ----------------------------------------------------------------- launchers

// keep(d) says, for x's dim d (0-based in x), whether the output keeps it.
static ge2_reduce_geom make_geom(ge2_shape x, const bool *keep /* [x.ndim] */)
{
    ge2_reduce_geom g;
    int64_t dim[GE2_MAX_DIMS];
    ge2_bcast_dims(x, dim);
    ge2_bcast_strides(x, x, g.x_stride);
    g.n_red = 1;
    for (int d = 0; d < GE2_MAX_DIMS; d++) {
        int xd = x.ndim - (GE2_MAX_DIMS - d);
        bool kept = xd < 0 || keep[xd];
        g.out_dim[d] = kept ? dim[d] : 1;
        g.red_dim[d] = kept ? 1 : dim[d];
        g.n_red *= g.red_dim[d];
    }
    return g;
}

typedef enum reduce_kernel { REDUCE_THREAD, REDUCE_COLS, REDUCE_WARP, REDUCE_BLOCK, REDUCE_COLUMN_CHUNKS } reduce_kernel;

// Does g sum x's leading dims and keep the trailing ones, so that x is
// [n_red, n_out] summed over its rows?
static bool is_column_sum(const ge2_reduce_geom &g)
{
    int d = 0;
    while (d < GE2_MAX_DIMS && g.out_dim[d] == 1)
        d++;
    for (; d < GE2_MAX_DIMS; d++)
        if (g.red_dim[d] != 1)
            return false;
    return true;
}

// Chunks of rows for the two-pass column sums, or 0 when they don't apply:
// too few rows to split, or a workspace too small for two chunks' partials.
static int column_chunks(long long rows, long long n, size_t workspace_bytes)
{
    if (rows < 2 * GE2_COLSUM_CHUNK || n < 1)
        return 0;
    long long chunks = rows / GE2_COLSUM_CHUNK, room = (long long)(workspace_bytes / ((size_t)n * sizeof(float)));
    chunks = chunks < room ? chunks : room;
    chunks = chunks < GE2_COLSUM_MAX_CHUNKS ? chunks : GE2_COLSUM_MAX_CHUNKS;
    return chunks >= 2 ? (int)chunks : 0;
}

static reduce_kernel pick(const ge2_launch *l, long long n_out, const ge2_reduce_geom &g)
{
    if (l->workspace && is_column_sum(g) && column_chunks(g.n_red, n_out, l->workspace_bytes) > 0)
        return REDUCE_COLUMN_CHUNKS;
    if (g.n_red <= GE2_REDUCE_SERIAL)
        return REDUCE_THREAD;
    if (n_out <= GE2_REDUCE_BLOCK_OUTPUTS && g.n_red >= GE2_REDUCE_BLOCK_TERMS)
        return REDUCE_BLOCK;
    return g.red_dim[GE2_MAX_DIMS - 1] > 1 ? REDUCE_WARP : REDUCE_COLS;
}

// y [n] = the column sums of x [rows, n] times scale in `chunks` chunks of
// rows: partials in the workspace, added in order (chunks 0: one chunk
// written straight to y, scale 1)
template <typename T>
static ge2_status column_sums_in_chunks(const ge2_launch *l, const T *x, long long rows, long long n, int chunks,
                                        float *y, float scale)
{
    cudaStream_t stream = ge2_cuda_stream(l);
    const long long chunk_rows = chunks > 0 ? (rows + chunks - 1) / chunks : rows;
    float *partial = chunks > 0 ? (float *)l->workspace : y;
    ge2_column_partials_kernel<<<dim3((unsigned)((n + GE2_WARP - 1) / GE2_WARP), (unsigned)(chunks > 0 ? chunks : 1)),
                                 dim3(GE2_WARP, GE2_COLSUM_LANES), 0, stream>>>(rows, n, chunk_rows, x, partial);
    GE2_TRY(ge2_cuda_check_launch(l, "ge2_column_partials_kernel"));
    if (chunks == 0)
        return GE2_OK;
    ge2_column_finish_kernel<<<ge2_cuda_blocks(n, GE2_CUDA_THREADS), GE2_CUDA_THREADS, 0, stream>>>(n, chunks, partial,
                                                                                                  y, scale);
    return ge2_cuda_check_launch(l, "ge2_column_finish_kernel");
}

// y [n_out] = the sums g describes of x, times scale, on l's stream (l also
// names the op in errors)
static ge2_status reduce_enqueue(const ge2_launch *l, const float *x, float *y, long long n_out, ge2_reduce_geom g,
                                 float scale)
{
    if (!y || n_out == 0)
        return GE2_OK;
    cudaStream_t stream = ge2_cuda_stream(l);
    switch (pick(l, n_out, g)) {
    case REDUCE_COLUMN_CHUNKS:
        return column_sums_in_chunks(l, x, g.n_red, n_out, column_chunks(g.n_red, n_out, l->workspace_bytes), y,
                                     scale);
    case REDUCE_BLOCK:
        ge2_reduce_block_kernel<<<(unsigned)n_out, GE2_CUDA_THREADS, 0, stream>>>(x, y, g, scale);
        return ge2_cuda_check_launch(l, "ge2_reduce_block_kernel");
    case REDUCE_WARP: {
        int warps = GE2_CUDA_THREADS / GE2_WARP;
        ge2_reduce_warp_kernel<<<(unsigned)((n_out + warps - 1) / warps), GE2_CUDA_THREADS, 0, stream>>>(n_out, x, y,
                                                                                                        g, scale);
        return ge2_cuda_check_launch(l, "ge2_reduce_warp_kernel");
    }
    case REDUCE_COLS:
        ge2_reduce_cols_kernel<<<(unsigned)((n_out + GE2_WARP - 1) / GE2_WARP), dim3(GE2_WARP, GE2_REDUCE_SLICES), 0,
                                 stream>>>(n_out, x, y, g, scale);
        return ge2_cuda_check_launch(l, "ge2_reduce_cols_kernel");
    default:
        ge2_reduce_thread_kernel<<<ge2_cuda_blocks(n_out, GE2_CUDA_THREADS), GE2_CUDA_THREADS, 0, stream>>>(
            n_out, x, y, g, scale);
        return ge2_cuda_check_launch(l, "ge2_reduce_thread_kernel");
    }
}

// Which of x's dims the output keeps, and the final scale. SUM/MEAN drop one
// axis or all; REDUCE_TO sums x down to out's shape (= like's), right-aligned:
// a dim is summed where out lacks it or has 1 against x's larger dim, then
// times scale, divided by the reduction factor when attrs.mean (EXPAND's
// attrs; each is the other's backward).
static ge2_status geometry(const ge2_launch *l, ge2_reduce_geom *g, float *scale)
{
    ge2_shape x = l->in[0].shape, out = l->out[0].shape;
    bool keep[GE2_MAX_DIMS];
    double sc = 1.0;
    if (l->node->op == GE2_OP_REDUCE_TO) {
        for (int d = 0; d < x.ndim; d++) {
            int od = out.ndim - (x.ndim - d);
            keep[d] = od >= 0 && (out.dim[od] == x.dim[d] || x.dim[d] == 1);
        }
        const ge2_expand_attrs *at = GE2_ATTRS(ge2_expand_attrs, l->node->attrs);
        sc = at->scale;
        if (at->mean && ge2_shape_numel(out) > 0)
            sc /= (double)ge2_shape_numel(x) / (double)ge2_shape_numel(out);
    } else {
        int axis = GE2_ATTRS(ge2_reduce_attrs, l->node->attrs)->axis;
        if (axis != GE2_AXIS_ALL && (axis < 0 || axis >= x.ndim))
            return ge2_error(GE2_ERR_SHAPE, "ge2_%s: axis %d out of range for a %d-D input", ge2_cuda_op_name(l),
                             axis, x.ndim);
        long long len = 1;
        for (int d = 0; d < x.ndim; d++) {
            keep[d] = axis != GE2_AXIS_ALL && d != axis;
            if (!keep[d])
                len *= x.dim[d];
        }
        if (l->node->op == GE2_OP_MEAN && len > 0)
            sc = 1.0 / (double)len;
    }
    *g = make_geom(x, keep);
    *scale = (float)sc;
    return GE2_OK;
}

extern "C" ge2_status ge2_cuda_reduce_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    ge2_reduce_geom g;
    float scale;
    GE2_TRY(geometry(l, &g, &scale));
    return reduce_enqueue(l, (const float *)l->in[0].data, (float *)l->out[0].data, ge2_shape_numel(l->out[0].shape),
                          g, scale);
}

extern "C" ge2_status ge2_cuda_column_sums(const ge2_launch *l, const void *x, ge2_dtype x_dtype, int64_t rows,
                                           int64_t n, float *y)
{
    const bool keep[2] = {false, true};
    if (x_dtype == GE2_F32)
        return reduce_enqueue(l, (const float *)x, y, n, make_geom(ge2_shape2(rows, n), keep), 1.0f);
    if (x_dtype != GE2_BF16)
        return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_%s (node %d): column sums of %s; they take f32 or bf16",
                         ge2_cuda_op_name(l), l->node->id, ge2_dtype_name(x_dtype));
    if (!y || n == 0)
        return GE2_OK;
    // bf16 (a GEMM's bf16 operand): the two-pass chunks; one chunk, written
    // straight to y, where the rows are few or the workspace has no room
    return column_sums_in_chunks(l, (const __nv_bfloat16 *)x, rows, n,
                                 l->workspace ? column_chunks(rows, n, l->workspace_bytes) : 0, y, 1.0f);
}

extern "C" const char *ge2_cuda_reduce_describe(const ge2_launch *l)
{
    ge2_reduce_geom g;
    float scale;
    if (geometry(l, &g, &scale) != GE2_OK)
        return "reduce: bad axis";
    switch (pick(l, ge2_shape_numel(l->out[0].shape), g)) {
    case REDUCE_COLUMN_CHUNKS:
        return "reduce: column sums, chunks of rows in two passes";
    case REDUCE_BLOCK:
        return "reduce: block per output";
    case REDUCE_WARP:
        return "reduce: warp per output (contiguous terms)";
    case REDUCE_COLS:
        return "reduce: 32 outputs x 16 slices per block (strided terms)";
    default:
        return "reduce: thread per output";
    }
}
