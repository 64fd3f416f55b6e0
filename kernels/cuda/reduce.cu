// Sums over dims: SUM and MEAN (all elements or one axis) and REDUCE_TO (sum
// over the dims a broadcast expanded). All three are the same problem — an
// output whose padded 4-D shape has 1 where the input is summed — so one
// pair of kernels serves them, with a final scale (1/len for MEAN).
//
// Deterministic: each output is summed in a fixed order by a fixed tree, no
// atomics, so replays reproduce eager runs bit for bit.
#include "kernels/cuda/block_reduce.h"
#include "kernels/cuda/check.h"

// ------------------------------------------------------------------- kernels

// x viewed as 4-D (right-aligned, leading 1s). Output dim d is either x's dim
// (kept) or 1 (summed: red_dim[d] = x's dim); an output coordinate plus a
// reduction coordinate addresses one x element.
struct ge2_reduce_geom {
    long long x_stride[GE2_MAX_DIMS];
    long long out_dim[GE2_MAX_DIMS]; // 1 where summed
    long long red_dim[GE2_MAX_DIMS]; // 1 where kept
    long long n_red;                 // product of red_dim
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

// Many outputs: one thread per output, walking its reduction serially.
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

// Few outputs over long reductions: one block per output.
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
    long long s = 1;
    g.n_red = 1;
    for (int d = GE2_MAX_DIMS - 1; d >= 0; d--) {
        int xd = x.ndim - (GE2_MAX_DIMS - d);
        long long n = xd >= 0 ? x.dim[xd] : 1;
        bool kept = xd < 0 || keep[xd];
        g.x_stride[d] = s;
        g.out_dim[d] = kept ? n : 1;
        g.red_dim[d] = kept ? 1 : n;
        g.n_red *= g.red_dim[d];
        s *= n;
    }
    return g;
}

// Below this many outputs a block per output; above, a thread per output.
#define GE2_REDUCE_BLOCK_OUTPUTS 2048

static ge2_status launch_reduce(const ge2_launch *l, ge2_reduce_geom g, float scale)
{
    float *y = (float *)l->out[0].data;
    long long n_out = ge2_shape_numel(l->out[0].shape);
    if (!y || n_out == 0)
        return GE2_OK;
    const float *x = (const float *)l->in[0].data;
    if (n_out < GE2_REDUCE_BLOCK_OUTPUTS && g.n_red >= 64) {
        ge2_reduce_block_kernel<<<(unsigned)n_out, GE2_CUDA_THREADS, 0, ge2_cuda_stream(l)>>>(x, y, g, scale);
        return ge2_cuda_check_launch(l, "ge2_reduce_block_kernel");
    }
    ge2_reduce_thread_kernel<<<ge2_cuda_blocks(n_out, GE2_CUDA_THREADS), GE2_CUDA_THREADS, 0, ge2_cuda_stream(l)>>>(
        n_out, x, y, g, scale);
    return ge2_cuda_check_launch(l, "ge2_reduce_thread_kernel");
}

extern "C" ge2_status ge2_cuda_reduce_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    ge2_shape x = l->in[0].shape;
    int axis = l->node->attrs.reduce.axis;
    bool keep[GE2_MAX_DIMS];
    long long len = 1;
    for (int d = 0; d < x.ndim; d++) {
        keep[d] = axis != GE2_AXIS_ALL && d != axis;
        if (!keep[d])
            len *= x.dim[d];
    }
    if (axis != GE2_AXIS_ALL && (axis < 0 || axis >= x.ndim))
        return ge2_error(GE2_ERR_SHAPE, "ge2_%s: axis %d out of range for a %d-D input", ge2_cuda_op_name(l), axis,
                         x.ndim);
    float scale = l->node->op == GE2_OP_MEAN && len > 0 ? (float)(1.0 / (double)len) : 1.0f;
    return launch_reduce(l, make_geom(x, keep), scale);
}

// Sum x down to out's shape (= like's): right-aligned, a dim is summed where
// out lacks it or has 1 against x's larger dim. Then times scale, divided by
// the reduction factor when attrs.mean (EXPAND's attrs; each is the other's
// backward).
extern "C" ge2_status ge2_cuda_reduce_to_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    ge2_shape x = l->in[0].shape, out = l->out[0].shape;
    bool keep[GE2_MAX_DIMS];
    for (int d = 0; d < x.ndim; d++) {
        int od = out.ndim - (x.ndim - d);
        keep[d] = od >= 0 && (out.dim[od] == x.dim[d] || x.dim[d] == 1);
    }
    const ge2_expand_attrs *at = &l->node->attrs.expand;
    double scale = at->scale;
    if (at->mean && ge2_shape_numel(out) > 0)
        scale /= (double)ge2_shape_numel(x) / (double)ge2_shape_numel(out);
    return launch_reduce(l, make_geom(x, keep), (float)scale);
}
