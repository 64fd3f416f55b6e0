// ATTENTION and its backward ops in fp32. Two families of kernels:
//
// Tiled (D <= 64, the usual head size): flash attention's blocking. A block
// of 256 threads takes 64 queries (or, for dk and dv, 64 keys) of one head
// and walks the other side 64 rows at a time through shared memory; each
// thread owns a 4x4 piece of every 64x64 product (scores, dy·vᵀ, p·v, ...).
// The forward keeps the softmax online (running max and sum per row), the
// backward recomputes the probabilities from the saved log-sum-exp: one
// kernel for dq (a block per query tile, key tiles in order), one for dk
// and dv (a block per key tile, query tiles in order), after a kernel that
// makes each query's delta = dy·y. Scores are kept in base 2 (q or k
// pre-scaled by scale·log2 e) so each probability is one exp2.
//
// Rows (any D <= 256): a warp per output row, each lane holding up to 8 of
// the row's D values in registers, the scores made one key at a time with a
// warp reduction. Straightforward, and slow: every row reads all its keys.
//
// The same blocking on tensor cores is tensor_cores.cu's: in one TF32 pass
// the op's own kernel under precision TF32 and BF16 (where cuDNN declines),
// in three (fp32's accuracy) the candidate "ge2_attention_3xtf32"
// (candidates.c) under FP32 and FP16, which the kernel registry times
// against the fp32 FMA kernels; the launchers here serve all (attn_run.mma).
//
// Dropout on the weights (attention.h): the tiled kernels draw each tile's
// mask into shared memory as the tiles load (one draw a query and 8 keys,
// whichever thread later reads them); the row kernels draw weight by weight.
//
// No T x T matrix is ever stored, every sum runs in a fixed order and no
// kernel uses atomics, so replays repeat each other bitwise.
#include "kernels/cuda/block_reduce.h"
#include "kernels/cuda/bf16_copy.h"
#include "kernels/cuda/check.h"
#include "ops/attention/attention.h"
#include "ops/attention/cuda_tiles.h"

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
__global__ void ge2_attention_kernel(long long rows, int t_count, int d_count, int hpp, long long qld, float scale,
                                     bool causal, ge2_attn_dropout drop, const float *q, const float *k,
                                     const float *v, float *y, float *lse)
{
    const long long row = ge2_grid_warp();
    const int lane = threadIdx.x % GE2_WARP;
    if (row >= rows)
        return; // the whole warp
    const long long rb = ge2_attn_head_row(row / t_count, t_count, hpp), base = ge2_attn_qkv_off(rb, hpp, qld, d_count),
                    ld = qld;
    const int t = (int)(row % t_count), last = causal ? t : t_count - 1;
    const long long at = rb + (long long)t * hpp; // this query's row
    float qv[DPL], acc[DPL];
    ge2_attn_load<DPL>(q + ge2_attn_qkv_off(at, hpp, qld, d_count), d_count, lane, qv);
#pragma unroll
    for (int i = 0; i < DPL; i++)
        acc[i] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    uint64_t seed, offset;
    ge2_attn_drop_key(drop, seed, offset);
    for (int j = 0; j <= last; j++) {
        const float s = scale * ge2_attn_dot<DPL>(qv, k + base + j * ld, d_count, lane);
        const float m2 = fmaxf(m, s), c = expf(m - m2), p = expf(s - m2);
        const float pm = drop.threshold ? p * ge2_attn_drop_at(drop, seed, offset, row / t_count, t, j, t_count) : p;
        const float *vr = v + base + j * ld;
        l = l * c + p;
#pragma unroll
        for (int i = 0; i < DPL; i++) {
            const int d = lane + GE2_WARP * i;
            acc[i] = acc[i] * c + (d < d_count ? pm * vr[d] : 0.0f);
        }
        m = m2;
    }
#pragma unroll
    for (int i = 0; i < DPL; i++) {
        const int d = lane + GE2_WARP * i;
        if (y && d < d_count)
            y[at * d_count + d] = acc[i] / l;
    }
    if (lse && lane == 0)
        lse[at] = m + logf(l);
}

// ------------------------------------------------------------ tiled kernels

#define GE2_ATTN_TILE_THREADS 256 // 16 x 16 threads, a 4x4 piece each

// acc[r][c] += Σ_k a[k][row0 + r] · b[k][col0 + c]: both tiles transposed (k-major)
__device__ __forceinline__ void ge2_attn_mm_tt(float (&acc)[4][4], const float *a, const float *b, int row0, int col0)
{
#pragma unroll 8
    for (int k = 0; k < GE2_ATTN_TILE; k++) {
        const float4 x4 = *(const float4 *)&a[k * GE2_ATTN_TS + row0];
        const float4 y4 = *(const float4 *)&b[k * GE2_ATTN_TS + col0];
        const float x[4] = {x4.x, x4.y, x4.z, x4.w}, y[4] = {y4.x, y4.y, y4.z, y4.w};
#pragma unroll
        for (int r = 0; r < 4; r++)
#pragma unroll
            for (int c = 0; c < 4; c++)
                acc[r][c] += x[r] * y[c];
    }
}

// acc[r][c] += Σ_k a[row0 + r][k] · b[k][col0 + c]: both tiles row-major
__device__ __forceinline__ void ge2_attn_mm_nn(float (&acc)[4][4], const float *a, const float *b, int row0, int col0)
{
#pragma unroll 8
    for (int k = 0; k < GE2_ATTN_TILE; k++) {
        const float4 y4 = *(const float4 *)&b[k * GE2_ATTN_TS + col0];
        const float y[4] = {y4.x, y4.y, y4.z, y4.w};
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const float x = a[(row0 + r) * GE2_ATTN_TS + k];
#pragma unroll
            for (int c = 0; c < 4; c++)
                acc[r][c] += x * y[c];
        }
    }
}

__device__ __forceinline__ void ge2_attn_store4(float *s, int at, const float (&v)[4])
{
    *(float4 *)&s[at] = make_float4(v[0], v[1], v[2], v[3]);
}

// max and sum over the 16 threads of a tile row (lanes 0-15 or 16-31 of a warp)
__device__ __forceinline__ float ge2_attn_row_max(float v)
{
    for (int off = 8; off > 0; off /= 2)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

__device__ __forceinline__ float ge2_attn_row_sum(float v)
{
    for (int off = 8; off > 0; off /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

// y, lse of 64 queries of head blockIdx.y; grid (query tiles, heads).
// Causal query tiles run the longest first (the last tile has the most keys).
__global__ void __launch_bounds__(GE2_ATTN_TILE_THREADS)
    ge2_attention_tiled_kernel(int t_count, int d_count, int hpp, long long qld, float scale, bool causal,
                               ge2_attn_dropout drop, const float *q, const float *k, const float *v, float *y,
                               float *lse)
{
    extern __shared__ float smem[];
    float *qt = smem, *kt = qt + GE2_ATTN_TF, *vs = kt + GE2_ATTN_TF, *ps = vs + GE2_ATTN_TF;
    unsigned char *kept = (unsigned char *)(ps + GE2_ATTN_TF);
    uint64_t seed, offset;
    ge2_attn_drop_key(drop, seed, offset);
    const int q0 = (int)(gridDim.x - 1 - blockIdx.x) * GE2_ATTN_TILE;
    const auto [rb, base, ld, qb] = ge2_attn_head_rows_of(blockIdx.y, t_count, hpp, qld, d_count);
    const int row0 = (int)threadIdx.x / 16 * 4, col0 = (int)threadIdx.x % 16 * 4;
    ge2_attn_tile_load<true, GE2_ATTN_TILE_THREADS>(qt, q + qb, q0, t_count, d_count, qld, scale * GE2_ATTN_LOG2E);
    float o[4][4] = {}, m[4], l[4];
#pragma unroll
    for (int r = 0; r < 4; r++)
        m[r] = -INFINITY, l[r] = 0.0f;
    const int end = causal ? min(q0 + GE2_ATTN_TILE, t_count) : t_count;
    for (int k0 = 0; k0 < end; k0 += GE2_ATTN_TILE) {
        __syncthreads(); // the last tile's readers are done
        ge2_attn_tile_load<true, GE2_ATTN_TILE_THREADS>(kt, k + qb, k0, t_count, d_count, qld, 1.0f);
        ge2_attn_tile_load<false, GE2_ATTN_TILE_THREADS>(vs, v + qb, k0, t_count, d_count, qld, 1.0f);
        if (drop.threshold)
            ge2_attn_drop_tile<GE2_ATTN_TILE_THREADS>(kept, drop, seed, offset, blockIdx.y, q0, k0, t_count);
        __syncthreads();
        float s[4][4] = {};
        ge2_attn_mm_tt(s, qt, kt, row0, col0);
#pragma unroll
        for (int r = 0; r < 4; r++) {
            float mx = -INFINITY;
#pragma unroll
            for (int c = 0; c < 4; c++) {
                if (!ge2_attn_sees(q0 + row0 + r, k0 + col0 + c, t_count, causal))
                    s[r][c] = -INFINITY; // rows past T see nothing: their m stays -inf and they are never written
                mx = fmaxf(mx, s[r][c]);
            }
            const float m2 = fmaxf(m[r], ge2_attn_row_max(mx));
            const float alpha = m2 == -INFINITY ? 1.0f : exp2f(m[r] - m2);
            float sum = 0.0f;
#pragma unroll
            for (int c = 0; c < 4; c++) {
                s[r][c] = m2 == -INFINITY ? 0.0f : exp2f(s[r][c] - m2);
                sum += s[r][c];
            }
            l[r] = l[r] * alpha + ge2_attn_row_sum(sum);
            m[r] = m2;
#pragma unroll
            for (int c = 0; c < 4; c++) {
                o[r][c] *= alpha;
                if (drop.threshold) // the sum above is the softmax's; p·v sums the kept weights
                    s[r][c] *= ge2_attn_drop_factor(kept, drop.scale, row0 + r, col0 + c);
            }
            ge2_attn_store4(ps, (row0 + r) * GE2_ATTN_TS + col0, s[r]);
        }
        __syncthreads();
        ge2_attn_mm_nn(o, ps, vs, row0, col0);
    }
#pragma unroll
    for (int r = 0; r < 4; r++) {
        const int i = q0 + row0 + r;
        if (i >= t_count)
            continue;
#pragma unroll
        for (int c = 0; c < 4; c++)
            if (y && col0 + c < d_count)
                y[base + i * ld + col0 + c] = o[r][c] / l[r];
        if (lse && col0 == 0)
            lse[rb + (long long)i * hpp] = (m[r] + log2f(l[r])) * GE2_ATTN_LN2;
    }
}

// delta [rows] = dy·y per row
__global__ void ge2_attention_delta_kernel(long long rows, int d_count, const float *dy, const float *y,
                                           float *delta)
{
    const long long row = ge2_grid_warp();
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

// dq_t = scale Σ_j p_tj (m_tj dy_t·v_j - delta_t) k_j, keys in order (m: the
// dropout factor, 1 without)
template <int DPL>
__global__ void ge2_attention_grad_q_kernel(long long rows, int t_count, int d_count, int hpp, long long qld,
                                            float scale, bool causal, ge2_attn_dropout drop, const float *dy,
                                            const float *q, const float *k, const float *v, const float *lse,
                                            const float *delta, float *dq)
{
    const long long row = ge2_grid_warp();
    const int lane = threadIdx.x % GE2_WARP;
    if (row >= rows)
        return;
    const long long rb = ge2_attn_head_row(row / t_count, t_count, hpp), base = ge2_attn_qkv_off(rb, hpp, qld, d_count),
                    ld = qld;
    const int t = (int)(row % t_count), last = causal ? t : t_count - 1;
    const long long at = rb + (long long)t * hpp, qa = ge2_attn_qkv_off(at, hpp, qld, d_count); // this query's row
    float qv[DPL], dyv[DPL], acc[DPL];
    ge2_attn_load<DPL>(q + qa, d_count, lane, qv);
    ge2_attn_load<DPL>(dy + at * d_count, d_count, lane, dyv);
#pragma unroll
    for (int i = 0; i < DPL; i++)
        acc[i] = 0.0f;
    const float z = lse[at], dl = delta[at];
    uint64_t seed, offset;
    ge2_attn_drop_key(drop, seed, offset);
    for (int j = 0; j <= last; j++) {
        const float *kr = k + base + j * ld, *vr = v + base + j * ld;
        const float p = expf(scale * ge2_attn_dot<DPL>(qv, kr, d_count, lane) - z);
        const float dp = ge2_attn_dot<DPL>(dyv, vr, d_count, lane);
        const float ds =
            p * ((drop.threshold ? dp * ge2_attn_drop_at(drop, seed, offset, row / t_count, t, j, t_count) : dp) - dl);
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
            dq[qa + d] = scale * acc[i];
    }
}

// dv_j = Σ_t p_tj m_tj dy_t, dk_j = scale Σ_t p_tj (m_tj dy_t·v_j - delta_t) q_t,
// queries in order
template <int DPL>
__global__ void ge2_attention_grad_kv_kernel(long long rows, int t_count, int d_count, int hpp, long long qld,
                                             float scale, bool causal, ge2_attn_dropout drop, const float *dy,
                                             const float *q, const float *k, const float *v, const float *lse,
                                             const float *delta, float *dk, float *dv)
{
    const long long row = ge2_grid_warp();
    const int lane = threadIdx.x % GE2_WARP;
    if (row >= rows)
        return;
    const auto [rb, base, ld, qb] = ge2_attn_head_rows_of(row / t_count, t_count, hpp, qld, d_count);
    const int j = (int)(row % t_count);
    const long long kj = rb + (long long)j * hpp, ka = ge2_attn_qkv_off(kj, hpp, qld, d_count); // this key's row
    float kv[DPL], vv[DPL], sk[DPL], sv[DPL];
    ge2_attn_load<DPL>(k + ka, d_count, lane, kv);
    ge2_attn_load<DPL>(v + ka, d_count, lane, vv);
#pragma unroll
    for (int i = 0; i < DPL; i++)
        sk[i] = sv[i] = 0.0f;
    uint64_t seed, offset;
    ge2_attn_drop_key(drop, seed, offset);
    for (int t = causal ? j : 0; t < t_count; t++) {
        const float *qr = q + qb + t * qld, *dyr = dy + base + t * ld;
        const long long at = rb + (long long)t * hpp;
        const float p = expf(scale * ge2_attn_dot<DPL>(kv, qr, d_count, lane) - lse[at]);
        const float m = ge2_attn_drop_at(drop, seed, offset, row / t_count, t, j, t_count);
        const float dp = ge2_attn_dot<DPL>(vv, dyr, d_count, lane);
        const float ds = p * ((drop.threshold ? dp * m : dp) - delta[at]);
        const float pm = drop.threshold ? p * m : p;
#pragma unroll
        for (int i = 0; i < DPL; i++) {
            const int d = lane + GE2_WARP * i;
            if (d < d_count) {
                sv[i] += pm * dyr[d];
                sk[i] += ds * qr[d];
            }
        }
    }
#pragma unroll
    for (int i = 0; i < DPL; i++) {
        const int d = lane + GE2_WARP * i;
        if (d < d_count) {
            if (dk)
                dk[ka + d] = scale * sk[i];
            if (dv)
                dv[ka + d] = sv[i];
        }
    }
}

// dq of 64 queries of head blockIdx.y, key tiles in order; grid (query tiles, heads)
__global__ void __launch_bounds__(GE2_ATTN_TILE_THREADS)
    ge2_attention_grad_q_tiled_kernel(int t_count, int d_count, int hpp, long long qld, float scale, bool causal,
                                      ge2_attn_dropout drop, const float *dy, const float *q, const float *k,
                                      const float *v, const float *lse, const float *delta, float *dq)
{
    extern __shared__ float smem[];
    float *qt = smem, *dyt = qt + GE2_ATTN_TF, *kt = dyt + GE2_ATTN_TF, *vt = kt + GE2_ATTN_TF,
          *ks = vt + GE2_ATTN_TF, *dss = ks + GE2_ATTN_TF;
    unsigned char *kept = (unsigned char *)(dss + GE2_ATTN_TF);
    uint64_t seed, offset;
    ge2_attn_drop_key(drop, seed, offset);
    const int q0 = (int)(gridDim.x - 1 - blockIdx.x) * GE2_ATTN_TILE;
    const auto [rb, base, ld, qb] = ge2_attn_head_rows_of(blockIdx.y, t_count, hpp, qld, d_count);
    const int row0 = (int)threadIdx.x / 16 * 4, col0 = (int)threadIdx.x % 16 * 4;
    ge2_attn_tile_load<true, GE2_ATTN_TILE_THREADS>(qt, q + qb, q0, t_count, d_count, qld, scale * GE2_ATTN_LOG2E);
    ge2_attn_tile_load<true, GE2_ATTN_TILE_THREADS>(dyt, dy + base, q0, t_count, d_count, ld, 1.0f);
    float lse2[4], dl[4], acc[4][4] = {};
#pragma unroll
    for (int r = 0; r < 4; r++) {
        const int i = q0 + row0 + r;
        lse2[r] = i < t_count ? lse[rb + (long long)i * hpp] * GE2_ATTN_LOG2E : 0.0f;
        dl[r] = i < t_count ? delta[rb + (long long)i * hpp] : 0.0f;
    }
    const int end = causal ? min(q0 + GE2_ATTN_TILE, t_count) : t_count;
    for (int k0 = 0; k0 < end; k0 += GE2_ATTN_TILE) {
        __syncthreads();
        ge2_attn_tile_load<true, GE2_ATTN_TILE_THREADS>(kt, k + qb, k0, t_count, d_count, qld, 1.0f);
        ge2_attn_tile_load<true, GE2_ATTN_TILE_THREADS>(vt, v + qb, k0, t_count, d_count, qld, 1.0f);
        ge2_attn_tile_load<false, GE2_ATTN_TILE_THREADS>(ks, k + qb, k0, t_count, d_count, qld, 1.0f);
        if (drop.threshold)
            ge2_attn_drop_tile<GE2_ATTN_TILE_THREADS>(kept, drop, seed, offset, blockIdx.y, q0, k0, t_count);
        __syncthreads();
        float s[4][4] = {}, dp[4][4] = {};
        ge2_attn_mm_tt(s, qt, kt, row0, col0);   // scores, base 2
        ge2_attn_mm_tt(dp, dyt, vt, row0, col0); // dy_i · v_j
#pragma unroll
        for (int r = 0; r < 4; r++) {
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const float p = ge2_attn_sees(q0 + row0 + r, k0 + col0 + c, t_count, causal)
                                    ? exp2f(s[r][c] - lse2[r])
                                    : 0.0f;
                const float dpm = drop.threshold ? dp[r][c] * ge2_attn_drop_factor(kept, drop.scale, row0 + r, col0 + c)
                                                 : dp[r][c];
                s[r][c] = p * (dpm - dl[r]);
            }
            ge2_attn_store4(dss, (row0 + r) * GE2_ATTN_TS + col0, s[r]);
        }
        __syncthreads();
        ge2_attn_mm_nn(acc, dss, ks, row0, col0);
    }
#pragma unroll
    for (int r = 0; r < 4; r++)
#pragma unroll
        for (int c = 0; c < 4; c++)
            if (q0 + row0 + r < t_count && col0 + c < d_count)
                dq[qb + (q0 + row0 + r) * qld + col0 + c] = scale * acc[r][c];
}

// dk, dv of 64 keys of head blockIdx.y, query tiles in order; grid (key
// tiles, heads). The first key tiles have the most queries under a causal
// mask, so they start first.
__global__ void __launch_bounds__(GE2_ATTN_TILE_THREADS)
    ge2_attention_grad_kv_tiled_kernel(int t_count, int d_count, int hpp, long long qld, float scale, bool causal,
                                       ge2_attn_dropout drop, const float *dy, const float *q, const float *k,
                                       const float *v, const float *lse, const float *delta, float *dk, float *dv)
{
    extern __shared__ float smem[];
    float *kt = smem, *vt = kt + GE2_ATTN_TF, *qt = vt + GE2_ATTN_TF, *qs = qt + GE2_ATTN_TF,
          *dyt = qs + GE2_ATTN_TF, *dys = dyt + GE2_ATTN_TF, *pt = dys + GE2_ATTN_TF, *dst = pt + GE2_ATTN_TF,
          *lse2 = dst + GE2_ATTN_TF, *dl = lse2 + GE2_ATTN_TILE;
    unsigned char *kept = (unsigned char *)(dl + GE2_ATTN_TILE);
    uint64_t seed, offset;
    ge2_attn_drop_key(drop, seed, offset);
    const int k0 = (int)blockIdx.x * GE2_ATTN_TILE;
    const auto [rb, base, ld, qb] = ge2_attn_head_rows_of(blockIdx.y, t_count, hpp, qld, d_count);
    const int row0 = (int)threadIdx.x / 16 * 4, col0 = (int)threadIdx.x % 16 * 4; // rows: keys, columns: queries
    ge2_attn_tile_load<true, GE2_ATTN_TILE_THREADS>(kt, k + qb, k0, t_count, d_count, qld, scale * GE2_ATTN_LOG2E);
    ge2_attn_tile_load<true, GE2_ATTN_TILE_THREADS>(vt, v + qb, k0, t_count, d_count, qld, 1.0f);
    float dka[4][4] = {}, dva[4][4] = {};
    for (int q0 = causal ? k0 : 0; q0 < t_count; q0 += GE2_ATTN_TILE) {
        __syncthreads();
        ge2_attn_tile_load<true, GE2_ATTN_TILE_THREADS>(qt, q + qb, q0, t_count, d_count, qld, 1.0f);
        ge2_attn_tile_load<true, GE2_ATTN_TILE_THREADS>(dyt, dy + base, q0, t_count, d_count, ld, 1.0f);
        ge2_attn_grad_kv_query_tile<GE2_ATTN_TILE_THREADS>(qs, dys, lse2, dl, kept, drop, seed, offset, q + qb,
                                                           dy + base, lse, delta, rb, hpp, ld, qld, q0, k0, t_count,
                                                           d_count);
        __syncthreads();
        float s[4][4] = {}, dp[4][4] = {};
        ge2_attn_mm_tt(s, kt, qt, row0, col0);   // scores (key j, query i), base 2
        ge2_attn_mm_tt(dp, vt, dyt, row0, col0); // v_j · dy_i
#pragma unroll
        for (int r = 0; r < 4; r++) {
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const int i = col0 + c;
                const float m = drop.threshold ? ge2_attn_drop_factor(kept, drop.scale, i, row0 + r) : 1.0f;
                ge2_attn_grad_kv_pair(s[r][c], dp[r][c], ge2_attn_sees(q0 + i, k0 + row0 + r, t_count, causal),
                                      lse2[i], dl[i], drop.threshold != 0, m);
            }
            ge2_attn_store4(pt, (row0 + r) * GE2_ATTN_TS + col0, s[r]);
            ge2_attn_store4(dst, (row0 + r) * GE2_ATTN_TS + col0, dp[r]);
        }
        __syncthreads();
        ge2_attn_mm_nn(dva, pt, dys, row0, col0); // dv_j += Σ_i p_ij dy_i
        ge2_attn_mm_nn(dka, dst, qs, row0, col0); // dk_j += Σ_i ds_ij q_i
    }
#pragma unroll
    for (int r = 0; r < 4; r++)
#pragma unroll
        for (int c = 0; c < 4; c++) {
            const int j = k0 + row0 + r, d = col0 + c;
            if (j >= t_count || d >= d_count)
                continue;
            if (dk)
                dk[qb + j * qld + d] = scale * dka[r][c];
            if (dv)
                dv[qb + j * qld + d] = dva[r][c];
        }
}

// ----------------------------------------------------------------- launchers

typedef struct attn_run {
    long long heads, rows; // rows: heads × T
    int t, d, hpp;         // hpp: heads per position (ge2_attn_geom's h)
    long long qld;         // ge2_attn_geom's qkv_ld
    ge2_attn_slots slots;  // which views hold q, k, v, ...
    float scale;
    bool causal;
    unsigned blocks; // of the row kernels
    int mma;         // how the tiled kernels multiply (GE2_ATTN_FMA, ...)
    bool tiled;      // the tiled kernels take it (attn_tiled)
    ge2_attn_dropout drop;
} attn_run;

// Shared memory of the tiled kernels: 4, 6 and 8 tiles, and two rows of
// per-query values; each then a tile's dropout mask
static const size_t attn_smem_forward = 4 * GE2_ATTN_TF * sizeof(float) + GE2_ATTN_DROP_BYTES;
static const size_t attn_smem_grad_q = 6 * GE2_ATTN_TF * sizeof(float) + GE2_ATTN_DROP_BYTES;
static const size_t attn_smem_grad_kv = (8 * GE2_ATTN_TF + 2 * GE2_ATTN_TILE) * sizeof(float) + GE2_ATTN_DROP_BYTES;

// the most a launch of op asks (the backward's dk, dv kernel asks more than its dq kernel)
static size_t attn_smem_of(ge2_op op, int mma)
{
    if (mma != GE2_ATTN_FMA)
        return ge2_attn_tc_smem();
    return op == GE2_OP_ATTENTION ? attn_smem_forward : attn_smem_grad_kv;
}

// The tiled kernels take rows of up to one tile's width, a head per
// blockIdx.y, and their shared memory must fit what this GPU grants a
// block (it differs between GPUs): otherwise the row kernels run.
static bool attn_tiled(const ge2_launch *l, const ge2_attn_geom &g, int mma)
{
    int device = 0, optin = 0;
    if (g.d > GE2_ATTN_TILE || g.heads > 65535 || cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return attn_smem_of(l->node->op, mma) <= (size_t)optin;
}

// How the op's own tiled kernels multiply, by the precision (which picks
// numerics; timing never does): TF32 tensor cores where the precision
// rounds products to TF32 or coarser anyway (TF32, BF16 where cuDNN
// declines), fp32 FMAs under FP32 and FP16, whose attention is fp32
static int attn_own_mma(const ge2_launch *l)
{
    return l->tf32 || l->bf16_operands ? GE2_ATTN_TF32 : GE2_ATTN_FMA;
}

// The precisions the candidate serves (fp32 attention): where the own
// kernels multiply with FMAs
static bool attn_fp32_precision(const ge2_launch *l) { return attn_own_mma(l) == GE2_ATTN_FMA; }

static ge2_status attn_run_of(const ge2_launch *l, ge2_shape q, int mma, attn_run *r)
{
    const ge2_attention_attrs *a = GE2_ATTRS(ge2_attention_attrs, l->node->attrs);
    const ge2_attn_geom g = ge2_attn_geom_of(q, a);
    if (g.d < 1 || g.d > GE2_ATTN_MAX_D || g.t < 1 || g.t > INT32_MAX / 2)
        return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_%s (node %d): rows of %lld values (the CUDA kernels take 1 to %d) "
                         "over %lld positions",
                         ge2_cuda_op_name(l), l->node->id, (long long)g.d, GE2_ATTN_MAX_D, (long long)g.t);
    const long long per_block = GE2_ATTN_THREADS / GE2_WARP;
    *r = attn_run{g.heads, g.heads * g.t, (int)g.t, (int)g.d, (int)g.h, g.qkv_ld, ge2_attn_slots_of(l->node, g),
                  (float)ge2_attn_scale(a, g.d), a->causal, (unsigned)((g.heads * g.t + per_block - 1) / per_block),
                  mma, attn_tiled(l, g, mma), ge2_attn_dropout_of(l)};
    if (r->drop.threshold && !l->control)
        return ge2_error(GE2_ERR_STATE, "ge2_%s (node %d): a train step with dropout without the control block",
                         ge2_cuda_op_name(l), l->node->id);
    return GE2_OK;
}

static dim3 attn_tiles(const attn_run &r)
{
    return dim3((unsigned)((r.t + GE2_ATTN_TILE - 1) / GE2_ATTN_TILE), (unsigned)r.heads);
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

// The inputs' q or qkv (operand 0 of the forward, 1 of the backward ops)
static ge2_shape attn_q_shape(const ge2_launch *l)
{
    return l->in[l->node->op == GE2_OP_ATTENTION ? 0 : 1].shape;
}

static const char *attn_kernel_name(const attn_run &r)
{
    if (!r.tiled)
        return "ge2 attention, a warp per row (fp32)";
    return r.mma == GE2_ATTN_TF32     ? "ge2 tiled attention (64 x 64 tiles, TF32 tensor cores)"
           : r.mma == GE2_ATTN_3XTF32 ? "ge2 tiled attention (64 x 64 tiles, 3xTF32 tensor cores: fp32 accuracy)"
                                      : "ge2 tiled attention (64 x 64 tiles, fp32)";
}

// A kernel's shared memory past the default 48 KiB
static ge2_status grant_smem(const ge2_launch *l, const void *kernel, size_t bytes)
{
    return ge2_cuda_check_call(l, cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes),
                               "cudaFuncSetAttribute");
}

// The shared memory of the op's tiled kernels that multiply by mma
static ge2_status attn_grant(const ge2_launch *l, int mma)
{
    if (mma != GE2_ATTN_FMA)
        return ge2_cuda_check_call(l, ge2_attn_tc_grant(mma), "cudaFuncSetAttribute");
    if (l->node->op == GE2_OP_ATTENTION)
        return grant_smem(l, (const void *)ge2_attention_tiled_kernel, attn_smem_forward);
    GE2_TRY(grant_smem(l, (const void *)ge2_attention_grad_q_tiled_kernel, attn_smem_grad_q));
    return grant_smem(l, (const void *)ge2_attention_grad_kv_tiled_kernel, attn_smem_grad_kv);
}

// Before warm-up and capture: under precision BF16 cuDNN's plan (cudnn.c),
// else a tiled kernel's shared memory past the default 48 KiB is granted
// here, once per graph key.
extern "C" ge2_status ge2_cuda_attention_prepare(ge2_launch *l)
{
    attn_run r;
    GE2_TRY(attn_run_of(l, attn_q_shape(l), attn_own_mma(l), &r));
    GE2_TRY(ge2_cudnn_attention_prepare(l, attn_kernel_name(r)));
    if (!r.tiled || ge2_cudnn_attention_runs(l))
        return GE2_OK;
    const ge2_status st = attn_grant(l, r.mma);
    if (st != GE2_OK)
        ge2_cudnn_attention_release(l); /* a failed prepare leaves nothing behind */
    return st;
}

extern "C" const char *ge2_cuda_attention_describe(const ge2_launch *l)
{
    const char *bf16 = ge2_cudnn_attention_describe(l);
    attn_run r;
    if (bf16)
        return bf16;
    return attn_run_of(l, attn_q_shape(l), attn_own_mma(l), &r) == GE2_OK ? attn_kernel_name(r) : "cuda kernel";
}

// ------------------------- the candidate: fp32 attention on tensor cores

extern "C" bool ge2_cuda_attention_tc_applies(const ge2_launch *l, char *why, size_t why_size)
{
    attn_run r;
    if (!attn_fp32_precision(l)) {
        snprintf(why, why_size, "%s", l->tf32 ? "precision TF32: the op's own kernels multiply TF32 values already"
                                             : "precision BF16: the op's own kernel is cuDNN's or multiplies TF32 values");
        return false;
    }
    if (attn_run_of(l, attn_q_shape(l), GE2_ATTN_3XTF32, &r) != GE2_OK) {
        snprintf(why, why_size, "%s", ge2_last_error());
        ge2_clear_error();
        return false;
    }
    if (!r.tiled) {
        if (r.d > GE2_ATTN_TILE)
            snprintf(why, why_size, "rows of %d values; the tiles take up to %d", r.d, GE2_ATTN_TILE);
        else if (r.heads > 65535)
            snprintf(why, why_size, "%lld heads; the grid takes up to 65535", r.heads);
        else
            snprintf(why, why_size, "no CUDA device with %zu bytes of shared memory a block",
                     attn_smem_of(l->node->op, r.mma));
        return false;
    }
    return true;
}

extern "C" ge2_status ge2_cuda_attention_tc_prepare(ge2_launch *l)
{
    attn_run r;
    GE2_TRY(attn_run_of(l, attn_q_shape(l), GE2_ATTN_3XTF32, &r));
    if (!r.tiled)
        return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_%s (node %d): the tensor-core attention takes rows of up to %d "
                         "values in %zu bytes of shared memory a block; this launch has %d",
                         ge2_cuda_op_name(l), l->node->id, GE2_ATTN_TILE, attn_smem_of(l->node->op, r.mma), r.d);
    return attn_grant(l, r.mma);
}

extern "C" const char *ge2_cuda_attention_tc_describe(const ge2_launch *l)
{
    attn_run r;
    return attn_run_of(l, attn_q_shape(l), GE2_ATTN_3XTF32, &r) == GE2_OK ? attn_kernel_name(r) : "cuda kernel";
}

// The bf16 tensors (the storage pass's) among a launch's views that the fp32
// kernels take in f32: q, k, v (qkv), the backward's y, the forward's y, a
// packed backward's dqkv
static bool attn_bf16_view(const ge2_launch *l, const ge2_view *v)
{
    if (v->dtype != GE2_BF16 || !v->data)
        return false;
    for (int i = 0; i < l->n_in; i++)
        if (v == &l->in[i])
            return ge2_attention_reads_bf16(l->node, i);
    return v == &l->out[0] && ge2_op_stores_bf16(l->node, 0);
}

// Bytes of the f32 copies of those views
static size_t attn_f32_copies_bytes(const ge2_launch *l)
{
    size_t bytes = 0;
    for (int i = 0; i < l->n_in + l->n_out; i++) {
        const ge2_view *v = i < l->n_in ? &l->in[i] : &l->out[i - l->n_in];
        if (attn_bf16_view(l, v))
            bytes += 2 * ge2_bf16_copy_bytes(ge2_shape_numel(v->shape));
    }
    return bytes;
}

extern "C" size_t ge2_cuda_attention_scratch_bytes(const ge2_launch *l)
{
    // the fp32 kernels' copies only where cuDNN declines the launch: a bf16
    // eval key's attention needs almost nothing then, not room for four f32 tensors
    const size_t cudnn = ge2_cudnn_attention_scratch_bytes(l);
    return cudnn ? cudnn : attn_f32_copies_bytes(l);
}

// *w = l with f32 copies in the scratch in place of its bf16 views: the
// inputs widened into them now, a bf16 y rounded from its copy after the
// kernels (attn_launch)
static ge2_status attn_f32_views(const ge2_launch *l, ge2_launch *w)
{
    *w = *l;
    if (attn_f32_copies_bytes(l) == 0)
        return GE2_OK;
    if (!l->scratch || attn_f32_copies_bytes(l) > l->scratch_bytes)
        return ge2_error(GE2_ERR_STATE, "ge2_%s (node %d): f32 copies of its bf16 tensors need %zu bytes of scratch, "
                         "the launch has %zu", ge2_cuda_op_name(l), l->node->id, attn_f32_copies_bytes(l),
                         l->scratch ? l->scratch_bytes : (size_t)0);
    ge2_bf16_spans spans = {0};
    size_t at = 0;
    for (int i = 0; i < l->n_in + l->n_out; i++) {
        const ge2_view *v = i < l->n_in ? &l->in[i] : &l->out[i - l->n_in];
        ge2_view *wv = i < l->n_in ? &w->in[i] : &w->out[i - l->n_in];
        if (!attn_bf16_view(l, v))
            continue;
        const int64_t n = ge2_shape_numel(v->shape);
        wv->data = (char *)l->scratch + at;
        wv->dtype = GE2_F32;
        if (i < l->n_in)
            ge2_bf16_span_add(&spans, v->data, wv->data, n);
        at += 2 * ge2_bf16_copy_bytes(n);
    }
    return ge2_cuda_bf16_widen(l, &spans);
}

static ge2_status attention_fp32(const ge2_launch *l, int mma);
static ge2_status attention_grad_fp32(const ge2_launch *l, int mma);

// cuDNN's plan where the op's own prepare chose it, else the fp32 kernels
// (fp32, multiplying by mma) on f32 views
static ge2_status attn_launch(const ge2_launch *l, ge2_status (*fp32)(const ge2_launch *, int), int mma)
{
    if (ge2_cudnn_attention_runs(l))
        return ge2_cudnn_attention_launch(l);
    ge2_launch w;
    GE2_TRY(attn_f32_views(l, &w));
    GE2_TRY(fp32(&w, mma));
    if (w.out[0].data == l->out[0].data)
        return GE2_OK;
    ge2_bf16_spans spans = {0}; // the forward's bf16 y, from its f32 copy
    ge2_bf16_span_add(&spans, w.out[0].data, l->out[0].data, ge2_shape_numel(l->out[0].shape));
    return ge2_cuda_bf16_round(l, &spans);
}

extern "C" ge2_status ge2_cuda_attention_launch(const ge2_launch *l)
{
    return attn_launch(l, attention_fp32, attn_own_mma(l));
}

extern "C" ge2_status ge2_cuda_attention_grad_launch(const ge2_launch *l)
{
    return attn_launch(l, attention_grad_fp32, attn_own_mma(l));
}

extern "C" ge2_status ge2_cuda_attention_tc_launch(const ge2_launch *l)
{
    return attn_launch(l, attention_fp32, GE2_ATTN_3XTF32);
}

extern "C" ge2_status ge2_cuda_attention_grad_tc_launch(const ge2_launch *l)
{
    return attn_launch(l, attention_grad_fp32, GE2_ATTN_3XTF32);
}

// View i's data from value at on (NULL stays NULL)
static const float *attn_in(const ge2_launch *l, int i, int64_t at)
{
    return l->in[i].data ? (const float *)l->in[i].data + at : NULL;
}

static float *attn_out(const ge2_launch *l, int i, int64_t at)
{
    return l->out[i].data ? (float *)l->out[i].data + at : NULL;
}

static ge2_status attention_fp32(const ge2_launch *l, int mma)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    attn_run r;
    GE2_TRY(attn_run_of(l, l->in[0].shape, mma, &r));
    if (r.rows == 0)
        return GE2_OK;
    const ge2_attn_slots &o = r.slots;
    const float *q = attn_in(l, o.q, 0), *k = attn_in(l, o.k, o.k_at), *v = attn_in(l, o.v, o.v_at);
    float *lse = l->n_out > 1 ? OUT(1) : NULL;
    if (r.tiled) {
        if (r.mma != GE2_ATTN_FMA)
            return ge2_cuda_check_call(l, ge2_attn_tc_forward(r.mma, attn_tiles(r), ge2_cuda_stream(l), r.t, r.d,
                                                              r.hpp, r.qld, r.scale, r.causal, r.drop, q, k, v, OUT(0),
                                                              lse),
                                       "ge2_attention_tc_kernel");
        ge2_attention_tiled_kernel<<<attn_tiles(r), GE2_ATTN_TILE_THREADS, attn_smem_forward, ge2_cuda_stream(l)>>>(
            r.t, r.d, r.hpp, r.qld, r.scale, r.causal, r.drop, q, k, v, OUT(0), lse);
        return ge2_cuda_check_launch(l, "ge2_attention_tiled_kernel");
    }
    GE2_ATTN_DISPATCH(ge2_attention_kernel, r, l, r.rows, r.t, r.d, r.hpp, r.qld, r.scale, r.causal, r.drop, q, k, v,
                      OUT(0), lse);
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
    ge2_attention_delta_kernel<<<r.blocks, GE2_ATTN_THREADS, 0, ge2_cuda_stream(l)>>>(
        r.rows, r.d, IN(r.slots.dy), IN(r.slots.y), *delta);
    return ge2_cuda_check_launch(l, "ge2_attention_delta_kernel");
}

// dq, then dk and dv (each output whose data is NULL skipped), after the
// rows' delta = dy·y, which both read
static ge2_status attention_grad_fp32(const ge2_launch *l, int mma)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    attn_run r;
    GE2_TRY(attn_run_of(l, l->in[1].shape, mma, &r));
    const ge2_attn_slots &o = r.slots;
    float *dq = attn_out(l, o.dq, 0), *dk = attn_out(l, o.dk, o.k_at), *dv = attn_out(l, o.dv, o.v_at);
    if (r.rows == 0 || (!dq && !dk && !dv))
        return GE2_OK;
    const float *dy = IN(o.dy), *q = attn_in(l, o.q, 0), *k = attn_in(l, o.k, o.k_at), *v = attn_in(l, o.v, o.v_at);
    const float *lse = IN(o.lse);
    float *delta;
    GE2_TRY(attn_delta(l, r, &delta));
    cudaStream_t stream = ge2_cuda_stream(l);
    if (dq && r.tiled) {
        if (r.mma != GE2_ATTN_FMA) {
            GE2_TRY(ge2_cuda_check_call(l, ge2_attn_tc_grad_q(r.mma, attn_tiles(r), stream, r.t, r.d, r.hpp, r.qld,
                                                              r.scale, r.causal, r.drop, dy, q, k, v, lse, delta, dq),
                                        "ge2_attention_grad_q_tc_kernel"));
        } else {
            ge2_attention_grad_q_tiled_kernel<<<attn_tiles(r), GE2_ATTN_TILE_THREADS, attn_smem_grad_q, stream>>>(
                r.t, r.d, r.hpp, r.qld, r.scale, r.causal, r.drop, dy, q, k, v, lse, delta, dq);
            GE2_TRY(ge2_cuda_check_launch(l, "ge2_attention_grad_q_tiled_kernel"));
        }
    } else if (dq) {
        GE2_ATTN_DISPATCH(ge2_attention_grad_q_kernel, r, l, r.rows, r.t, r.d, r.hpp, r.qld, r.scale, r.causal, r.drop,
                          dy, q, k, v, lse, delta, dq);
        GE2_TRY(ge2_cuda_check_launch(l, "ge2_attention_grad_q_kernel"));
    }
    if (!dk && !dv)
        return GE2_OK;
    if (r.tiled) {
        if (r.mma != GE2_ATTN_FMA)
            return ge2_cuda_check_call(l, ge2_attn_tc_grad_kv(r.mma, attn_tiles(r), stream, r.t, r.d, r.hpp, r.qld,
                                                              r.scale, r.causal, r.drop, dy, q, k, v, lse, delta, dk,
                                                              dv),
                                       "ge2_attention_grad_kv_tc_kernel");
        ge2_attention_grad_kv_tiled_kernel<<<attn_tiles(r), GE2_ATTN_TILE_THREADS, attn_smem_grad_kv, stream>>>(
            r.t, r.d, r.hpp, r.qld, r.scale, r.causal, r.drop, dy, q, k, v, lse, delta, dk, dv);
        return ge2_cuda_check_launch(l, "ge2_attention_grad_kv_tiled_kernel");
    }
    GE2_ATTN_DISPATCH(ge2_attention_grad_kv_kernel, r, l, r.rows, r.t, r.d, r.hpp, r.qld, r.scale, r.causal, r.drop,
                      dy, q, k, v, lse, delta, dk, dv);
    return ge2_cuda_check_launch(l, "ge2_attention_grad_kv_kernel");
}
