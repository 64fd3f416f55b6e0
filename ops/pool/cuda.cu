// MAX_POOL2D and AVG_POOL2D, and their backward ops. One thread per output
// element forward; backward one thread per input element, which gathers
// from the windows that cover it (finding each window's first maximum
// again for max pooling), so no two threads write one element: no atomics,
// and replay equals eager bitwise.
#include "kernels/cuda/check.h"
#include "ops/pool/pool.h"

// ------------------------------------------------------------------- kernels

// The offset in its [H, W] plane of window (oy, ox)'s first maximum (NaN
// wins, as in PyTorch), or with max false -1 and the window's sum in *sum.
__device__ __forceinline__ long long ge2_pool_window(const ge2_pool2d_geom &g, const float *plane, long long oy,
                                                     long long ox, bool max, float *sum)
{
    long long best = -1;
    float best_v = 0.0f, s = 0.0f;
    for (long long i = 0; i < g.kh; i++) {
        long long iy = oy * g.sh - g.ph + i;
        if (iy < 0 || iy >= g.h)
            continue;
        for (long long j = 0; j < g.kw; j++) {
            long long ix = ox * g.sw - g.pw + j;
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
__global__ void ge2_pool2d_kernel(ge2_pool2d_geom g, bool max, const float *x, float *y)
{
    long long total = g.n * g.c * g.oh * g.ow;
    float inv_area = 1.0f / (float)(g.kh * g.kw);
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        long long ox = e % g.ow, oy = (e / g.ow) % g.oh, p = e / (g.ow * g.oh);
        const float *plane = x + p * g.h * g.w;
        float sum;
        long long at = ge2_pool_window(g, plane, oy, ox, max, &sum);
        y[e] = max ? plane[at] : sum * inv_area;
    }
}

// dy [N, C, OH, OW], x [N, C, H, W] (max only) -> dx [N, C, H, W]
__global__ void ge2_pool2d_backward_kernel(ge2_pool2d_geom g, bool max, const float *dy, const float *x, float *dx)
{
    long long total = g.n * g.c * g.h * g.w;
    float inv_area = 1.0f / (float)(g.kh * g.kw);
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        long long ix = e % g.w, iy = (e / g.w) % g.h, p = e / (g.w * g.h);
        // windows covering (iy, ix): oy·sh - ph <= iy <= oy·sh - ph + kh - 1
        long long oy0 = iy + g.ph - g.kh + 1, ox0 = ix + g.pw - g.kw + 1;
        oy0 = oy0 > 0 ? (oy0 + g.sh - 1) / g.sh : 0;
        ox0 = ox0 > 0 ? (ox0 + g.sw - 1) / g.sw : 0;
        long long oy1 = (iy + g.ph) / g.sh, ox1 = (ix + g.pw) / g.sw;
        const float *dplane = dy + p * g.oh * g.ow;
        float s = 0.0f;
        for (long long oy = oy0; oy <= oy1 && oy < g.oh; oy++)
            for (long long ox = ox0; ox <= ox1 && ox < g.ow; ox++) {
                if (!max) {
                    s += dplane[oy * g.ow + ox] * inv_area;
                    continue;
                }
                float unused;
                if (ge2_pool_window(g, x + p * g.h * g.w, oy, ox, true, &unused) == iy * g.w + ix)
                    s += dplane[oy * g.ow + ox];
            }
        dx[e] = s;
    }
}

// ----------------------------------------------------------------- launchers

extern "C" ge2_status ge2_cuda_pool2d_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    if (!l->out[0].data)
        return GE2_OK;
    ge2_pool2d_geom g = ge2_pool2d_geom_of(&l->node->attrs.pool2d, l->in[0].shape);
    long long total = g.n * g.c * g.oh * g.ow;
    ge2_pool2d_kernel<<<ge2_cuda_blocks(total, GE2_CUDA_THREADS), GE2_CUDA_THREADS, 0, ge2_cuda_stream(l)>>>(
        g, l->node->op == GE2_OP_MAX_POOL2D, (const float *)l->in[0].data, (float *)l->out[0].data);
    return ge2_cuda_check_launch(l, "ge2_pool2d_kernel");
}

extern "C" ge2_status ge2_cuda_pool2d_backward_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    if (!l->out[0].data)
        return GE2_OK;
    ge2_pool2d_geom g = ge2_pool2d_geom_of(&l->node->attrs.pool2d, l->in[1].shape);
    long long total = g.n * g.c * g.h * g.w;
    ge2_pool2d_backward_kernel<<<ge2_cuda_blocks(total, GE2_CUDA_THREADS), GE2_CUDA_THREADS, 0,
                                 ge2_cuda_stream(l)>>>(g, l->node->op == GE2_OP_MAX_POOL2D_BACKWARD,
                                                       (const float *)l->in[0].data, (const float *)l->in[1].data,
                                                       (float *)l->out[0].data);
    return ge2_cuda_check_launch(l, "ge2_pool2d_backward_kernel");
}
