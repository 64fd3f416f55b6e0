// MAX_POOL2D and AVG_POOL2D, and their backward ops. One thread per output
// element forward; backward one thread per input element, which gathers
// from the windows that cover it (finding each window's first maximum
// again for max pooling), so no two threads write one element: no atomics,
// and replay equals eager bitwise.
#include "kernels/cuda/check.h"
#include "ops/pool/pool.h"

// ------------------------------------------------------------------- kernels

// The geometry in 32 bits (the launchers check that the tensors fit, with
// room for a grid-stride index one stride past the end): the
// kernels are memory-bound, and 64-bit division costs more than the loads.
struct ge2_pool_geom32 {
    int n, c, h, w, oh, ow;
    int kh, kw, sh, sw, ph, pw;
};

// The offset in its [H, W] plane of window (oy, ox)'s first maximum (NaN
// wins, as in PyTorch), or with max false -1 and the window's sum in *sum.
__device__ __forceinline__ int ge2_pool_window(const ge2_pool_geom32 &g, const float *plane, int oy, int ox, bool max,
                                               float *sum)
{
    int best = -1;
    float best_v = 0.0f, s = 0.0f;
    for (int i = 0; i < g.kh; i++) {
        int iy = oy * g.sh - g.ph + i;
        if (iy < 0 || iy >= g.h)
            continue;
        for (int j = 0; j < g.kw; j++) {
            int ix = ox * g.sw - g.pw + j;
            if (ix < 0 || ix >= g.w)
                continue;
            float v = plane[iy * g.w + ix];
            if (max && (best < 0 || (best_v == best_v && (v > best_v || v != v)))) {
                best = iy * g.w + ix;
                best_v = v;
            }
            s += v;
        }
    }
    *sum = s;
    return max ? best : -1;
}

// x [N, C, H, W] -> y [N, C, OH, OW]
__global__ void ge2_pool2d_kernel(ge2_pool_geom32 g, bool max, const float *x, float *y)
{
    const int total = g.n * g.c * g.oh * g.ow;
    const float inv_area = 1.0f / (float)(g.kh * g.kw);
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < total; e += gridDim.x * blockDim.x) {
        const int q = e / g.ow, ox = e - q * g.ow, p = q / g.oh, oy = q - p * g.oh;
        const float *plane = x + (size_t)p * g.h * g.w;
        float sum;
        const int at = ge2_pool_window(g, plane, oy, ox, max, &sum);
        y[e] = max ? plane[at] : sum * inv_area;
    }
}

// dy [N, C, OH, OW], x [N, C, H, W] (max only) -> dx [N, C, H, W]
__global__ void ge2_pool2d_backward_kernel(ge2_pool_geom32 g, bool max, const float *dy, const float *x, float *dx)
{
    const int total = g.n * g.c * g.h * g.w;
    const float inv_area = 1.0f / (float)(g.kh * g.kw);
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < total; e += gridDim.x * blockDim.x) {
        const int q = e / g.w, ix = e - q * g.w, p = q / g.h, iy = q - p * g.h;
        // windows covering (iy, ix): oy·sh - ph <= iy <= oy·sh - ph + kh - 1
        int oy0 = iy + g.ph - g.kh + 1, ox0 = ix + g.pw - g.kw + 1;
        oy0 = oy0 > 0 ? (oy0 + g.sh - 1) / g.sh : 0;
        ox0 = ox0 > 0 ? (ox0 + g.sw - 1) / g.sw : 0;
        const int oy1 = (iy + g.ph) / g.sh, ox1 = (ix + g.pw) / g.sw;
        const float *dplane = dy + (size_t)p * g.oh * g.ow;
        float s = 0.0f;
        for (int oy = oy0; oy <= oy1 && oy < g.oh; oy++)
            for (int ox = ox0; ox <= ox1 && ox < g.ow; ox++) {
                if (!max) {
                    s += dplane[oy * g.ow + ox] * inv_area;
                    continue;
                }
                float unused;
                if (ge2_pool_window(g, x + (size_t)p * g.h * g.w, oy, ox, true, &unused) == iy * g.w + ix)
                    s += dplane[oy * g.ow + ox];
            }
        dx[e] = s;
    }
}

// ----------------------------------------------------------------- launchers

// The kernels' 32-bit geometry, once x and y fit it.
static ge2_status pool_geom32(const ge2_launch *l, ge2_shape x, ge2_pool_geom32 *out)
{
    const ge2_pool2d_geom g = ge2_pool2d_geom_of(GE2_ATTRS(ge2_pool2d_attrs, l->node->attrs), x);
    const int64_t big = g.n * g.c * (g.h * g.w > g.oh * g.ow ? g.h * g.w : g.oh * g.ow);
    /* a grid-stride index may pass the last element by one stride: room for it in int */
    const int64_t limit = (int64_t)INT32_MAX - (int64_t)GE2_CUDA_MAX_BLOCKS * GE2_CUDA_THREADS;
    if (big >= limit)
        return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_%s (node %d): %lld values; the CUDA kernels take fewer than %lld",
                         ge2_cuda_op_name(l), l->node->id, (long long)big, (long long)limit);
    *out = ge2_pool_geom32{(int)g.n, (int)g.c, (int)g.h, (int)g.w, (int)g.oh, (int)g.ow,
                           (int)g.kh, (int)g.kw, (int)g.sh, (int)g.sw, (int)g.ph, (int)g.pw};
    return GE2_OK;
}

extern "C" ge2_status ge2_cuda_pool2d_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    if (!l->out[0].data)
        return GE2_OK;
    ge2_pool_geom32 g;
    GE2_TRY(pool_geom32(l, l->in[0].shape, &g));
    const int total = g.n * g.c * g.oh * g.ow;
    ge2_pool2d_kernel<<<ge2_cuda_blocks(total, GE2_CUDA_THREADS), GE2_CUDA_THREADS, 0, ge2_cuda_stream(l)>>>(
        g, l->node->op == GE2_OP_MAX_POOL2D, (const float *)l->in[0].data, (float *)l->out[0].data);
    return ge2_cuda_check_launch(l, "ge2_pool2d_kernel");
}

extern "C" ge2_status ge2_cuda_pool2d_backward_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    if (!l->out[0].data)
        return GE2_OK;
    ge2_pool_geom32 g;
    GE2_TRY(pool_geom32(l, l->in[1].shape, &g));
    const int total = g.n * g.c * g.h * g.w;
    ge2_pool2d_backward_kernel<<<ge2_cuda_blocks(total, GE2_CUDA_THREADS), GE2_CUDA_THREADS, 0,
                                 ge2_cuda_stream(l)>>>(g, l->node->op == GE2_OP_MAX_POOL2D_BACKWARD,
                                                       (const float *)l->in[0].data, (const float *)l->in[1].data,
                                                       (float *)l->out[0].data);
    return ge2_cuda_check_launch(l, "ge2_pool2d_backward_kernel");
}
