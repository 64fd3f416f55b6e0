// Data movement without arithmetic: RESHAPE, TRANSPOSE, PERMUTE, CONCAT, SLICE and
// SLICE_BACKWARD. Concat and slice view every tensor as [outer, len, inner]
// around their axis, so one index formula serves every rank.
#include "kernels/cuda/bf16_store.h"
#include "kernels/cuda/check.h"
#include "ops/shape/shape.h"

// Transpose tile: 32x32 through shared memory so both the read and the write
// are coalesced; the +1 column keeps the tile's columns in distinct banks.
#define GE2_TILE 32
#define GE2_TILE_ROWS 8

// ------------------------------------------------------------------- kernels

__global__ void ge2_transpose_kernel(long long rows, long long cols, const float *x /* [rows, cols] */,
                                     float *y /* [cols, rows] */)
{
    __shared__ float tile[GE2_TILE][GE2_TILE + 1];
    long long c = (long long)blockIdx.x * GE2_TILE + threadIdx.x;
    long long r0 = (long long)blockIdx.y * GE2_TILE;
    for (int k = threadIdx.y; k < GE2_TILE; k += GE2_TILE_ROWS)
        if (r0 + k < rows && c < cols)
            tile[k][threadIdx.x] = x[(r0 + k) * cols + c];
    __syncthreads();
    long long r = r0 + threadIdx.x;
    long long c0 = (long long)blockIdx.x * GE2_TILE;
    for (int k = threadIdx.y; k < GE2_TILE; k += GE2_TILE_ROWS)
        if (c0 + k < cols && r < rows)
            y[(c0 + k) * rows + r] = tile[threadIdx.x][k];
}

// Concat sees input k as [outer, row_k] (row = len · inner) and y as
// [outer, Σ row_k], counted in units of V (float4 where every row allows).
struct ge2_concat_parts {
    const void *x[GE2_MAX_INPUTS];
    long long start[GE2_MAX_INPUTS + 1]; // prefix sums of the rows; start[n] = y's row
    int n;
};

// Unit i (of V) of y, whose elements are Y: f32, or bf16 (the storage
// pass's: only GEMMs read it) rounded at the store
template <typename Y, typename I> static __device__ __forceinline__ void store_unit(Y *y, I i, float v)
{
    ge2_store(y + i, v);
}
template <typename Y, typename I> static __device__ __forceinline__ void store_unit(Y *y, I i, float4 v)
{
    ge2_store4(y + 4 * i, v);
}

template <typename V, typename I, typename Y>
__global__ void ge2_concat_kernel(I n_elems, ge2_concat_parts p, Y *y)
{
    const I row = (I)p.start[p.n];
    for (I i = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; i < n_elems; i += (I)gridDim.x * (I)blockDim.x) {
        const I o = i / row, j = i - o * row;
        int k = 0;
        while (j >= (I)p.start[k + 1])
            k++;
        const I len = (I)(p.start[k + 1] - p.start[k]);
        store_unit(y, i, ((const V *)p.x[k])[o * len + (j - (I)p.start[k])]);
    }
}

// Slice and its backward see x as [outer, row_x] and y as [outer, row_y]
// (row = len · inner) with y's rows at column off (= start · inner) of x's,
// counted in units of V: float4 where every count allows it. I is int
// where every index fits, which spares the 64-bit divisions.
template <typename V> __device__ __forceinline__ V ge2_move_zero();
template <> __device__ __forceinline__ float ge2_move_zero<float>() { return 0.0f; }
template <> __device__ __forceinline__ float4 ge2_move_zero<float4>() { return make_float4(0.0f, 0.0f, 0.0f, 0.0f); }

// y = x[:, off:off+row_y]; n = outer · row_y
template <typename V, typename I>
__global__ void ge2_slice_kernel(I n, I row_x, I row_y, I off, const V *x, V *y)
{
    for (I i = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; i < n; i += (I)gridDim.x * (I)blockDim.x) {
        const I o = i / row_y;
        y[i] = x[o * row_x + off + (i - o * row_y)];
    }
}

// The same into a bf16 y (the storage pass's: only bf16 readers read it),
// rounded at the store; i counts units of V (float or float4) of x and y
template <typename V, typename I>
__global__ void ge2_slice_bf16_kernel(I n, I row_x, I row_y, I off, const V *x, __nv_bfloat16 *y)
{
    for (I i = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; i < n; i += (I)gridDim.x * (I)blockDim.x) {
        const I o = i / row_y;
        store_unit(y, i, x[o * row_x + off + (i - o * row_y)]);
    }
}

// The same from a bf16 x (the storage pass's, read only by slices and
// GEMMs) into a y of either type (widened into an f32 one), one element a
// thread; a bf16 y where aligned takes ge2_slice_kernel on four at a time
template <typename Y>
__global__ void ge2_slice_from_bf16_kernel(long long n, long long row_x, long long row_y, long long off,
                                           const __nv_bfloat16 *x, Y *y)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        const long long o = i / row_y;
        ge2_store(y + i, ge2_load(x + o * row_x + off + (i - o * row_y)));
    }
}

// dx = zeros, with dx[:, off:off+row_y] = dy; n = outer · row_x. Writes
// every element, so no memset node is needed before it.
template <typename V, typename I>
__global__ void ge2_slice_backward_kernel(I n, I row_x, I row_y, I off, const V *dy, V *dx)
{
    for (I i = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; i < n; i += (I)gridDim.x * (I)blockDim.x) {
        const I o = i / row_x, r = i - o * row_x - off;
        dx[i] = r >= 0 && r < row_y ? dy[o * row_y + r] : ge2_move_zero<V>();
    }
}

// ----------------------------------------------------------------- launchers

// Sizes before and after axis.
static void outer_inner(ge2_shape s, int axis, long long *outer, long long *inner)
{
    *outer = 1;
    *inner = 1;
    for (int d = 0; d < axis; d++)
        *outer *= s.dim[d];
    for (int d = axis + 1; d < s.ndim; d++)
        *inner *= s.dim[d];
}

static ge2_status check_axis(const ge2_launch *l, ge2_shape s, int axis)
{
    if (axis >= 0 && axis < s.ndim)
        return GE2_OK;
    return ge2_error(GE2_ERR_SHAPE, "ge2_%s: axis %d out of range for a %d-D tensor", ge2_cuda_op_name(l), axis,
                     s.ndim);
}

// Same bytes, new shape: nothing to do when the planner put the output on
// the input's memory; otherwise one device-to-device copy (a memcpy node in
// the captured graph).
// The kernel report's words: the planner's view (GE2_OPF_VIEW) or a copy
extern "C" const char *ge2_cuda_reshape_describe(const ge2_launch *l)
{
    return l->out[0].data && l->out[0].data == l->in[0].data ? "a view of its input: nothing to run"
                                                             : "a device-to-device copy";
}

extern "C" ge2_status ge2_cuda_reshape_launch(const ge2_launch *l)
{
    // f32, or bf16: a view of a bf16 tensor (the storage pass's) is bf16 too
    const ge2_dtype dt = l->in[0].dtype;
    if ((dt != GE2_F32 && dt != GE2_BF16) || l->out[0].dtype != dt)
        return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_%s (node %d): input is %s, output %s; the CUDA kernel takes f32 or "
                         "bf16 views", ge2_cuda_op_name(l), l->node->id, ge2_dtype_name(dt),
                         ge2_dtype_name(l->out[0].dtype));
    void *y = l->out[0].data;
    if (!y || y == l->in[0].data)
        return GE2_OK;
    size_t bytes = (size_t)ge2_shape_numel(l->out[0].shape) * ge2_dtype_size(l->out[0].dtype);
    if (bytes == 0)
        return GE2_OK;
    return ge2_cuda_check_call(
        l, cudaMemcpyAsync(y, l->in[0].data, bytes, cudaMemcpyDeviceToDevice, ge2_cuda_stream(l)),
        "cudaMemcpyAsync");
}

// y [dim[0], ..., dim[nd-1]] from x: y's dim i steps x by stride[i]
// (counted in units of V, float4 when the last dim stays last and allows it)
struct ge2_permute_geom {
    long long dim[GE2_MAX_DIMS], stride[GE2_MAX_DIMS];
};

template <typename V, typename I>
__global__ void ge2_permute_kernel(I total, int nd, ge2_permute_geom g, const V *x, V *y)
{
    for (I e = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; e < total; e += (I)gridDim.x * (I)blockDim.x) {
        I rest = e, at = 0;
        for (int i = nd - 1; i >= 0; i--) {
            const I d = (I)g.dim[i], q = rest / d;
            at += (rest - q * d) * (I)g.stride[i];
            rest = q;
        }
        y[e] = x[at];
    }
}

// Runs KERNEL<V, I>(n / w, args...) with V float4 (w 4) when vec, else float
// (w 1), and I int when every index stays below `bound` and a grid-stride
// step past it still fits (ge2_move_small). The caller passes counts already
// divided by w (cast to I by the kernel's parameters).
#define GE2_MOVE_LAUNCH(KERNEL, l, vec, bound, n, src, dst, ...)                                                  \
    do {                                                                                                        \
        const long long n_ = (vec) ? (n) / 4 : (n);                                                              \
        const unsigned b_ = ge2_cuda_blocks(n_, GE2_CUDA_THREADS);                                               \
        cudaStream_t s_ = ge2_cuda_stream(l);                                                                   \
        const bool small_ = ge2_move_small(bound, b_);                                                           \
        if ((vec) && small_)                                                                                    \
            KERNEL<float4, int><<<b_, GE2_CUDA_THREADS, 0, s_>>>((int)n_, __VA_ARGS__, (const float4 *)(src),     \
                                                                 (float4 *)(dst));                              \
        else if (vec)                                                                                           \
            KERNEL<float4, long long><<<b_, GE2_CUDA_THREADS, 0, s_>>>(n_, __VA_ARGS__, (const float4 *)(src),    \
                                                                       (float4 *)(dst));                        \
        else if (small_)                                                                                        \
            KERNEL<float, int><<<b_, GE2_CUDA_THREADS, 0, s_>>>((int)n_, __VA_ARGS__, (const float *)(src),       \
                                                                (float *)(dst));                                \
        else                                                                                                    \
            KERNEL<float, long long><<<b_, GE2_CUDA_THREADS, 0, s_>>>(n_, __VA_ARGS__, (const float *)(src),      \
                                                                      (float *)(dst));                          \
    } while (0)

// 32-bit indices serve when every index is below bound and the loop's last
// step (an index below bound plus the whole grid) does not overflow either.
static bool ge2_move_small(long long bound, unsigned blocks)
{
    return bound + (long long)blocks * GE2_CUDA_THREADS < (long long)INT32_MAX;
}

static bool aligned16(const void *a, const void *b) { return (uintptr_t)a % 16 == 0 && (uintptr_t)b % 16 == 0; }

extern "C" ge2_status ge2_cuda_permute_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    if (!l->out[0].data)
        return GE2_OK;
    const ge2_shape xs = l->in[0].shape, ys = l->out[0].shape;
    const int n = xs.ndim, *perm = GE2_ATTRS(ge2_permute_attrs, l->node->attrs)->perm;
    const long long total = ge2_shape_numel(ys);
    if (total == 0)
        return GE2_OK;
    long long xstride[GE2_MAX_DIMS], s = 1;
    for (int i = n - 1; i >= 0; s *= xs.dim[i], i--)
        xstride[i] = s;
    // rows of the last dim move whole when it stays last: copy them 4 floats at a time
    const bool vec = n > 0 && perm[n - 1] == n - 1 && ys.dim[n - 1] % 4 == 0 &&
                     aligned16(l->in[0].data, l->out[0].data);
    ge2_permute_geom g;
    for (int i = 0; i < n; i++) {
        g.dim[i] = ys.dim[i] / (vec && i == n - 1 ? 4 : 1);
        g.stride[i] = xstride[perm[i]] / (vec && i < n - 1 ? 4 : 1);
    }
    GE2_MOVE_LAUNCH(ge2_permute_kernel, l, vec, total, total, l->in[0].data, l->out[0].data, n, g);
    return ge2_cuda_check_launch(l, "ge2_permute_kernel");
}

extern "C" ge2_status ge2_cuda_transpose_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    ge2_shape s = l->in[0].shape;
    if (s.ndim != 2)
        return ge2_error(GE2_ERR_SHAPE, "ge2_%s: the CUDA kernel transposes 2-D tensors, got %d-D",
                         ge2_cuda_op_name(l), s.ndim);
    if (!l->out[0].data || s.dim[0] == 0 || s.dim[1] == 0)
        return GE2_OK;
    dim3 grid((unsigned)((s.dim[1] + GE2_TILE - 1) / GE2_TILE), (unsigned)((s.dim[0] + GE2_TILE - 1) / GE2_TILE));
    dim3 block(GE2_TILE, GE2_TILE_ROWS);
    ge2_transpose_kernel<<<grid, block, 0, ge2_cuda_stream(l)>>>(s.dim[0], s.dim[1], (const float *)l->in[0].data,
                                                                 (float *)l->out[0].data);
    return ge2_cuda_check_launch(l, "ge2_transpose_kernel");
}

// int indices where every one fits (no 64-bit divisions), else long long
template <typename V, typename Y>
static void launch_concat(bool small, long long units, const ge2_concat_parts &p, Y *y, unsigned blocks,
                          cudaStream_t s)
{
    if (small)
        ge2_concat_kernel<V, int><<<blocks, GE2_CUDA_THREADS, 0, s>>>((int)units, p, y);
    else
        ge2_concat_kernel<V, long long><<<blocks, GE2_CUDA_THREADS, 0, s>>>(units, p, y);
}

extern "C" ge2_status ge2_cuda_concat_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    int axis = GE2_ATTRS(ge2_concat_attrs, l->node->attrs)->axis;
    ge2_shape ys = l->out[0].shape;
    GE2_TRY(check_axis(l, ys, axis));
    long long outer, inner, n = ge2_shape_numel(ys);
    if (!l->out[0].data || n == 0)
        return GE2_OK;
    outer_inner(ys, axis, &outer, &inner);
    ge2_concat_parts p;
    p.n = l->n_in;
    p.start[0] = 0;
    const bool bf16 = l->out[0].dtype == GE2_BF16;
    bool vec = (uintptr_t)l->out[0].data % (bf16 ? 8 : 16) == 0;
    for (int i = 0; i < l->n_in; i++) {
        p.x[i] = l->in[i].data;
        p.start[i + 1] = p.start[i] + l->in[i].shape.dim[axis] * inner;
        vec = vec && (l->in[i].shape.dim[axis] * inner) % 4 == 0 && (uintptr_t)l->in[i].data % 16 == 0;
    }
    const int w = vec ? 4 : 1;
    for (int i = 0; i <= p.n; i++)
        p.start[i] /= w;
    const long long units = n / w;
    const unsigned blocks = ge2_cuda_blocks(units, GE2_CUDA_THREADS);
    cudaStream_t s = ge2_cuda_stream(l);
    const bool small = ge2_move_small(n, blocks);
    void *y = l->out[0].data;
    if (bf16 && vec)
        launch_concat<float4>(small, units, p, (__nv_bfloat16 *)y, blocks, s);
    else if (bf16)
        launch_concat<float>(small, units, p, (__nv_bfloat16 *)y, blocks, s);
    else if (vec)
        launch_concat<float4>(small, units, p, (float *)y, blocks, s);
    else
        launch_concat<float>(small, units, p, (float *)y, blocks, s);
    return ge2_cuda_check_launch(l, "ge2_concat_kernel");
}

// Slice's rows and offset (see the kernels); vec when they are whole float4s
static void slice_rows(ge2_shape x, ge2_shape y, const ge2_slice_attrs *a, const void *p, const void *q,
                       long long *row_x, long long *row_y, long long *off, bool *vec)
{
    long long outer, inner;
    outer_inner(x, a->axis, &outer, &inner);
    *row_x = x.dim[a->axis] * inner;
    *row_y = y.dim[a->axis] * inner;
    *off = a->start * inner;
    *vec = *row_x % 4 == 0 && *row_y % 4 == 0 && *off % 4 == 0 && aligned16(p, q);
}

// SLICE of a bf16 x: moved as is into a bf16 y, widened into an f32 one
static ge2_status slice_from_bf16(const ge2_launch *l, long long n, long long row_x, long long row_y, long long off)
{
    const __nv_bfloat16 *x = (const __nv_bfloat16 *)l->in[0].data;
    cudaStream_t s = ge2_cuda_stream(l);
    if (l->out[0].dtype == GE2_F32) {
        ge2_slice_from_bf16_kernel<<<ge2_cuda_blocks(n, GE2_CUDA_THREADS), GE2_CUDA_THREADS, 0, s>>>(
            n, row_x, row_y, off, x, (float *)l->out[0].data);
        return ge2_cuda_check_launch(l, "ge2_slice_from_bf16_kernel");
    }
    __nv_bfloat16 *y = (__nv_bfloat16 *)l->out[0].data;
    if (row_x % 4 == 0 && row_y % 4 == 0 && off % 4 == 0 && ge2_store4_aligned(x) && ge2_store4_aligned(y)) {
        ge2_slice_kernel<uint2, long long><<<ge2_cuda_blocks(n / 4, GE2_CUDA_THREADS), GE2_CUDA_THREADS, 0, s>>>(
            n / 4, row_x / 4, row_y / 4, off / 4, (const uint2 *)x, (uint2 *)y);
        return ge2_cuda_check_launch(l, "ge2_slice_kernel<bf16 x4>");
    }
    ge2_slice_from_bf16_kernel<<<ge2_cuda_blocks(n, GE2_CUDA_THREADS), GE2_CUDA_THREADS, 0, s>>>(n, row_x, row_y,
                                                                                               off, x, y);
    return ge2_cuda_check_launch(l, "ge2_slice_from_bf16_kernel");
}

extern "C" ge2_status ge2_cuda_slice_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    const bool x_bf16 = l->in[0].dtype == GE2_BF16; /* the storage pass's (ge2_op_def.reads_bf16) */
    const ge2_slice_attrs *a = GE2_ATTRS(ge2_slice_attrs, l->node->attrs);
    ge2_shape xs = l->in[0].shape, ys = l->out[0].shape;
    GE2_TRY(check_axis(l, xs, a->axis));
    long long n = ge2_shape_numel(ys), row_x, row_y, off;
    if (!l->out[0].data || n == 0)
        return GE2_OK;
    bool vec;
    if (x_bf16) {
        slice_rows(xs, ys, a, l->in[0].data, l->out[0].data, &row_x, &row_y, &off, &vec);
        return slice_from_bf16(l, n, row_x, row_y, off);
    }
    const bool bf16 = l->out[0].dtype == GE2_BF16;
    slice_rows(xs, ys, a, l->in[0].data, bf16 ? l->in[0].data : l->out[0].data, &row_x, &row_y, &off, &vec);
    vec = vec && (!bf16 || ge2_store4_aligned((const __nv_bfloat16 *)l->out[0].data));
    const long long w = vec ? 4 : 1;
    if (!bf16) {
        GE2_MOVE_LAUNCH(ge2_slice_kernel, l, vec, ge2_shape_numel(xs), n, l->in[0].data, l->out[0].data, row_x / w,
                        row_y / w, off / w);
        return ge2_cuda_check_launch(l, "ge2_slice_kernel");
    }
    const long long units = n / w;
    const unsigned blocks = ge2_cuda_blocks(units, GE2_CUDA_THREADS);
    cudaStream_t s = ge2_cuda_stream(l);
    const bool small = ge2_move_small(ge2_shape_numel(xs), blocks);
    __nv_bfloat16 *y = (__nv_bfloat16 *)l->out[0].data;
    if (vec && small)
        ge2_slice_bf16_kernel<float4, int><<<blocks, GE2_CUDA_THREADS, 0, s>>>(
            (int)units, (int)(row_x / w), (int)(row_y / w), (int)(off / w), (const float4 *)l->in[0].data, y);
    else if (vec)
        ge2_slice_bf16_kernel<float4, long long><<<blocks, GE2_CUDA_THREADS, 0, s>>>(
            units, row_x / w, row_y / w, off / w, (const float4 *)l->in[0].data, y);
    else
        ge2_slice_bf16_kernel<float, long long><<<blocks, GE2_CUDA_THREADS, 0, s>>>(
            units, row_x, row_y, off, (const float *)l->in[0].data, y);
    return ge2_cuda_check_launch(l, "ge2_slice_bf16_kernel");
}

extern "C" ge2_status ge2_cuda_slice_backward_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    const ge2_slice_attrs *a = GE2_ATTRS(ge2_slice_attrs, l->node->attrs);
    ge2_shape dys = l->in[0].shape, dxs = l->out[0].shape;
    GE2_TRY(check_axis(l, dxs, a->axis));
    long long n = ge2_shape_numel(dxs), row_x, row_y, off;
    if (!l->out[0].data || n == 0)
        return GE2_OK;
    bool vec;
    slice_rows(dxs, dys, a, l->in[0].data, l->out[0].data, &row_x, &row_y, &off, &vec);
    const long long w = vec ? 4 : 1;
    GE2_MOVE_LAUNCH(ge2_slice_backward_kernel, l, vec, n, n, l->in[0].data, l->out[0].data, row_x / w, row_y / w,
                    off / w);
    return ge2_cuda_check_launch(l, "ge2_slice_backward_kernel");
}
