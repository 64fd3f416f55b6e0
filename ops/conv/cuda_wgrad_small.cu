// A CUDA kernel candidate for CONV2D_GRAD_WEIGHT (ops/conv/candidates.c
// registers it): for filters of at most GE2_WGRAD_SMALL_K values per output
// channel (Cin·KH·KW, groups 1), such as a first layer's 1x3x3, where
// cuDNN's weight-gradient engines spend tens of µs on a few hundred weights
// summed over every output position. Block (o, chunk) sums its chunk of
// channel o's output positions into K registers per thread (and the bias
// gradient into one more), the block adds its warps in order, and the last
// block (kernels/cuda/block_reduce.h's ticket) adds the chunks in order:
// memory-bound on dy, deterministic, no atomics. The kernel registry times
// it against the op's own kernel per shape and keeps the faster.
#include "kernels/cuda/block_reduce.h"
#include "kernels/cuda/check.h"
#include "ops/conv/conv.h"

#define GE2_WGRAD_THREADS 256
#define GE2_WGRAD_CHUNK 4096 // output positions of one channel per block

// 32-bit geometry (the candidate applies only where it fits)
struct ge2_wgrad_geom {
    int n, c, h, w, o, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw;
    int k;      // c·kh·kw: weights per output channel
    int chunks; // blocks per output channel
};

__global__ void ge2_conv2d_wgrad_small_kernel(ge2_wgrad_geom g, const float *dy, const float *x, float *dw,
                                              float *db, float *partials /* [o, chunks, k + 1] */, ge2_control *ctl)
{
    __shared__ float warp_part[GE2_WGRAD_THREADS / GE2_WARP][GE2_WGRAD_SMALL_K + 1];
    const int o = blockIdx.x / g.chunks, chunk = blockIdx.x % g.chunks, pix = g.oh * g.ow;
    const int total = g.n * pix, p0 = chunk * GE2_WGRAD_CHUNK;
    const int p1 = total - p0 < GE2_WGRAD_CHUNK ? total : p0 + GE2_WGRAD_CHUNK;
    float acc[GE2_WGRAD_SMALL_K + 1];
#pragma unroll
    for (int k = 0; k <= GE2_WGRAD_SMALL_K; k++)
        acc[k] = 0.0f;
    for (int p = p0 + threadIdx.x; p < p1; p += blockDim.x) {
        const int n = p / pix, q = p - n * pix, oy = q / g.ow, ox = q - oy * g.ow;
        const float d = dy[((long long)n * g.o + o) * pix + q];
#pragma unroll
        for (int k = 0; k < GE2_WGRAD_SMALL_K; k++) {
            if (k >= g.k)
                break;
            const int j = k % g.kw, i = (k / g.kw) % g.kh, c = k / (g.kw * g.kh);
            const int iy = oy * g.sh - g.ph + i * g.dh, ix = ox * g.sw - g.pw + j * g.dw;
            if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w)
                acc[k] += d * x[(((long long)n * g.c + c) * g.h + iy) * g.w + ix];
        }
        acc[GE2_WGRAD_SMALL_K] += d;
    }
    // the block's sums: each warp's in a fixed tree, then the warps in order
    const int lane = threadIdx.x % GE2_WARP, warp = threadIdx.x / GE2_WARP;
#pragma unroll
    for (int k = 0; k <= GE2_WGRAD_SMALL_K; k++) {
        const float v = ge2_warp_sum(acc[k]);
        if (lane == 0)
            warp_part[warp][k] = v;
    }
    __syncthreads();
    if (threadIdx.x <= GE2_WGRAD_SMALL_K) {
        float s = 0.0f;
        for (int wi = 0; wi < GE2_WGRAD_THREADS / GE2_WARP; wi++)
            s += warp_part[wi][threadIdx.x];
        partials[(long long)blockIdx.x * (GE2_WGRAD_SMALL_K + 1) + threadIdx.x] = s;
    }
    if (!ge2_ticket_is_last(&ctl->blocks_done))
        return;
    // the last block: each (channel, weight) sums its chunks in order
    for (int e = threadIdx.x; e < g.o * (g.k + 1); e += blockDim.x) {
        const int oc = e / (g.k + 1), k = e - oc * (g.k + 1), slot = k == g.k ? GE2_WGRAD_SMALL_K : k;
        float s = 0.0f;
        for (int t = 0; t < g.chunks; t++)
            s += __ldcg(&partials[((long long)oc * g.chunks + t) * (GE2_WGRAD_SMALL_K + 1) + slot]);
        if (k < g.k && dw)
            dw[(long long)oc * g.k + k] = s;
        else if (k == g.k && db)
            db[oc] = s;
    }
    ge2_ticket_reset(&ctl->blocks_done);
}

// Whether the candidate takes the launch: groups 1, at most
// GE2_WGRAD_SMALL_K weights per output channel, 32-bit sizes, and room for
// the partials in the workspace.
extern "C" bool ge2_conv2d_wgrad_small_applies(const ge2_launch *l, char *why, size_t why_size)
{
    const ge2_conv2d_geom g = ge2_conv2d_geom_of(GE2_ATTRS(ge2_conv2d_attrs, l->node->attrs), l->in[2].shape, l->in[1].shape);
    const long long k = g.cg * g.kh * g.kw, positions = g.n * g.oh * g.ow;
    const long long chunks = (positions + GE2_WGRAD_CHUNK - 1) / GE2_WGRAD_CHUNK;
    const char *no = NULL;
    if (l->in[0].dtype != GE2_F32 || l->in[2].dtype != GE2_F32 || l->bf16_operands || l->f16_operands)
        no = "f32 only";
    else if (g.groups != 1)
        no = "grouped convolution";
    else if (k > GE2_WGRAD_SMALL_K)
        no = "more weights per output channel than it keeps in registers";
    else if (g.n * g.c * g.h * g.w > INT32_MAX / 2 || g.n * g.o * g.oh * g.ow > INT32_MAX / 2 || g.o * chunks > INT32_MAX)
        no = "sizes past 32 bits";
    else if (!l->control || !l->workspace ||
             (size_t)(g.o * chunks * (GE2_WGRAD_SMALL_K + 1)) * sizeof(float) > l->workspace_bytes)
        no = "no control block or not enough workspace";
    if (no && why && why_size)
        snprintf(why, why_size, "%s", no);
    return !no;
}

extern "C" ge2_status ge2_conv2d_wgrad_small_launch(const ge2_launch *l)
{
    char why[96];
    if (!ge2_conv2d_wgrad_small_applies(l, why, sizeof why))
        return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_conv2d_grad_weight (node %d): small-filter kernel: %s", l->node->id,
                         why);
    const ge2_conv2d_geom c = ge2_conv2d_geom_of(GE2_ATTRS(ge2_conv2d_attrs, l->node->attrs), l->in[2].shape, l->in[1].shape);
    ge2_wgrad_geom g = {(int)c.n,  (int)c.c,  (int)c.h,  (int)c.w,  (int)c.o,  (int)c.kh, (int)c.kw, (int)c.oh,
                        (int)c.ow, (int)c.sh, (int)c.sw, (int)c.ph, (int)c.pw, (int)c.dh, (int)c.dw, 0, 0};
    g.k = g.c * g.kh * g.kw;
    g.chunks = (int)((c.n * c.oh * c.ow + GE2_WGRAD_CHUNK - 1) / GE2_WGRAD_CHUNK);
    ge2_conv2d_wgrad_small_kernel<<<(unsigned)(g.o * g.chunks), GE2_WGRAD_THREADS, 0, ge2_cuda_stream(l)>>>(
        g, (const float *)l->in[0].data, (const float *)l->in[2].data, (float *)l->out[0].data,
        l->n_out > 1 ? (float *)l->out[1].data : NULL, (float *)l->workspace, l->control);
    return ge2_cuda_check_launch(l, "ge2_conv2d_wgrad_small_kernel");
}

extern "C" const char *ge2_conv2d_wgrad_small_describe(const ge2_launch *l)
{
    (void)l;
    return "ge2 small-filter weight gradient (chunked sums, last block adds them in order)";
}
