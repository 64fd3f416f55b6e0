// BATCH_NORM and its backward ops.
//
// The per-channel sums (the batch statistics; the weight and bias gradients)
// split each channel's m = N·inner values into chunks of GE2_BN_CHUNK, one
// block per (channel, chunk), so a layer with few channels still fills the
// GPU. Each block writes its partial to the launch's workspace; the block
// that finishes last (kernels/cuda/block_reduce.h's ticket) combines every
// channel's partials in chunk order. Fixed trees and a fixed order: replay
// equals eager bitwise, with no float atomics. Normalizing and the input
// gradient are elementwise. Under precision BF16 x may be a bf16 tensor (a
// convolution's output the storage pass stored so), and the input gradient
// may be stored in bf16 (only the convolution's backward GEMMs read it):
// X and DX are float or __nv_bfloat16, computed in f32 either way.
#include "kernels/cuda/bf16_store.h"
#include "kernels/cuda/block_reduce.h"
#include "kernels/cuda/check.h"
#include "ops/norm/norm.h"

#define GE2_BN_THREADS 256
// Values of one channel per block of the reductions: enough to keep a
// block's loads in flight, few enough that a batch of small images still
// gives a few hundred blocks.
#define GE2_BN_CHUNK 4096

// ------------------------------------------------------------------- kernels

// Index arithmetic in 32 bits (the launchers check that m·C fits): these
// kernels are memory-bound, and 64-bit division costs more than the loads.
struct ge2_bn_index {
    unsigned c, inner, m, chunks; // chunks: blocks per channel in the reductions
};

// The k-th of channel c's m values, k = n·inner + i.
__device__ __forceinline__ unsigned ge2_bn_at(const ge2_bn_index &g, unsigned c, unsigned k)
{
    unsigned n = k / g.inner;
    return (n * g.c + c) * g.inner + (k - n * g.inner);
}

// Block b's channel and its chunk [k0, k1) of that channel's values.
__device__ __forceinline__ void ge2_bn_chunk(const ge2_bn_index &g, unsigned b, unsigned *c, unsigned *k0,
                                             unsigned *k1)
{
    *c = b / g.chunks;
    *k0 = (b - *c * g.chunks) * GE2_BN_CHUNK;
    *k1 = min(g.m, *k0 + GE2_BN_CHUNK);
}

// Train-mode statistics: x [N, C, inner] -> stat [2, C] (mean, rstd) in the
// workspace for the normalizing kernel, saved [2, C] when the key keeps it,
// and the running statistics moved by momentum (the unbiased variance).
// Block (c, chunk) takes its chunk's mean and sum of squared deviations
// (two passes over data it just read); the last block combines the chunks
// of every channel in chunk order (Chan et al.'s pairwise update).
template <typename X>
__global__ void ge2_batch_norm_stats_kernel(ge2_bn_index g, float momentum, float eps, float unbias, const X *x,
                                            float *run_mean, float *run_var, long long *batches, float *saved,
                                            float2 *partials /* [C·chunks] */, float *stat /* [2, C] */,
                                            ge2_control *ctl)
{
    unsigned c, k0, k1;
    ge2_bn_chunk(g, blockIdx.x, &c, &k0, &k1);
    float s = 0.0f;
    for (unsigned k = k0 + threadIdx.x; k < k1; k += blockDim.x)
        s += ge2_load(&x[ge2_bn_at(g, c, k)]);
    const float mean = ge2_block_sum(s) / (float)(k1 - k0);
    float ss = 0.0f;
    for (unsigned k = k0 + threadIdx.x; k < k1; k += blockDim.x) {
        float d = ge2_load(&x[ge2_bn_at(g, c, k)]) - mean;
        ss += d * d;
    }
    ss = ge2_block_sum(ss);
    if (threadIdx.x == 0)
        partials[blockIdx.x] = make_float2(mean, ss);
    if (!ge2_ticket_is_last(&ctl->blocks_done))
        return;
    for (unsigned ch = threadIdx.x; ch < g.c; ch += blockDim.x) {
        float n = 0.0f, mu = 0.0f, m2 = 0.0f;
        for (unsigned t = 0; t < g.chunks; t++) {
            const float2 p = __ldcg(&partials[ch * g.chunks + t]); // L2: another block's write
            const float nb = (float)(min(g.m, (t + 1) * GE2_BN_CHUNK) - t * GE2_BN_CHUNK);
            const float total = n + nb, delta = p.x - mu;
            mu += delta * (nb / total);
            m2 += p.y + delta * delta * (n * nb / total);
            n = total;
        }
        const float var = m2 / (float)g.m, rstd = rsqrtf(var + eps);
        stat[ch] = mu;
        stat[g.c + ch] = rstd;
        if (saved) {
            saved[ch] = mu;
            saved[g.c + ch] = rstd;
        }
        run_mean[ch] = (1.0f - momentum) * run_mean[ch] + momentum * mu;
        run_var[ch] = (1.0f - momentum) * run_var[ch] + momentum * var * unbias;
    }
    if (threadIdx.x == 0 && batches) // unsigned: a checkpoint's huge count wraps, defined
        *batches = (long long)((unsigned long long)*batches + 1ull);
    ge2_ticket_reset(&ctl->blocks_done);
}

// y [N, C, inner] = (x - mean) · rstd · w + b (max(0, ·) with relu), with
// (mean, rstd) the train step's stat [2, C], or in eval the running
// statistics (then saved [2, C], when the key keeps it, gets them).
template <typename X>
__global__ void ge2_batch_norm_apply_kernel(ge2_bn_index g, unsigned total, float eps, bool relu, const X *x,
                                            const float *w, const float *b, const float *stat,
                                            const float *run_mean, const float *run_var, float *y, float *saved)
{
    for (unsigned e = blockIdx.x * blockDim.x + threadIdx.x; e < total; e += gridDim.x * blockDim.x) {
        const unsigned c = (e / g.inner) % g.c;
        const float mean = stat ? stat[c] : run_mean[c];
        const float rstd = stat ? stat[g.c + c] : rsqrtf(run_var[c] + eps);
        if (y) {
            const float v = (ge2_load(&x[e]) - mean) * rstd * w[c] + b[c];
            y[e] = relu && !(v > 0.0f) ? 0.0f : v;
        }
        if (saved && !stat && e < g.c) {
            saved[e] = run_mean[e];
            saved[g.c + e] = rsqrtf(run_var[e] + eps);
        }
    }
}

// dy, or with the relu form's y given, dy where y > 0 (else 0)
__device__ __forceinline__ float ge2_bn_dy(const float *dy, const float *y, unsigned at)
{
    return y && !(y[at] > 0.0f) ? 0.0f : dy[at];
}

// dweight [C] = Σ dy·x̂, dbias [C] = Σ dy, x̂ = (x - mean)·rstd from saved:
// block (c, chunk) sums its chunk, the last block each channel's chunks in
// order.
template <typename X>
__global__ void ge2_batch_norm_grad_params_kernel(ge2_bn_index g, const float *dy, const X *x,
                                                  const float *saved, const float *y, float *dw, float *db,
                                                  float2 *partials /* [C·chunks] */, ge2_control *ctl)
{
    unsigned c, k0, k1;
    ge2_bn_chunk(g, blockIdx.x, &c, &k0, &k1);
    const float mean = saved[c], rstd = saved[g.c + c];
    float sw = 0.0f, sb = 0.0f;
    for (unsigned k = k0 + threadIdx.x; k < k1; k += blockDim.x) {
        const unsigned at = ge2_bn_at(g, c, k);
        const float d = ge2_bn_dy(dy, y, at);
        sw += d * (ge2_load(&x[at]) - mean) * rstd;
        sb += d;
    }
    sw = ge2_block_sum(sw);
    sb = ge2_block_sum(sb);
    if (threadIdx.x == 0)
        partials[blockIdx.x] = make_float2(sw, sb);
    if (!ge2_ticket_is_last(&ctl->blocks_done))
        return;
    for (unsigned ch = threadIdx.x; ch < g.c; ch += blockDim.x) {
        float tw = 0.0f, tb = 0.0f;
        for (unsigned t = 0; t < g.chunks; t++) {
            const float2 p = __ldcg(&partials[ch * g.chunks + t]);
            tw += p.x;
            tb += p.y;
        }
        if (dw)
            dw[ch] = tw;
        if (db)
            db[ch] = tb;
    }
    ge2_ticket_reset(&ctl->blocks_done);
}

// dx [N, C, inner] = weight · rstd / m · (m · dy - dbias - x̂ · dweight)
template <typename X, typename DX>
__global__ void ge2_batch_norm_grad_input_kernel(ge2_bn_index g, unsigned total, const float *dy, const X *x,
                                                 const float *w, const float *saved, const float *dw,
                                                 const float *db, const float *y, DX *dx)
{
    const float m = (float)g.m;
    for (unsigned e = blockIdx.x * blockDim.x + threadIdx.x; e < total; e += gridDim.x * blockDim.x) {
        const unsigned c = (e / g.inner) % g.c;
        const float rstd = saved[g.c + c], xhat = (ge2_load(&x[e]) - saved[c]) * rstd;
        ge2_store(&dx[e], w[c] * rstd / m * (m * ge2_bn_dy(dy, y, e) - db[c] - xhat * dw[c]));
    }
}

// ----------------------------------------------------------------- launchers

// Inputs [0, n_float) are f32 but x (input x_at) may be bf16, the rest
// (num_batches_tracked) i64.
static ge2_status require_dtypes(const ge2_launch *l, int n_float, int x_at)
{
    for (int i = 0; i < l->n_in; i++) {
        ge2_dtype want = i < n_float ? GE2_F32 : GE2_I64;
        if (l->in[i].dtype != want && !(i == x_at && l->in[i].dtype == GE2_BF16))
            return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_%s: input %d is %s; the CUDA kernel takes %s",
                             ge2_cuda_op_name(l), i, ge2_dtype_name(l->in[i].dtype), ge2_dtype_name(want));
    }
    return GE2_OK;
}

// The kernels' index arithmetic, once the launch's sizes fit it, and the
// workspace room the reductions' partials need (+ the statistics).
static ge2_status bn_index(const ge2_launch *l, ge2_shape x, ge2_bn_index *out, unsigned *total)
{
    const ge2_bn_geom g = ge2_bn_geom_of(x);
    const int64_t all = g.m * g.c, chunks = (g.m + GE2_BN_CHUNK - 1) / GE2_BN_CHUNK;
    /* a grid-stride index may pass the last value by one stride, a chunk's end by a chunk: room for both */
    const int64_t stride = (int64_t)GE2_CUDA_MAX_BLOCKS * GE2_CUDA_THREADS;
    const int64_t limit = ((int64_t)1 << 32) - (stride > GE2_BN_CHUNK ? stride : GE2_BN_CHUNK);
    if (all >= limit || all < 1)
        return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_%s (node %d): x has %lld values; the CUDA kernels take 1 to %lld",
                         ge2_cuda_op_name(l), l->node->id, (long long)all, (long long)limit - 1);
    *out = ge2_bn_index{(unsigned)g.c, (unsigned)g.inner, (unsigned)g.m, (unsigned)chunks};
    *total = (unsigned)all;
    const size_t need = (size_t)(2 * g.c * chunks + 2 * g.c) * sizeof(float);
    if (need > l->workspace_bytes || !l->workspace)
        return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_%s (node %d): %lld channels x %lld chunks need %zu bytes of workspace, the launch has %zu",
                         ge2_cuda_op_name(l), l->node->id, (long long)g.c, (long long)chunks, need, l->workspace_bytes);
    return GE2_OK;
}

template <typename X>
static ge2_status batch_norm(const ge2_launch *l, const ge2_bn_index &g, unsigned total, bool relu)
{
    const ge2_batch_norm_attrs *a = GE2_ATTRS(ge2_batch_norm_attrs, l->node->attrs);
    const X *x = (const X *)l->in[0].data;
    float *saved = l->n_out > 1 ? (float *)l->out[1].data : NULL;
    float2 *partials = (float2 *)l->workspace;
    float *stat = NULL;
    if (l->training) {
        stat = (float *)(partials + (size_t)g.c * g.chunks);
        ge2_batch_norm_stats_kernel<X><<<g.c * g.chunks, GE2_BN_THREADS, 0, ge2_cuda_stream(l)>>>(
            g, (float)a->momentum, (float)a->eps, (float)ge2_bn_unbias(g.m), x, (float *)l->in[3].data,
            (float *)l->in[4].data, l->n_in > 5 ? (long long *)l->in[5].data : NULL, saved, partials, stat,
            l->control);
        GE2_TRY(ge2_cuda_check_launch(l, "ge2_batch_norm_stats_kernel"));
    }
    ge2_batch_norm_apply_kernel<X><<<ge2_cuda_blocks(total, GE2_CUDA_THREADS), GE2_CUDA_THREADS, 0,
                                     ge2_cuda_stream(l)>>>(g, total, (float)a->eps, relu, x,
                                                           (const float *)l->in[1].data, (const float *)l->in[2].data,
                                                           stat, (const float *)l->in[3].data,
                                                           (const float *)l->in[4].data, (float *)l->out[0].data,
                                                           l->training ? NULL : saved);
    return ge2_cuda_check_launch(l, "ge2_batch_norm_apply_kernel");
}

extern "C" ge2_status ge2_cuda_batch_norm_launch_with(const ge2_launch *l, bool relu)
{
    GE2_TRY(require_dtypes(l, 5, 0));
    GE2_TRY(ge2_cuda_require_control(l));
    ge2_bn_index g;
    unsigned total;
    GE2_TRY(bn_index(l, l->in[0].shape, &g, &total));
    return l->in[0].dtype == GE2_BF16 ? batch_norm<__nv_bfloat16>(l, g, total, relu)
                                      : batch_norm<float>(l, g, total, relu);
}

extern "C" ge2_status ge2_cuda_batch_norm_launch(const ge2_launch *l) { return ge2_cuda_batch_norm_launch_with(l, false); }

template <typename X> static void grad_params(const ge2_launch *l, const ge2_bn_index &g, const float *relu_y)
{
    ge2_batch_norm_grad_params_kernel<X><<<g.c * g.chunks, GE2_BN_THREADS, 0, ge2_cuda_stream(l)>>>(
        g, (const float *)l->in[0].data, (const X *)l->in[1].data, (const float *)l->in[2].data, relu_y,
        (float *)l->out[0].data, (float *)l->out[1].data, (float2 *)l->workspace, l->control);
}

extern "C" ge2_status ge2_cuda_batch_norm_grad_params_launch_with(const ge2_launch *l, const float *relu_y)
{
    GE2_TRY(require_dtypes(l, l->n_in, 1));
    GE2_TRY(ge2_cuda_require_control(l));
    ge2_bn_index g;
    unsigned total;
    GE2_TRY(bn_index(l, l->in[1].shape, &g, &total));
    if (l->in[1].dtype == GE2_BF16)
        grad_params<__nv_bfloat16>(l, g, relu_y);
    else
        grad_params<float>(l, g, relu_y);
    return ge2_cuda_check_launch(l, "ge2_batch_norm_grad_params_kernel");
}

extern "C" ge2_status ge2_cuda_batch_norm_grad_params_launch(const ge2_launch *l)
{
    return ge2_cuda_batch_norm_grad_params_launch_with(l, NULL);
}

template <typename X, typename DX>
static void grad_input(const ge2_launch *l, const ge2_bn_index &g, unsigned total, const float *relu_y)
{
    ge2_batch_norm_grad_input_kernel<X, DX><<<ge2_cuda_blocks(total, GE2_CUDA_THREADS), GE2_CUDA_THREADS, 0,
                                              ge2_cuda_stream(l)>>>(
        g, total, (const float *)l->in[0].data, (const X *)l->in[1].data, (const float *)l->in[2].data,
        (const float *)l->in[3].data, (const float *)l->in[4].data, (const float *)l->in[5].data, relu_y,
        (DX *)l->out[0].data);
}

extern "C" ge2_status ge2_cuda_batch_norm_grad_input_launch_with(const ge2_launch *l, const float *relu_y)
{
    GE2_TRY(require_dtypes(l, l->n_in, 1));
    if (!l->out[0].data)
        return GE2_OK;
    ge2_bn_index g;
    unsigned total;
    GE2_TRY(bn_index(l, l->in[1].shape, &g, &total));
    const bool x16 = l->in[1].dtype == GE2_BF16, dx16 = l->out[0].dtype == GE2_BF16;
    if (x16 && dx16)
        grad_input<__nv_bfloat16, __nv_bfloat16>(l, g, total, relu_y);
    else if (x16)
        grad_input<__nv_bfloat16, float>(l, g, total, relu_y);
    else if (dx16)
        grad_input<float, __nv_bfloat16>(l, g, total, relu_y);
    else
        grad_input<float, float>(l, g, total, relu_y);
    return ge2_cuda_check_launch(l, "ge2_batch_norm_grad_input_kernel");
}

extern "C" ge2_status ge2_cuda_batch_norm_grad_input_launch(const ge2_launch *l)
{
    return ge2_cuda_batch_norm_grad_input_launch_with(l, NULL);
}
