// Data movement without arithmetic: RESHAPE, TRANSPOSE, PERMUTE, CONCAT, SLICE and
// SLICE_BACKWARD. Concat and slice view every tensor as [outer, len, inner]
// around their axis, so one index formula serves every rank.
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

struct ge2_concat_parts {
    const float *x[GE2_MAX_INPUTS]; // [outer, len[i], inner]
    long long start[GE2_MAX_INPUTS + 1]; // prefix sums of len; start[n] = the output's len
    int n;
};

__global__ void ge2_concat_kernel(long long n_elems, long long inner, ge2_concat_parts p,
                                  float *y /* [outer, start[n], inner] */)
{
    long long total = p.start[p.n];
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n_elems; i += stride) {
        long long in = i % inner, j = (i / inner) % total, o = i / (inner * total);
        int k = 0;
        while (j >= p.start[k + 1])
            k++;
        long long len = p.start[k + 1] - p.start[k];
        y[i] = p.x[k][(o * len + (j - p.start[k])) * inner + in];
    }
}

// y = x[:, start:start+len_y, :]
__global__ void ge2_slice_kernel(long long n_elems, long long inner, long long len_x, long long len_y,
                                 long long start, const float *x /* [outer, len_x, inner] */,
                                 float *y /* [outer, len_y, inner] */)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n_elems; i += stride) {
        long long in = i % inner, j = (i / inner) % len_y, o = i / (inner * len_y);
        y[i] = x[(o * len_x + start + j) * inner + in];
    }
}

// dx = zeros, with dx[:, start:start+len_dy, :] = dy. Writes every element,
// so no memset node is needed before it.
__global__ void ge2_slice_backward_kernel(long long n_elems, long long inner, long long len_dx, long long len_dy,
                                          long long start, const float *dy /* [outer, len_dy, inner] */,
                                          float *dx /* [outer, len_dx, inner] */)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n_elems; i += stride) {
        long long in = i % inner, j = (i / inner) % len_dx, o = i / (inner * len_dx);
        long long k = j - start;
        dx[i] = k >= 0 && k < len_dy ? dy[(o * len_dy + k) * inner + in] : 0.0f;
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
extern "C" ge2_status ge2_cuda_reshape_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    void *y = l->out[0].data;
    if (!y || y == l->in[0].data)
        return GE2_OK;
    size_t bytes = (size_t)ge2_shape_numel(l->out[0].shape) * sizeof(float);
    if (bytes == 0)
        return GE2_OK;
    return ge2_cuda_check_call(
        l, cudaMemcpyAsync(y, l->in[0].data, bytes, cudaMemcpyDeviceToDevice, ge2_cuda_stream(l)),
        "cudaMemcpyAsync");
}

// y [d0, d1, d2, d3] (unused leading dims 1) from x: y's dim i steps x by stride[i]
struct ge2_permute_geom {
    long long dim[GE2_MAX_DIMS], stride[GE2_MAX_DIMS];
};

__global__ void ge2_permute_kernel(long long total, ge2_permute_geom g, const float *x, float *y)
{
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        long long rest = e, at = 0;
        for (int i = GE2_MAX_DIMS - 1; i >= 0; i--) {
            const long long q = rest / g.dim[i];
            at += (rest - q * g.dim[i]) * g.stride[i];
            rest = q;
        }
        y[e] = x[at];
    }
}

extern "C" ge2_status ge2_cuda_permute_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    if (!l->out[0].data)
        return GE2_OK;
    const ge2_shape xs = l->in[0].shape, ys = l->out[0].shape;
    const int n = xs.ndim, pad = GE2_MAX_DIMS - n, *perm = l->node->attrs.permute.perm;
    long long xstride[GE2_MAX_DIMS], s = 1;
    for (int i = n - 1; i >= 0; s *= xs.dim[i], i--)
        xstride[i] = s;
    ge2_permute_geom g;
    for (int i = 0; i < GE2_MAX_DIMS; i++) {
        g.dim[i] = i < pad ? 1 : ys.dim[i - pad];
        g.stride[i] = i < pad ? 0 : xstride[perm[i - pad]];
    }
    const long long total = ge2_shape_numel(ys);
    ge2_permute_kernel<<<ge2_cuda_blocks(total, GE2_CUDA_THREADS), GE2_CUDA_THREADS, 0, ge2_cuda_stream(l)>>>(
        total, g, (const float *)l->in[0].data, (float *)l->out[0].data);
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

extern "C" ge2_status ge2_cuda_concat_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    int axis = l->node->attrs.concat.axis;
    ge2_shape ys = l->out[0].shape;
    GE2_TRY(check_axis(l, ys, axis));
    long long outer, inner, n = ge2_shape_numel(ys);
    if (!l->out[0].data || n == 0)
        return GE2_OK;
    outer_inner(ys, axis, &outer, &inner);
    ge2_concat_parts p;
    p.n = l->n_in;
    p.start[0] = 0;
    for (int i = 0; i < l->n_in; i++) {
        p.x[i] = (const float *)l->in[i].data;
        p.start[i + 1] = p.start[i] + l->in[i].shape.dim[axis];
    }
    ge2_concat_kernel<<<ge2_cuda_blocks(n, GE2_CUDA_THREADS), GE2_CUDA_THREADS, 0, ge2_cuda_stream(l)>>>(
        n, inner, p, (float *)l->out[0].data);
    return ge2_cuda_check_launch(l, "ge2_concat_kernel");
}

extern "C" ge2_status ge2_cuda_slice_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    const ge2_slice_attrs *a = &l->node->attrs.slice;
    ge2_shape xs = l->in[0].shape, ys = l->out[0].shape;
    GE2_TRY(check_axis(l, xs, a->axis));
    long long outer, inner, n = ge2_shape_numel(ys);
    if (!l->out[0].data || n == 0)
        return GE2_OK;
    outer_inner(xs, a->axis, &outer, &inner);
    ge2_slice_kernel<<<ge2_cuda_blocks(n, GE2_CUDA_THREADS), GE2_CUDA_THREADS, 0, ge2_cuda_stream(l)>>>(
        n, inner, xs.dim[a->axis], ys.dim[a->axis], a->start, (const float *)l->in[0].data, (float *)l->out[0].data);
    return ge2_cuda_check_launch(l, "ge2_slice_kernel");
}

extern "C" ge2_status ge2_cuda_slice_backward_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    const ge2_slice_attrs *a = &l->node->attrs.slice;
    ge2_shape dys = l->in[0].shape, dxs = l->out[0].shape;
    GE2_TRY(check_axis(l, dxs, a->axis));
    long long outer, inner, n = ge2_shape_numel(dxs);
    if (!l->out[0].data || n == 0)
        return GE2_OK;
    outer_inner(dxs, a->axis, &outer, &inner);
    ge2_slice_backward_kernel<<<ge2_cuda_blocks(n, GE2_CUDA_THREADS), GE2_CUDA_THREADS, 0, ge2_cuda_stream(l)>>>(
        n, inner, dxs.dim[a->axis], dys.dim[a->axis], a->start, (const float *)l->in[0].data,
        (float *)l->out[0].data);
    return ge2_cuda_check_launch(l, "ge2_slice_backward_kernel");
}
