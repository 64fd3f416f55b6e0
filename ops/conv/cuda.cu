// CONV2D and its backward ops: ge2's own direct kernels, the fallback that
// always applies (cudnn.c runs cuDNN's plans where it can), and the bias
// kernels that go with cuDNN's convolutions. Under precision BF16 (FP16)
// they multiply bf16 (fp16) operands and round each convolution to that
// type, as cuDNN's engines of that type and the CPU do. Each output element is computed by one thread (forward,
// input gradient) or one block (weight gradient, a fixed-shape block
// reduction), so every sum has one order: replay equals eager bitwise, and
// no float atomics.
#include <cuda_fp16.h>

#include "kernels/cuda/bf16_store.h"
#include "kernels/cuda/block_reduce.h"
#include "kernels/cuda/check.h"
#include "ops/conv/conv.h"

#define GE2_CONV_REDUCE_THREADS 256

// ------------------------------------------------------------------- kernels

// What the multiply reads its operands as and each convolution's sum is
// stored as: fp32, or under precision BF16 / FP16 that 16-bit type's
// values, as cuDNN's bf16 and fp16 engines write them (the CPU rounds the same)
enum ge2_conv_rounding { GE2_CONV_FP32, GE2_CONV_BF16, GE2_CONV_FP16 };

static __device__ __forceinline__ float ge2_conv_round(float x, int rounding)
{
    return rounding == GE2_CONV_BF16   ? __bfloat162float(__float2bfloat16_rn(x))
           : rounding == GE2_CONV_FP16 ? __half2float(__float2half_rn(x))
                                       : x;
}

// An operand as the multiply reads it: a bf16 tensor as it is, an f32 one
// rounded as the precision asks
static __device__ __forceinline__ float ge2_conv_operand(const float *p, int rounding)
{
    return ge2_conv_round(*p, rounding);
}
static __device__ __forceinline__ float ge2_conv_operand(const __nv_bfloat16 *p, int) { return ge2_load(p); }

// y [N, O, OH, OW] = conv(x [N, C, H, W], w [O, Cg, KH, KW]) + b [O]
template <typename T, typename Y>
__global__ void ge2_conv2d_kernel(ge2_conv2d_geom g, const T *x, const T *w, const float *b, Y *y, int rounding)
{
    long long total = g.n * g.o * g.oh * g.ow;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        long long ox = e % g.ow, oy = (e / g.ow) % g.oh, o = (e / (g.ow * g.oh)) % g.o, n = e / (g.ow * g.oh * g.o);
        long long c0 = (o / g.og) * g.cg;
        float s = 0.0f;
        for (long long c = 0; c < g.cg; c++) {
            const T *xc = x + ((n * g.c + c0 + c) * g.h) * g.w;
            const T *wc = w + ((o * g.cg + c) * g.kh) * g.kw;
            for (long long i = 0; i < g.kh; i++) {
                long long iy = oy * g.sh - g.ph + i * g.dh;
                if (iy < 0 || iy >= g.h)
                    continue;
                for (long long j = 0; j < g.kw; j++) {
                    long long ix = ox * g.sw - g.pw + j * g.dw;
                    if (ix >= 0 && ix < g.w)
                        s += ge2_conv_operand(&xc[iy * g.w + ix], rounding) *
                             ge2_conv_operand(&wc[i * g.kw + j], rounding);
                }
            }
        }
        ge2_store(&y[e], ge2_conv_round(s, rounding) + (b ? b[o] : 0.0f));
    }
}

// dx [N, C, H, W]: each input point gathers the outputs whose window covers it
template <typename T>
__global__ void ge2_conv2d_grad_input_kernel(ge2_conv2d_geom g, const T *dy, const T *w, float *dx, int rounding)
{
    long long total = g.n * g.c * g.h * g.w;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        long long ix = e % g.w, iy = (e / g.w) % g.h, c = (e / (g.w * g.h)) % g.c, n = e / (g.w * g.h * g.c);
        long long grp = c / g.cg, cl = c % g.cg;
        float s = 0.0f;
        for (long long ol = 0; ol < g.og; ol++) {
            long long o = grp * g.og + ol;
            const T *dyo = dy + ((n * g.o + o) * g.oh) * g.ow;
            const T *wc = w + ((o * g.cg + cl) * g.kh) * g.kw;
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
                        s += ge2_conv_operand(&dyo[oy * g.ow + ox], rounding) *
                             ge2_conv_operand(&wc[i * g.kw + j], rounding);
                }
            }
        }
        dx[e] = ge2_conv_round(s, rounding);
    }
}

// dw [O, Cg, KH, KW]: one block per weight, summing over samples and output
// positions in a fixed order
template <typename T>
__global__ void ge2_conv2d_grad_weight_kernel(ge2_conv2d_geom g, const T *dy, const T *x, float *dw, int rounding)
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
            s += ge2_conv_operand(&dy[(n * g.o + o) * pix + oy * g.ow + ox], rounding) *
                 ge2_conv_operand(&x[((n * g.c + c) * g.h + iy) * g.w + ix], rounding);
    }
    s = ge2_block_sum(s);
    if (threadIdx.x == 0)
        dw[widx] = ge2_conv_round(s, rounding);
}

// db [O]: one block per output channel; dy f32, or bf16 under precision
// BF16 (the operand the weight gradient's convolution reads)
template <typename T> __global__ void ge2_conv2d_grad_bias_kernel(ge2_conv2d_geom g, const T *dy, float *db)
{
    long long o = blockIdx.x, pix = g.oh * g.ow;
    float s = 0.0f;
    for (long long p = threadIdx.x; p < g.n * pix; p += blockDim.x)
        s += ge2_load(&dy[((p / pix) * g.o + o) * pix + p % pix]);
    s = ge2_block_sum(s);
    if (threadIdx.x == 0)
        db[o] = s;
}

// y [N, O, OH, OW] += b [O], after cuDNN's convolution (which has no bias);
// y f32, or bf16 (stored so: rounded again after the add, as the CPU rounds it)
template <typename Y> __global__ void ge2_conv2d_add_bias_kernel(ge2_conv2d_geom g, const float *b, Y *y)
{
    long long total = g.n * g.o * g.oh * g.ow, pix = g.oh * g.ow;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x)
        ge2_store(&y[e], ge2_load(&y[e]) + b[(e / pix) % g.o]);
}

// ----------------------------------------------------------------- launchers

extern "C" ge2_status ge2_cuda_conv2d_add_bias(const ge2_launch *l)
{
    ge2_conv2d_geom g = ge2_conv2d_geom_of(GE2_ATTRS(ge2_conv2d_attrs, l->node->attrs), l->in[0].shape, l->in[1].shape);
    const unsigned blocks = ge2_cuda_blocks(g.n * g.o * g.oh * g.ow, GE2_CUDA_THREADS);
    if (l->out[0].dtype == GE2_BF16)
        ge2_conv2d_add_bias_kernel<<<blocks, GE2_CUDA_THREADS, 0, ge2_cuda_stream(l)>>>(
            g, (const float *)l->in[2].data, (__nv_bfloat16 *)l->out[0].data);
    else
        ge2_conv2d_add_bias_kernel<<<blocks, GE2_CUDA_THREADS, 0, ge2_cuda_stream(l)>>>(
            g, (const float *)l->in[2].data, (float *)l->out[0].data);
    return ge2_cuda_check_launch(l, "ge2_conv2d_add_bias_kernel");
}

extern "C" ge2_status ge2_cuda_conv2d_grad_bias(const ge2_launch *l)
{
    ge2_conv2d_geom g = ge2_conv2d_geom_of(GE2_ATTRS(ge2_conv2d_attrs, l->node->attrs), l->in[2].shape, l->in[1].shape);
    if (l->in[0].dtype == GE2_BF16)
        ge2_conv2d_grad_bias_kernel<<<(unsigned)g.o, GE2_CONV_REDUCE_THREADS, 0, ge2_cuda_stream(l)>>>(
            g, (const __nv_bfloat16 *)l->in[0].data, (float *)l->out[1].data);
    else
        ge2_conv2d_grad_bias_kernel<<<(unsigned)g.o, GE2_CONV_REDUCE_THREADS, 0, ge2_cuda_stream(l)>>>(
            g, (const float *)l->in[0].data, (float *)l->out[1].data);
    return ge2_cuda_check_launch(l, "ge2_conv2d_grad_bias_kernel");
}

// The direct kernels' operands (inputs a and b): both f32 (rounded as they
// are read under precision BF16 or FP16) or both bf16 (the storage pass's
// tensors); their outputs f32, but for CONV2D's y stored in bf16 (then its
// operands are bf16 too)
static ge2_status check_operands(const ge2_launch *l, int a, int b)
{
    const ge2_dtype da = l->in[a].dtype, db = l->in[b].dtype;
    const bool y_ok = l->out[0].dtype == GE2_F32 ||
                      (l->out[0].dtype == GE2_BF16 && l->node->op == GE2_OP_CONV2D && da == GE2_BF16);
    if ((da != GE2_F32 && da != GE2_BF16) || da != db || !y_ok)
        return ge2_error(GE2_ERR_UNSUPPORTED,
                         "ge2_%s (node %d): the direct kernel takes operands both f32 or both bf16 and an f32 output "
                         "(or conv2d's y in bf16); "
                         "inputs %d and %d are %s and %s, the output %s",
                         ge2_cuda_op_name(l), l->node->id, a, b, ge2_dtype_name(da), ge2_dtype_name(db),
                         ge2_dtype_name(l->out[0].dtype));
    return GE2_OK;
}

// How an f32 launch rounds (its precision's); bf16 tensors are read as they are
static int rounding_of(const ge2_launch *l)
{
    return l->bf16_operands ? GE2_CONV_BF16 : l->f16_operands ? GE2_CONV_FP16 : GE2_CONV_FP32;
}

#define GE2_BF16_IN(i) ((const __nv_bfloat16 *)l->in[i].data)
#define GE2_F32_IN(i) ((const float *)l->in[i].data)

extern "C" ge2_status ge2_cuda_conv2d_direct(const ge2_launch *l)
{
    GE2_TRY(check_operands(l, 0, 1));
    if (!l->out[0].data)
        return GE2_OK;
    ge2_conv2d_geom g = ge2_conv2d_geom_of(GE2_ATTRS(ge2_conv2d_attrs, l->node->attrs), l->in[0].shape, l->in[1].shape);
    const unsigned blocks = ge2_cuda_blocks(g.n * g.o * g.oh * g.ow, GE2_CUDA_THREADS);
    const float *b = l->n_in > 2 ? GE2_F32_IN(2) : NULL;
    cudaStream_t stream = ge2_cuda_stream(l);
    if (l->out[0].dtype == GE2_BF16) { // y stored in bf16 (the storage pass's): its x and w are too
        __nv_bfloat16 *y = (__nv_bfloat16 *)l->out[0].data;
        ge2_conv2d_kernel<<<blocks, GE2_CUDA_THREADS, 0, stream>>>(g, GE2_BF16_IN(0), GE2_BF16_IN(1), b, y,
                                                                  GE2_CONV_BF16);
    } else if (l->in[0].dtype == GE2_BF16) { // x, w
        ge2_conv2d_kernel<<<blocks, GE2_CUDA_THREADS, 0, stream>>>(g, GE2_BF16_IN(0), GE2_BF16_IN(1), b,
                                                                  (float *)l->out[0].data, GE2_CONV_BF16);
    } else {
        ge2_conv2d_kernel<<<blocks, GE2_CUDA_THREADS, 0, stream>>>(g, GE2_F32_IN(0), GE2_F32_IN(1), b,
                                                                  (float *)l->out[0].data, rounding_of(l));
    }
    return ge2_cuda_check_launch(l, "ge2_conv2d_kernel");
}

extern "C" ge2_status ge2_cuda_conv2d_grad_input_direct(const ge2_launch *l)
{
    GE2_TRY(check_operands(l, 0, 2));
    if (!l->out[0].data)
        return GE2_OK;
    ge2_conv2d_geom g = ge2_conv2d_geom_of(GE2_ATTRS(ge2_conv2d_attrs, l->node->attrs), l->in[1].shape, l->in[2].shape);
    const unsigned blocks = ge2_cuda_blocks(g.n * g.c * g.h * g.w, GE2_CUDA_THREADS);
    float *dx = (float *)l->out[0].data;
    if (l->in[0].dtype == GE2_BF16) // dy, w
        ge2_conv2d_grad_input_kernel<<<blocks, GE2_CUDA_THREADS, 0, ge2_cuda_stream(l)>>>(
            g, GE2_BF16_IN(0), GE2_BF16_IN(2), dx, GE2_CONV_BF16);
    else
        ge2_conv2d_grad_input_kernel<<<blocks, GE2_CUDA_THREADS, 0, ge2_cuda_stream(l)>>>(
            g, GE2_F32_IN(0), GE2_F32_IN(2), dx, rounding_of(l));
    return ge2_cuda_check_launch(l, "ge2_conv2d_grad_input_kernel");
}

extern "C" ge2_status ge2_cuda_conv2d_grad_weight_direct(const ge2_launch *l)
{
    GE2_TRY(check_operands(l, 0, 2));
    ge2_conv2d_geom g = ge2_conv2d_geom_of(GE2_ATTRS(ge2_conv2d_attrs, l->node->attrs), l->in[2].shape, l->in[1].shape);
    if (l->out[0].data) {
        const unsigned blocks = (unsigned)(g.o * g.cg * g.kh * g.kw);
        float *dw = (float *)l->out[0].data;
        if (l->in[0].dtype == GE2_BF16) // dy, x
            ge2_conv2d_grad_weight_kernel<<<blocks, GE2_CONV_REDUCE_THREADS, 0, ge2_cuda_stream(l)>>>(
                g, GE2_BF16_IN(0), GE2_BF16_IN(2), dw, GE2_CONV_BF16);
        else
            ge2_conv2d_grad_weight_kernel<<<blocks, GE2_CONV_REDUCE_THREADS, 0, ge2_cuda_stream(l)>>>(
                g, GE2_F32_IN(0), GE2_F32_IN(2), dw, rounding_of(l));
        GE2_CUDA_CHECK(l, "ge2_conv2d_grad_weight_kernel");
    }
    if (l->n_out > 1 && l->out[1].data)
        return ge2_cuda_conv2d_grad_bias(l);
    return GE2_OK;
}
