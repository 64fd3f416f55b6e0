// CONV2D and its backward ops: ge2's own direct kernels, the fallback that
// always applies (cudnn.c runs cuDNN's plans where it can), and the bias
// kernels that go with cuDNN's convolutions. Each output element is computed by one thread (forward,
// input gradient) or one block (weight gradient, a fixed-shape block
// reduction), so every sum has one order: replay equals eager bitwise, and
// no float atomics.
#include "kernels/cuda/block_reduce.h"
#include "kernels/cuda/check.h"
#include "ops/conv/conv.h"

#define GE2_CONV_REDUCE_THREADS 256

// ------------------------------------------------------------------- kernels

// y [N, O, OH, OW] = conv(x [N, C, H, W], w [O, Cg, KH, KW]) + b [O]
__global__ void ge2_conv2d_kernel(ge2_conv2d_geom g, const float *x, const float *w, const float *b, float *y)
{
    long long total = g.n * g.o * g.oh * g.ow;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        long long ox = e % g.ow, oy = (e / g.ow) % g.oh, o = (e / (g.ow * g.oh)) % g.o, n = e / (g.ow * g.oh * g.o);
        long long c0 = (o / g.og) * g.cg;
        float s = b ? b[o] : 0.0f;
        for (long long c = 0; c < g.cg; c++) {
            const float *xc = x + ((n * g.c + c0 + c) * g.h) * g.w;
            const float *wc = w + ((o * g.cg + c) * g.kh) * g.kw;
            for (long long i = 0; i < g.kh; i++) {
                long long iy = oy * g.sh - g.ph + i * g.dh;
                if (iy < 0 || iy >= g.h)
                    continue;
                for (long long j = 0; j < g.kw; j++) {
                    long long ix = ox * g.sw - g.pw + j * g.dw;
                    if (ix >= 0 && ix < g.w)
                        s += xc[iy * g.w + ix] * wc[i * g.kw + j];
                }
            }
        }
        y[e] = s;
    }
}

// dx [N, C, H, W]: each input point gathers the outputs whose window covers it
__global__ void ge2_conv2d_grad_input_kernel(ge2_conv2d_geom g, const float *dy, const float *w, float *dx)
{
    long long total = g.n * g.c * g.h * g.w;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        long long ix = e % g.w, iy = (e / g.w) % g.h, c = (e / (g.w * g.h)) % g.c, n = e / (g.w * g.h * g.c);
        long long grp = c / g.cg, cl = c % g.cg;
        float s = 0.0f;
        for (long long ol = 0; ol < g.og; ol++) {
            long long o = grp * g.og + ol;
            const float *dyo = dy + ((n * g.o + o) * g.oh) * g.ow;
            const float *wc = w + ((o * g.cg + cl) * g.kh) * g.kw;
            for (long long i = 0; i < g.kh; i++) {
                long long ty = iy + g.ph - i * g.dh;
                if (ty < 0 || ty % g.sh)
                    continue;
                long long oy = ty / g.sh;
                if (oy >= g.oh)
                    continue;
                for (long long j = 0; j < g.kw; j++) {
                    long long tx = ix + g.pw - j * g.dw;
                    if (tx < 0 || tx % g.sw)
                        continue;
                    long long ox = tx / g.sw;
                    if (ox < g.ow)
                        s += dyo[oy * g.ow + ox] * wc[i * g.kw + j];
                }
            }
        }
        dx[e] = s;
    }
}

// dw [O, Cg, KH, KW]: one block per weight, summing over samples and output
// positions in a fixed order
__global__ void ge2_conv2d_grad_weight_kernel(ge2_conv2d_geom g, const float *dy, const float *x, float *dw)
{
    long long widx = blockIdx.x;
    long long j = widx % g.kw, i = (widx / g.kw) % g.kh, cl = (widx / (g.kw * g.kh)) % g.cg,
              o = widx / (g.kw * g.kh * g.cg);
    long long c = (o / g.og) * g.cg + cl, pix = g.oh * g.ow;
    float s = 0.0f;
    for (long long p = threadIdx.x; p < g.n * pix; p += blockDim.x) {
        long long n = p / pix, oy = (p % pix) / g.ow, ox = p % g.ow;
        long long iy = oy * g.sh - g.ph + i * g.dh, ix = ox * g.sw - g.pw + j * g.dw;
        if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w)
            s += dy[(n * g.o + o) * pix + oy * g.ow + ox] * x[((n * g.c + c) * g.h + iy) * g.w + ix];
    }
    s = ge2_block_sum(s);
    if (threadIdx.x == 0)
        dw[widx] = s;
}

// db [O]: one block per output channel
__global__ void ge2_conv2d_grad_bias_kernel(ge2_conv2d_geom g, const float *dy, float *db)
{
    long long o = blockIdx.x, pix = g.oh * g.ow;
    float s = 0.0f;
    for (long long p = threadIdx.x; p < g.n * pix; p += blockDim.x)
        s += dy[((p / pix) * g.o + o) * pix + p % pix];
    s = ge2_block_sum(s);
    if (threadIdx.x == 0)
        db[o] = s;
}

// y [N, O, OH, OW] += b [O], after cuDNN's convolution (which has no bias)
__global__ void ge2_conv2d_add_bias_kernel(ge2_conv2d_geom g, const float *b, float *y)
{
    long long total = g.n * g.o * g.oh * g.ow, pix = g.oh * g.ow;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x)
        y[e] += b[(e / pix) % g.o];
}

// ----------------------------------------------------------------- launchers

extern "C" ge2_status ge2_cuda_conv2d_add_bias(const ge2_launch *l)
{
    ge2_conv2d_geom g = ge2_conv2d_geom_of(&l->node->attrs.conv2d, l->in[0].shape, l->in[1].shape);
    ge2_conv2d_add_bias_kernel<<<ge2_cuda_blocks(g.n * g.o * g.oh * g.ow, GE2_CUDA_THREADS), GE2_CUDA_THREADS, 0,
                                 ge2_cuda_stream(l)>>>(g, (const float *)l->in[2].data, (float *)l->out[0].data);
    return ge2_cuda_check_launch(l, "ge2_conv2d_add_bias_kernel");
}

extern "C" ge2_status ge2_cuda_conv2d_grad_bias(const ge2_launch *l)
{
    ge2_conv2d_geom g = ge2_conv2d_geom_of(&l->node->attrs.conv2d, l->in[2].shape, l->in[1].shape);
    ge2_conv2d_grad_bias_kernel<<<(unsigned)g.o, GE2_CONV_REDUCE_THREADS, 0, ge2_cuda_stream(l)>>>(
        g, (const float *)l->in[0].data, (float *)l->out[1].data);
    return ge2_cuda_check_launch(l, "ge2_conv2d_grad_bias_kernel");
}

extern "C" ge2_status ge2_cuda_conv2d_direct(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    if (!l->out[0].data)
        return GE2_OK;
    ge2_conv2d_geom g = ge2_conv2d_geom_of(&l->node->attrs.conv2d, l->in[0].shape, l->in[1].shape);
    long long total = g.n * g.o * g.oh * g.ow;
    ge2_conv2d_kernel<<<ge2_cuda_blocks(total, GE2_CUDA_THREADS), GE2_CUDA_THREADS, 0, ge2_cuda_stream(l)>>>(
        g, (const float *)l->in[0].data, (const float *)l->in[1].data,
        l->n_in > 2 ? (const float *)l->in[2].data : NULL, (float *)l->out[0].data);
    return ge2_cuda_check_launch(l, "ge2_conv2d_kernel");
}

extern "C" ge2_status ge2_cuda_conv2d_grad_input_direct(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    if (!l->out[0].data)
        return GE2_OK;
    ge2_conv2d_geom g = ge2_conv2d_geom_of(&l->node->attrs.conv2d, l->in[1].shape, l->in[2].shape);
    long long total = g.n * g.c * g.h * g.w;
    ge2_conv2d_grad_input_kernel<<<ge2_cuda_blocks(total, GE2_CUDA_THREADS), GE2_CUDA_THREADS, 0,
                                   ge2_cuda_stream(l)>>>(g, (const float *)l->in[0].data,
                                                         (const float *)l->in[2].data, (float *)l->out[0].data);
    return ge2_cuda_check_launch(l, "ge2_conv2d_grad_input_kernel");
}

extern "C" ge2_status ge2_cuda_conv2d_grad_weight_direct(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    ge2_conv2d_geom g = ge2_conv2d_geom_of(&l->node->attrs.conv2d, l->in[2].shape, l->in[1].shape);
    const float *dy = (const float *)l->in[0].data;
    if (l->out[0].data) {
        unsigned blocks = (unsigned)(g.o * g.cg * g.kh * g.kw);
        ge2_conv2d_grad_weight_kernel<<<blocks, GE2_CONV_REDUCE_THREADS, 0, ge2_cuda_stream(l)>>>(
            g, dy, (const float *)l->in[2].data, (float *)l->out[0].data);
        GE2_CUDA_CHECK(l, "ge2_conv2d_grad_weight_kernel");
    }
    if (l->n_out > 1 && l->out[1].data)
        return ge2_cuda_conv2d_grad_bias(l);
    return GE2_OK;
}
