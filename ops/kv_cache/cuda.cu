// ATTENTION_CACHED: a block per (sequence, head). Its threads write the
// token's k and v into the caches, then score q against every cached key up
// to the position (a thread per key, its dot product in channel order, as
// the CPU's), take the softmax with block reductions, and sum the values, a
// thread per channel. Generation reads the caches once per token: the step
// is memory-bound and small, which one block per head suits.
#include <math.h>

#include "kernels/cuda/bad_index.h"
#include "kernels/cuda/block_reduce.h"
#include "kernels/cuda/check.h"
#include "ops/kv_cache/kv_cache.h"

#define GE2_KV_THREADS 128
#define GE2_KV_MAX_HEAD 256 // the largest head size the kernel keeps q of in shared memory

// ------------------------------------------------------------------ kernels

__device__ __forceinline__ float ge2_kv_block_max(float v)
{
    __shared__ float warp_max[GE2_WARP];
    const int lane = threadIdx.x % GE2_WARP, warp = threadIdx.x / GE2_WARP;
    v = ge2_warp_max(v);
    __syncthreads(); // warp_max may still be read by a previous call
    if (lane == 0)
        warp_max[warp] = v;
    __syncthreads();
    v = lane < (int)(blockDim.x / GE2_WARP) ? warp_max[lane] : -INFINITY;
    return ge2_warp_max(v);
}

// qkv [B, 3C], caches [B, len, C], positions [B] -> y [B, C]; block (b, h),
// dynamic shared memory: len scores
__global__ void ge2_attention_cached_kernel(int len, int c, int d, float scale, const float *qkv, float *kc, float *vc,
                                            const int *positions, float *y, ge2_control *ctl, int node)
{
    extern __shared__ float scores[];
    __shared__ float q[GE2_KV_MAX_HEAD];
    const int b = blockIdx.x, h = blockIdx.y, p = positions[b];
    const bool ok = threadIdx.x == 0 && h == 0 ? ge2_index_ok(ctl, node, GE2_BAD_POSITION, b, p, len)
                                               : p >= 0 && p < len;
    const float *row = qkv + (long long)b * 3 * c + h * d;
    float *keys = kc + (long long)b * len * c + h * d, *values = vc + (long long)b * len * c + h * d;
    if (!ok) { // counted: the host fails the step; y is zero meanwhile
        for (int i = threadIdx.x; y && i < d; i += blockDim.x)
            y[(long long)b * c + h * d + i] = 0.0f;
        return;
    }
    for (int i = threadIdx.x; i < d; i += blockDim.x) {
        q[i] = row[i];
        keys[(long long)p * c + i] = row[c + i];
        values[(long long)p * c + i] = row[2 * c + i];
    }
    __syncthreads(); // q, and this token's k and v, visible to the block
    if (!y)
        return;
    float top = -INFINITY;
    for (int t = threadIdx.x; t <= p; t += blockDim.x) {
        float s = 0.0f;
        for (int i = 0; i < d; i++)
            s += q[i] * keys[(long long)t * c + i];
        scores[t] = s * scale;
        top = fmaxf(top, scores[t]);
    }
    top = ge2_kv_block_max(top);
    float sum = 0.0f;
    for (int t = threadIdx.x; t <= p; t += blockDim.x)
        sum += (scores[t] = expf(scores[t] - top));
    sum = ge2_block_sum(sum); // its __syncthreads also publishes the scores
    for (int i = threadIdx.x; i < d; i += blockDim.x) {
        float acc = 0.0f;
        for (int t = 0; t <= p; t++)
            acc += scores[t] * values[(long long)t * c + i];
        y[(long long)b * c + h * d + i] = acc / sum;
    }
}

// ----------------------------------------------------------------- launcher

extern "C" ge2_status ge2_cuda_attention_cached_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 1u << 3));
    GE2_TRY(ge2_cuda_require_control(l)); /* the kernel counts a position past the cache in it */
    const long long batch = l->in[1].shape.dim[0], len = l->in[1].shape.dim[1], c = l->in[1].shape.dim[2];
    const long long heads = ge2_attention_cached_heads(l->node), d = c / heads;
    if (d > GE2_KV_MAX_HEAD || len > 8192 || batch > 65535 || heads > 65535 || c > INT32_MAX / 3)
        return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_attention_cached (node %d): %lld sequences of %lld positions, %lld "
                         "heads of %lld; the CUDA kernel takes heads of at most %d, at most 8192 positions",
                         l->node->id, batch, len, heads, d, GE2_KV_MAX_HEAD);
    ge2_attention_cached_kernel<<<dim3((unsigned)batch, (unsigned)heads), GE2_KV_THREADS, sizeof(float) * (size_t)len,
                                  ge2_cuda_stream(l)>>>(
        (int)len, (int)c, (int)d, (float)(1.0 / sqrt((double)d)), (const float *)l->in[0].data, (float *)l->in[1].data,
        (float *)l->in[2].data, (const int *)l->in[3].data, (float *)l->out[0].data, l->control, l->node->id);
    return ge2_cuda_check_launch(l, "ge2_attention_cached_kernel");
}
