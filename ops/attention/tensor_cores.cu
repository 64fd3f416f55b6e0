// Attention's tiled kernels on tensor cores (cuda.cu launches them: the
// op's own under precision TF32 and BF16, the candidate
// "ge2_attention_3xtf32" under FP32 and FP16), flash attention 2's way: a
// block of 4 warps takes 64 queries (or, for dk and dv, 64 keys) of one
// head, each warp 16 of them, and keeps its scores, probabilities and
// output sums in registers, in the layout of the mma.sync m16n8k8 TF32
// fragments; only the other side's 64-row tiles pass through shared memory.
//
// A warp's 16 x 64 scores are 8 accumulator fragments: lane (g = lane/4,
// t = lane%4) holds rows g and g+8, columns 2t and 2t+1 of each 8 columns.
// The product that follows (p·v, ds·k, ...) sums over those columns, and
// needs them as an A fragment: rows g and g+8, columns t and t+4. So its
// sum runs over the 8 columns in the order 0 2 4 6 1 3 5 7 — column 2t in
// place t, 2t+1 in place t+4 — and it reads the B fragment's rows (v's
// keys, ...) in that order too: every value stays in its thread.
//
// Operands are rounded to TF32 (round to nearest) before each product:
// once (GE2_ATTN_TF32); or (GE2_ATTN_3XTF32) each value is
// split into its TF32 value and the TF32 value of the rest, and three
// products (lo·hi + hi·lo + hi·hi; lo·lo is below fp32's rounding) give
// fp32's accuracy, as CUTLASS's "fast fp32" does.
//
// Scores are kept in base 2 (q or k pre-scaled by scale·log2 e), every sum
// runs in a fixed order and nothing uses atomics: replays repeat bitwise.
// Under dropout each 64 x 64 tile's mask is drawn into shared memory while
// the tiles load (ge2_attn_drop_tile, cuda_tiles.h), one draw a byte.
#include <stdint.h>

#include "ops/attention/cuda_tiles.h"

#define GE2_TC_WARPS 4
#define GE2_TC_THREADS (GE2_TC_WARPS * 32)
#define GE2_TC_ROWS 16 // a warp's queries or keys

// Shared memory: the forward's q, k, v tiles; the dq kernel's q, dy, k, v;
// the dk, dv kernel's k, v, q, dy and two rows of per-query values; each
// then a tile's dropout mask
static const size_t ge2_tc_smem_forward = 3 * GE2_ATTN_TF * sizeof(float) + GE2_ATTN_DROP_BYTES;
static const size_t ge2_tc_smem_grad_q = 4 * GE2_ATTN_TF * sizeof(float) + GE2_ATTN_DROP_BYTES;
static const size_t ge2_tc_smem_grad_kv = (4 * GE2_ATTN_TF + 2 * GE2_ATTN_TILE) * sizeof(float) + GE2_ATTN_DROP_BYTES;

__device__ __forceinline__ uint32_t ge2_tc_round(float x)
{
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}

// c += a · b on one m16n8k8 fragment triple
__device__ __forceinline__ void ge2_tc_mma(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2])
{
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// An operand fragment of N values, rounded: hi; with three passes also lo,
// the rounded rest
template <int MMA, int N> struct ge2_tc_frag {
    uint32_t hi[N], lo[N];
    __device__ __forceinline__ explicit ge2_tc_frag(const float (&x)[N])
    {
#pragma unroll
        for (int i = 0; i < N; i++) {
            hi[i] = ge2_tc_round(x[i]);
            if (MMA == GE2_ATTN_3XTF32)
                lo[i] = ge2_tc_round(x[i] - __uint_as_float(hi[i]));
        }
    }
};

template <int MMA>
__device__ __forceinline__ void ge2_tc_mma(float (&c)[4], const ge2_tc_frag<MMA, 4> &a, const ge2_tc_frag<MMA, 2> &b)
{
    if (MMA == GE2_ATTN_3XTF32) { // the small terms first
        ge2_tc_mma(c, a.lo, b.hi);
        ge2_tc_mma(c, a.hi, b.lo);
    }
    ge2_tc_mma(c, a.hi, b.hi);
}

// acc (16 x 64, 8 fragments) += A · Xᵀ over the 64 (padded D) columns: A is
// rows r0 .. r0+15 of tile a, X all 64 rows of tile x, both row-major.
// Lanes read rows g apart and columns t apart: 32 different banks.
template <int MMA>
__device__ __forceinline__ void ge2_tc_abt(float (&acc)[8][4], const float *a, int r0, const float *x)
{
    const int lane = (int)threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
    for (int k0 = 0; k0 < GE2_ATTN_TILE; k0 += 8) {
        const float *ar = a + (r0 + g) * GE2_ATTN_TS + k0 + t;
        const float av[4] = {ar[0], ar[8 * GE2_ATTN_TS], ar[4], ar[8 * GE2_ATTN_TS + 4]};
        const ge2_tc_frag<MMA, 4> af(av);
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const float *xr = x + (j * 8 + g) * GE2_ATTN_TS + k0 + t;
            const float bv[2] = {xr[0], xr[4]};
            ge2_tc_mma<MMA>(acc[j], af, ge2_tc_frag<MMA, 2>(bv));
        }
    }
}

// acc (16 x 64) += P · X: P the warp's 16 x 64 accumulator fragments (its
// columns are X's rows), X a row-major tile. The sum over each 8 columns
// runs in the order the file's head describes; lanes read rows 2t or 2t+1
// and columns g: 32 different banks.
template <int MMA>
__device__ __forceinline__ void ge2_tc_pv(float (&acc)[8][4], const float (&p)[8][4], const float *x)
{
    const int lane = (int)threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
    for (int kb = 0; kb < 8; kb++) {
        const float av[4] = {p[kb][0], p[kb][2], p[kb][1], p[kb][3]};
        const ge2_tc_frag<MMA, 4> af(av);
        const float *xr = x + (kb * 8 + 2 * t) * GE2_ATTN_TS + g;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const float bv[2] = {xr[j * 8], xr[GE2_ATTN_TS + j * 8]};
            ge2_tc_mma<MMA>(acc[j], af, ge2_tc_frag<MMA, 2>(bv));
        }
    }
}

// A warp's 16 x 64 fragments into rows r0 .. r0+15 of out (row r at out +
// r·ld), row g (+8) times mul[0] (mul[1]); rows past T and columns past D
// are not written
__device__ __forceinline__ void ge2_tc_store(const float (&acc)[8][4], float *out, long long ld, int r0, int t_count,
                                             int d_count, const float (&mul)[2])
{
    const int lane = (int)threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int r = r0 + g + 8 * h;
        if (r >= t_count)
            continue;
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int d = j * 8 + 2 * t + e;
                if (d < d_count)
                    out[r * ld + d] = mul[h] * acc[j][2 * h + e];
            }
    }
}

// max and sum over the 4 lanes that hold one row (t = 0..3)
__device__ __forceinline__ float ge2_tc_row_max(float v)
{
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
    return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

__device__ __forceinline__ float ge2_tc_row_sum(float v)
{
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// y, lse of 64 queries of head blockIdx.y; grid (query tiles, heads).
// Causal query tiles run the longest first.
template <int MMA>
__global__ void __launch_bounds__(GE2_TC_THREADS)
    ge2_attention_tc_kernel(int t_count, int d_count, int hpp, long long qld, float scale, bool causal,
                            ge2_attn_dropout drop, const float *q, const float *k, const float *v, float *y,
                            float *lse)
{
    extern __shared__ __align__(16) float smem[];
    float *qs = smem, *ks = qs + GE2_ATTN_TF, *vs = ks + GE2_ATTN_TF;
    unsigned char *kept = (unsigned char *)(vs + GE2_ATTN_TF);
    uint64_t seed, offset;
    ge2_attn_drop_key(drop, seed, offset);
    const int q0 = (int)(gridDim.x - 1 - blockIdx.x) * GE2_ATTN_TILE;
    const auto [rb, base, ld, qb] = ge2_attn_head_rows_of(blockIdx.y, t_count, hpp, qld, d_count);
    const int lane = (int)threadIdx.x % 32, g = lane / 4, t = lane % 4, r0 = (int)threadIdx.x / 32 * GE2_TC_ROWS;
    ge2_attn_tile_load<false, GE2_TC_THREADS>(qs, q + qb, q0, t_count, d_count, qld, scale * GE2_ATTN_LOG2E);
    float o[8][4] = {}, m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    const int end = causal ? min(q0 + GE2_ATTN_TILE, t_count) : t_count;
    for (int k0 = 0; k0 < end; k0 += GE2_ATTN_TILE) {
        __syncthreads(); // the last tile's readers are done
        ge2_attn_tile_load<false, GE2_TC_THREADS>(ks, k + qb, k0, t_count, d_count, qld, 1.0f);
        ge2_attn_tile_load<false, GE2_TC_THREADS>(vs, v + qb, k0, t_count, d_count, qld, 1.0f);
        if (drop.threshold)
            ge2_attn_drop_tile<GE2_TC_THREADS>(kept, drop, seed, offset, blockIdx.y, q0, k0, t_count);
        __syncthreads();
        float s[8][4] = {};
        ge2_tc_abt<MMA>(s, qs, r0, ks);
#pragma unroll
        for (int h = 0; h < 2; h++) { // rows g and g+8
            const int i = q0 + r0 + g + 8 * h;
            float mx = -INFINITY;
#pragma unroll
            for (int j = 0; j < 8; j++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    if (!ge2_attn_sees(i, k0 + j * 8 + 2 * t + e, t_count, causal))
                        s[j][2 * h + e] = -INFINITY; // rows past T see nothing: never written
                    mx = fmaxf(mx, s[j][2 * h + e]);
                }
            const float m2 = fmaxf(m[h], ge2_tc_row_max(mx));
            const float alpha = m2 == -INFINITY ? 1.0f : exp2f(m[h] - m2);
            float sum = 0.0f;
#pragma unroll
            for (int j = 0; j < 8; j++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    float &p = s[j][2 * h + e];
                    p = m2 == -INFINITY ? 0.0f : exp2f(p - m2);
                    sum += p;
                }
            l[h] = l[h] * alpha + ge2_tc_row_sum(sum);
            m[h] = m2;
#pragma unroll
            for (int j = 0; j < 8; j++)
                o[j][2 * h] *= alpha, o[j][2 * h + 1] *= alpha;
            if (drop.threshold) // the sum above is the softmax's; p·v sums the kept weights
#pragma unroll
                for (int j = 0; j < 8; j++)
#pragma unroll
                    for (int e = 0; e < 2; e++)
                        s[j][2 * h + e] *= ge2_attn_drop_factor(kept, drop.scale, r0 + g + 8 * h, j * 8 + 2 * t + e);
        }
        ge2_tc_pv<MMA>(o, s, vs);
    }
    if (y) {
        const float inv[2] = {1.0f / l[0], 1.0f / l[1]};
        ge2_tc_store(o, y + base, ld, q0 + r0, t_count, d_count, inv);
    }
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int i = q0 + r0 + g + 8 * h;
        if (lse && t == 0 && i < t_count)
            lse[rb + (long long)i * hpp] = (m[h] + log2f(l[h])) * GE2_ATTN_LN2;
    }
}

// dq of 64 queries of head blockIdx.y, key tiles in order; grid (query tiles, heads)
template <int MMA>
__global__ void __launch_bounds__(GE2_TC_THREADS)
    ge2_attention_grad_q_tc_kernel(int t_count, int d_count, int hpp, long long qld, float scale, bool causal,
                                   ge2_attn_dropout drop, const float *dy, const float *q, const float *k,
                                   const float *v, const float *lse, const float *delta, float *dq)
{
    extern __shared__ __align__(16) float smem[];
    float *qs = smem, *dys = qs + GE2_ATTN_TF, *ks = dys + GE2_ATTN_TF, *vs = ks + GE2_ATTN_TF;
    unsigned char *kept = (unsigned char *)(vs + GE2_ATTN_TF);
    uint64_t seed, offset;
    ge2_attn_drop_key(drop, seed, offset);
    const int q0 = (int)(gridDim.x - 1 - blockIdx.x) * GE2_ATTN_TILE;
    const auto [rb, base, ld, qb] = ge2_attn_head_rows_of(blockIdx.y, t_count, hpp, qld, d_count);
    const int lane = (int)threadIdx.x % 32, g = lane / 4, t = lane % 4, r0 = (int)threadIdx.x / 32 * GE2_TC_ROWS;
    ge2_attn_tile_load<false, GE2_TC_THREADS>(qs, q + qb, q0, t_count, d_count, qld, scale * GE2_ATTN_LOG2E);
    ge2_attn_tile_load<false, GE2_TC_THREADS>(dys, dy + base, q0, t_count, d_count, ld, 1.0f);
    float lse2[2], dl[2], acc[8][4] = {};
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int i = q0 + r0 + g + 8 * h;
        lse2[h] = i < t_count ? lse[rb + (long long)i * hpp] * GE2_ATTN_LOG2E : 0.0f;
        dl[h] = i < t_count ? delta[rb + (long long)i * hpp] : 0.0f;
    }
    const int end = causal ? min(q0 + GE2_ATTN_TILE, t_count) : t_count;
    for (int k0 = 0; k0 < end; k0 += GE2_ATTN_TILE) {
        __syncthreads();
        ge2_attn_tile_load<false, GE2_TC_THREADS>(ks, k + qb, k0, t_count, d_count, qld, 1.0f);
        ge2_attn_tile_load<false, GE2_TC_THREADS>(vs, v + qb, k0, t_count, d_count, qld, 1.0f);
        if (drop.threshold)
            ge2_attn_drop_tile<GE2_TC_THREADS>(kept, drop, seed, offset, blockIdx.y, q0, k0, t_count);
        __syncthreads();
        float s[8][4] = {}, dp[8][4] = {};
        ge2_tc_abt<MMA>(s, qs, r0, ks);   // scores, base 2
        ge2_tc_abt<MMA>(dp, dys, r0, vs); // dy_i · v_j
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const int h = c / 2, i = q0 + r0 + g + 8 * h, key = k0 + j * 8 + 2 * t + c % 2;
                const float p = ge2_attn_sees(i, key, t_count, causal) ? exp2f(s[j][c] - lse2[h]) : 0.0f;
                const float dpm =
                    drop.threshold ? dp[j][c] * ge2_attn_drop_factor(kept, drop.scale, i - q0, key - k0) : dp[j][c];
                s[j][c] = p * (dpm - dl[h]);
            }
        ge2_tc_pv<MMA>(acc, s, ks); // dq_i += Σ_j ds_ij k_j
    }
    const float mul[2] = {scale, scale};
    ge2_tc_store(acc, dq + qb, qld, q0 + r0, t_count, d_count, mul);
}

// dk, dv of 64 keys of head blockIdx.y, query tiles in order; grid (key
// tiles, heads). A warp's rows are keys, its columns queries.
template <int MMA>
__global__ void __launch_bounds__(GE2_TC_THREADS)
    ge2_attention_grad_kv_tc_kernel(int t_count, int d_count, int hpp, long long qld, float scale, bool causal,
                                    ge2_attn_dropout drop, const float *dy, const float *q, const float *k,
                                    const float *v, const float *lse, const float *delta, float *dk, float *dv)
{
    extern __shared__ __align__(16) float smem[];
    float *ks = smem, *vs = ks + GE2_ATTN_TF, *qs = vs + GE2_ATTN_TF, *dys = qs + GE2_ATTN_TF,
          *lse2 = dys + GE2_ATTN_TF, *dl = lse2 + GE2_ATTN_TILE;
    unsigned char *kept = (unsigned char *)(dl + GE2_ATTN_TILE);
    uint64_t seed, offset;
    ge2_attn_drop_key(drop, seed, offset);
    const int k0 = (int)blockIdx.x * GE2_ATTN_TILE;
    const auto [rb, base, ld, qb] = ge2_attn_head_rows_of(blockIdx.y, t_count, hpp, qld, d_count);
    const int lane = (int)threadIdx.x % 32, g = lane / 4, t = lane % 4, r0 = (int)threadIdx.x / 32 * GE2_TC_ROWS;
    ge2_attn_tile_load<false, GE2_TC_THREADS>(ks, k + qb, k0, t_count, d_count, qld, scale * GE2_ATTN_LOG2E);
    ge2_attn_tile_load<false, GE2_TC_THREADS>(vs, v + qb, k0, t_count, d_count, qld, 1.0f);
    float dka[8][4] = {}, dva[8][4] = {};
    for (int q0 = causal ? k0 : 0; q0 < t_count; q0 += GE2_ATTN_TILE) {
        __syncthreads();
        ge2_attn_grad_kv_query_tile<GE2_TC_THREADS>(qs, dys, lse2, dl, kept, drop, seed, offset, q + qb, dy + base,
                                                    lse, delta, rb, hpp, ld, qld, q0, k0, t_count, d_count);
        __syncthreads();
        float s[8][4] = {}, dp[8][4] = {};
        ge2_tc_abt<MMA>(s, ks, r0, qs);   // scores (key j, query i), base 2
        ge2_tc_abt<MMA>(dp, vs, r0, dys); // v_j · dy_i
#pragma unroll
        for (int jb = 0; jb < 8; jb++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const int col = jb * 8 + 2 * t + c % 2, key = k0 + r0 + g + 8 * (c / 2);
                const float m = drop.threshold ? ge2_attn_drop_factor(kept, drop.scale, col, key - k0) : 1.0f;
                ge2_attn_grad_kv_pair(s[jb][c], dp[jb][c], ge2_attn_sees(q0 + col, key, t_count, causal), lse2[col],
                                      dl[col], drop.threshold != 0, m);
            }
        ge2_tc_pv<MMA>(dva, s, dys); // dv_j += Σ_i p_ij dy_i
        ge2_tc_pv<MMA>(dka, dp, qs); // dk_j += Σ_i ds_ij q_i
    }
    const float mul_k[2] = {scale, scale}, one[2] = {1.0f, 1.0f};
    if (dv)
        ge2_tc_store(dva, dv + qb, qld, k0 + r0, t_count, d_count, one);
    if (dk)
        ge2_tc_store(dka, dk + qb, qld, k0 + r0, t_count, d_count, mul_k);
}

// ----------------------------------------------------------------- launchers

template <int MMA> static cudaError_t ge2_tc_grant(void)
{
    const cudaFuncAttribute attr = cudaFuncAttributeMaxDynamicSharedMemorySize;
    cudaError_t e = cudaFuncSetAttribute((const void *)ge2_attention_tc_kernel<MMA>, attr, (int)ge2_tc_smem_forward);
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute((const void *)ge2_attention_grad_q_tc_kernel<MMA>, attr, (int)ge2_tc_smem_grad_q);
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute((const void *)ge2_attention_grad_kv_tc_kernel<MMA>, attr, (int)ge2_tc_smem_grad_kv);
    return e;
}

cudaError_t ge2_attn_tc_grant(int mma)
{
    return mma == GE2_ATTN_3XTF32 ? ge2_tc_grant<GE2_ATTN_3XTF32>() : ge2_tc_grant<GE2_ATTN_TF32>();
}

size_t ge2_attn_tc_smem(void) { return ge2_tc_smem_grad_kv; }

// Enqueues KERNEL<MMA> for mma (one TF32 pass or three)
#define GE2_TC_LAUNCH(KERNEL, mma, grid, smem, stream, ...)                                                        \
    do {                                                                                                        \
        if ((mma) == GE2_ATTN_3XTF32)                                                                           \
            KERNEL<GE2_ATTN_3XTF32><<<grid, GE2_TC_THREADS, smem, stream>>>(__VA_ARGS__);                       \
        else                                                                                                    \
            KERNEL<GE2_ATTN_TF32><<<grid, GE2_TC_THREADS, smem, stream>>>(__VA_ARGS__);                         \
    } while (0)

cudaError_t ge2_attn_tc_forward(int mma, dim3 grid, cudaStream_t stream, int t_count, int d_count, int hpp,
                                long long qld, float scale, bool causal, ge2_attn_dropout drop, const float *q,
                                const float *k, const float *v, float *y, float *lse)
{
    GE2_TC_LAUNCH(ge2_attention_tc_kernel, mma, grid, ge2_tc_smem_forward, stream, t_count, d_count, hpp, qld, scale,
                  causal, drop, q, k, v, y, lse);
    return cudaGetLastError();
}

cudaError_t ge2_attn_tc_grad_q(int mma, dim3 grid, cudaStream_t stream, int t_count, int d_count, int hpp,
                               long long qld, float scale, bool causal, ge2_attn_dropout drop, const float *dy,
                               const float *q, const float *k, const float *v, const float *lse,
                               const float *delta, float *dq)
{
    GE2_TC_LAUNCH(ge2_attention_grad_q_tc_kernel, mma, grid, ge2_tc_smem_grad_q, stream, t_count, d_count, hpp, qld,
                  scale, causal, drop, dy, q, k, v, lse, delta, dq);
    return cudaGetLastError();
}

cudaError_t ge2_attn_tc_grad_kv(int mma, dim3 grid, cudaStream_t stream, int t_count, int d_count, int hpp,
                                long long qld, float scale, bool causal, ge2_attn_dropout drop, const float *dy,
                                const float *q, const float *k, const float *v, const float *lse,
                                const float *delta, float *dk, float *dv)
{
    GE2_TC_LAUNCH(ge2_attention_grad_kv_tc_kernel, mma, grid, ge2_tc_smem_grad_kv, stream, t_count, d_count, hpp,
                  qld, scale, causal, drop, dy, q, k, v, lse, delta, dk, dv);
    return cudaGetLastError();
}
