// ATTENTION and its backward ops in fp32: a warp per output row, each lane
// holding up to 8 of the row's D values in registers (D <= 256), the
// scores made one key at a time with a warp reduction and the softmax kept
// online (flash attention's running max and sum), so no T x T matrix is
// ever stored. The backward recomputes each score from the saved
// log-sum-exp: one kernel for dq (a warp per query, keys in order), one for
// dk and dv (a warp per key, queries in order) after a kernel that makes
// each query's delta = dy·y: every sum in a fixed order, no atomics.
// Straightforward rather than tiled through shared memory: a tensor-core
// path (cuDNN's SDPA for bf16) is the fast one this is measured against.
#include "kernels/cuda/block_reduce.h"
#include "kernels/cuda/check.h"
#include "ops/attention/attention.h"

#define GE2_ATTN_THREADS 128
#define GE2_ATTN_MAX_D 256

// ------------------------------------------------------------------- kernels

template <int DPL> // values of a D row per lane
__device__ __forceinline__ void ge2_attn_load(const float *row, int d_count, int lane, float (&out)[DPL])
{
#pragma unroll
    for (int i = 0; i < DPL; i++) {
        const int d = lane + GE2_WARP * i;
        out[i] = d < d_count ? row[d] : 0.0f;
    }
}

template <int DPL>
__device__ __forceinline__ float ge2_attn_dot(const float (&a)[DPL], const float *row, int d_count, int lane)
{
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < DPL; i++) {
        const int d = lane + GE2_WARP * i;
        if (d < d_count)
            s += a[i] * row[d];
    }
    return ge2_warp_sum(s);
}

template <int DPL>
__global__ void ge2_attention_kernel(long long rows, int t_count, int d_count, float scale, bool causal,
                                     const float *q, const float *k, const float *v, float *y, float *lse)
{
    const long long row = (long long)blockIdx.x * (blockDim.x / GE2_WARP) + threadIdx.x / GE2_WARP;
    const int lane = threadIdx.x % GE2_WARP;
    if (row >= rows)
        return; // the whole warp
    const long long base = row / t_count * t_count * d_count;
    const int t = (int)(row % t_count), last = causal ? t : t_count - 1;
    float qv[DPL], acc[DPL];
    ge2_attn_load<DPL>(q + row * d_count, d_count, lane, qv);
#pragma unroll
    for (int i = 0; i < DPL; i++)
        acc[i] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    for (int j = 0; j <= last; j++) {
        const float s = scale * ge2_attn_dot<DPL>(qv, k + base + (long long)j * d_count, d_count, lane);
        const float m2 = fmaxf(m, s), c = expf(m - m2), p = expf(s - m2);
        const float *vr = v + base + (long long)j * d_count;
        l = l * c + p;
#pragma unroll
        for (int i = 0; i < DPL; i++) {
            const int d = lane + GE2_WARP * i;
            acc[i] = acc[i] * c + (d < d_count ? p * vr[d] : 0.0f);
        }
        m = m2;
    }
#pragma unroll
    for (int i = 0; i < DPL; i++) {
        const int d = lane + GE2_WARP * i;
        if (y && d < d_count)
            y[row * d_count + d] = acc[i] / l;
    }
    if (lse && lane == 0)
        lse[row] = m + logf(l);
}

// delta [rows] = dy·y per row
__global__ void ge2_attention_delta_kernel(long long rows, int d_count, const float *dy, const float *y,
                                           float *delta)
{
    const long long row = (long long)blockIdx.x * (blockDim.x / GE2_WARP) + threadIdx.x / GE2_WARP;
    const int lane = threadIdx.x % GE2_WARP;
    if (row >= rows)
        return;
    float s = 0.0f;
    for (int d = lane; d < d_count; d += GE2_WARP)
        s += dy[row * d_count + d] * y[row * d_count + d];
    s = ge2_warp_sum(s);
    if (lane == 0)
        delta[row] = s;
}

// dq_t = scale Σ_j p_tj (dy_t·v_j - delta_t) k_j, keys in order
template <int DPL>
__global__ void ge2_attention_grad_q_kernel(long long rows, int t_count, int d_count, float scale, bool causal,
                                            const float *dy, const float *q, const float *k, const float *v,
                                            const float *lse, const float *delta, float *dq)
{
    const long long row = (long long)blockIdx.x * (blockDim.x / GE2_WARP) + threadIdx.x / GE2_WARP;
    const int lane = threadIdx.x % GE2_WARP;
    if (row >= rows)
        return;
    const long long base = row / t_count * t_count * d_count;
    const int t = (int)(row % t_count), last = causal ? t : t_count - 1;
    float qv[DPL], dyv[DPL], acc[DPL];
    ge2_attn_load<DPL>(q + row * d_count, d_count, lane, qv);
    ge2_attn_load<DPL>(dy + row * d_count, d_count, lane, dyv);
#pragma unroll
    for (int i = 0; i < DPL; i++)
        acc[i] = 0.0f;
    const float z = lse[row], dl = delta[row];
    for (int j = 0; j <= last; j++) {
        const float *kr = k + base + (long long)j * d_count, *vr = v + base + (long long)j * d_count;
        const float p = expf(scale * ge2_attn_dot<DPL>(qv, kr, d_count, lane) - z);
        const float ds = p * (ge2_attn_dot<DPL>(dyv, vr, d_count, lane) - dl);
#pragma unroll
        for (int i = 0; i < DPL; i++) {
            const int d = lane + GE2_WARP * i;
            if (d < d_count)
                acc[i] += ds * kr[d];
        }
    }
#pragma unroll
    for (int i = 0; i < DPL; i++) {
        const int d = lane + GE2_WARP * i;
        if (d < d_count)
            dq[row * d_count + d] = scale * acc[i];
    }
}

// dv_j = Σ_t p_tj dy_t, dk_j = scale Σ_t p_tj (dy_t·v_j - delta_t) q_t, queries in order
template <int DPL>
__global__ void ge2_attention_grad_kv_kernel(long long rows, int t_count, int d_count, float scale, bool causal,
                                             const float *dy, const float *q, const float *k, const float *v,
                                             const float *lse, const float *delta, float *dk, float *dv)
{
    const long long row = (long long)blockIdx.x * (blockDim.x / GE2_WARP) + threadIdx.x / GE2_WARP;
    const int lane = threadIdx.x % GE2_WARP;
    if (row >= rows)
        return;
    const long long head = row / t_count, base = head * t_count * d_count;
    const int j = (int)(row % t_count);
    float kv[DPL], vv[DPL], sk[DPL], sv[DPL];
    ge2_attn_load<DPL>(k + row * d_count, d_count, lane, kv);
    ge2_attn_load<DPL>(v + row * d_count, d_count, lane, vv);
#pragma unroll
    for (int i = 0; i < DPL; i++)
        sk[i] = sv[i] = 0.0f;
    for (int t = causal ? j : 0; t < t_count; t++) {
        const float *qr = q + base + (long long)t * d_count, *dyr = dy + base + (long long)t * d_count;
        const long long at = head * t_count + t;
        const float p = expf(scale * ge2_attn_dot<DPL>(kv, qr, d_count, lane) - lse[at]);
        const float ds = p * (ge2_attn_dot<DPL>(vv, dyr, d_count, lane) - delta[at]);
#pragma unroll
        for (int i = 0; i < DPL; i++) {
            const int d = lane + GE2_WARP * i;
            if (d < d_count) {
                sv[i] += p * dyr[d];
                sk[i] += ds * qr[d];
            }
        }
    }
#pragma unroll
    for (int i = 0; i < DPL; i++) {
        const int d = lane + GE2_WARP * i;
        if (d < d_count) {
            if (dk)
                dk[row * d_count + d] = scale * sk[i];
            if (dv)
                dv[row * d_count + d] = sv[i];
        }
    }
}

// ----------------------------------------------------------------- launchers

typedef struct attn_run {
    long long rows; // heads × T
    int t, d;
    float scale;
    bool causal;
    unsigned blocks;
} attn_run;

static ge2_status attn_run_of(const ge2_launch *l, ge2_shape q, attn_run *r)
{
    const ge2_attn_geom g = ge2_attn_geom_of(q);
    if (g.d < 1 || g.d > GE2_ATTN_MAX_D || g.t < 1 || g.t > INT32_MAX)
        return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_%s (node %d): rows of %lld values (the CUDA kernels take 1 to %d) "
                         "over %lld positions",
                         ge2_cuda_op_name(l), l->node->id, (long long)g.d, GE2_ATTN_MAX_D, (long long)g.t);
    const ge2_attention_attrs *a = &l->node->attrs.attention;
    const long long per_block = GE2_ATTN_THREADS / GE2_WARP;
    *r = attn_run{g.heads * g.t, (int)g.t, (int)g.d, (float)ge2_attn_scale(a, g.d), a->causal,
                  (unsigned)((g.heads * g.t + per_block - 1) / per_block)};
    return GE2_OK;
}

// Runs KERNEL<DPL> with DPL the least power of 2 with 32·DPL >= d.
#define GE2_ATTN_DISPATCH(KERNEL, r, l, ...)                                                                      \
    do {                                                                                                        \
        cudaStream_t s_ = ge2_cuda_stream(l);                                                                   \
        if ((r).d <= 32)                                                                                        \
            KERNEL<1><<<(r).blocks, GE2_ATTN_THREADS, 0, s_>>>(__VA_ARGS__);                                    \
        else if ((r).d <= 64)                                                                                   \
            KERNEL<2><<<(r).blocks, GE2_ATTN_THREADS, 0, s_>>>(__VA_ARGS__);                                    \
        else if ((r).d <= 128)                                                                                  \
            KERNEL<4><<<(r).blocks, GE2_ATTN_THREADS, 0, s_>>>(__VA_ARGS__);                                    \
        else                                                                                                    \
            KERNEL<8><<<(r).blocks, GE2_ATTN_THREADS, 0, s_>>>(__VA_ARGS__);                                    \
    } while (0)

#define IN(i) ((const float *)l->in[i].data)
#define OUT(i) ((float *)l->out[i].data)

extern "C" ge2_status ge2_cuda_attention_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    attn_run r;
    GE2_TRY(attn_run_of(l, l->in[0].shape, &r));
    if (r.rows == 0)
        return GE2_OK;
    GE2_ATTN_DISPATCH(ge2_attention_kernel, r, l, r.rows, r.t, r.d, r.scale, r.causal, IN(0), IN(1), IN(2), OUT(0),
                      l->n_out > 1 ? OUT(1) : NULL);
    return ge2_cuda_check_launch(l, "ge2_attention_kernel");
}

// delta into the workspace, for the backward kernels
static ge2_status attn_delta(const ge2_launch *l, const attn_run &r, float **delta)
{
    if ((size_t)r.rows * sizeof(float) > l->workspace_bytes || !l->workspace)
        return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_%s (node %d): %lld rows need %zu bytes of workspace, the launch has "
                         "%zu",
                         ge2_cuda_op_name(l), l->node->id, r.rows, (size_t)r.rows * sizeof(float), l->workspace_bytes);
    *delta = (float *)l->workspace;
    ge2_attention_delta_kernel<<<r.blocks, GE2_ATTN_THREADS, 0, ge2_cuda_stream(l)>>>(r.rows, r.d, IN(0), IN(4),
                                                                                         *delta);
    return ge2_cuda_check_launch(l, "ge2_attention_delta_kernel");
}

extern "C" ge2_status ge2_cuda_attention_grad_q_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    if (!l->out[0].data)
        return GE2_OK;
    attn_run r;
    GE2_TRY(attn_run_of(l, l->in[1].shape, &r));
    if (r.rows == 0)
        return GE2_OK;
    float *delta;
    GE2_TRY(attn_delta(l, r, &delta));
    GE2_ATTN_DISPATCH(ge2_attention_grad_q_kernel, r, l, r.rows, r.t, r.d, r.scale, r.causal, IN(0), IN(1), IN(2),
                      IN(3), IN(5), delta, OUT(0));
    return ge2_cuda_check_launch(l, "ge2_attention_grad_q_kernel");
}

extern "C" ge2_status ge2_cuda_attention_grad_kv_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    attn_run r;
    GE2_TRY(attn_run_of(l, l->in[1].shape, &r));
    if (r.rows == 0)
        return GE2_OK;
    float *delta;
    GE2_TRY(attn_delta(l, r, &delta));
    GE2_ATTN_DISPATCH(ge2_attention_grad_kv_kernel, r, l, r.rows, r.t, r.d, r.scale, r.causal, IN(0), IN(1), IN(2),
                      IN(3), IN(5), delta, OUT(0), OUT(1));
    return ge2_cuda_check_launch(l, "ge2_attention_grad_kv_kernel");
}
