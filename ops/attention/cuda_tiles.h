/* CUDA C++ only (cuda.cu, tensor_cores.cu): what attention's tiled kernels
 * share. The tiled kernels take 64 queries or keys of one head a block and
 * walk the other side 64 rows at a time through shared tiles; rows of up
 * to 64 values (D), zero-padded to 64. */
#ifndef GE2_OPS_ATTENTION_CUDA_TILES_H
#define GE2_OPS_ATTENTION_CUDA_TILES_H

#include <cuda_runtime.h>
#include <stdint.h>

#include "ops/attention/attention.h"

#define GE2_ATTN_TILE 64                          // queries or keys per tile; also the padded D
#define GE2_ATTN_TS (GE2_ATTN_TILE + 4)           // row stride in shared memory: float4-aligned, and
                                                  // rows 4 apart fall 16 banks apart
#define GE2_ATTN_TF (GE2_ATTN_TILE * GE2_ATTN_TS) // floats of one tile in shared memory
#define GE2_ATTN_LOG2E 1.4426950408889634f
#define GE2_ATTN_LN2 0.6931471805599453f

// How the tiled kernels multiply: fp32 FMAs (cuda.cu's kernels), or
// tensor cores (tensor_cores.cu) in one TF32 pass or three (fp32's accuracy)
#define GE2_ATTN_FMA 0
#define GE2_ATTN_TF32 1
#define GE2_ATTN_3XTF32 3

// q, k, v, y are dense rows of D values, head hd's position t at row
// ge2_attn_row (attention.h): its first row here, then hpp rows (the heads
// per position: 1, or H when the heads are inside the positions) apart.
__device__ __forceinline__ long long ge2_attn_head_row(long long hd, int t_count, int hpp)
{
    return hd / hpp * t_count * hpp + hd % hpp;
}

// Where row r's values start in q, k, v and their gradients: r·D, or
// packed, its position's qld values apart (ge2_attn_qkv_at); a head's
// positions follow each other qld values apart.
__device__ __forceinline__ long long ge2_attn_qkv_off(long long r, int hpp, long long qld, int d_count)
{
    return r / hpp * qld + r % hpp * d_count;
}

// Where a kernel finds head hd (a tiled kernel's blockIdx.y): the head's
// first row (rb: of lse, delta and y; ge2_attn_head_row), where its rows
// start in y and dy (base, ld floats between positions) and in q, k, v and
// their gradients (qb, qld apart; ge2_attn_qkv_off).
struct ge2_attn_head_rows {
    long long rb, base, ld, qb;
};

__device__ __forceinline__ ge2_attn_head_rows ge2_attn_head_rows_of(long long hd, int t_count, int hpp, long long qld,
                                                                    int d_count)
{
    const long long rb = ge2_attn_head_row(hd, t_count, hpp);
    return {rb, rb * d_count, (long long)hpp * d_count, ge2_attn_qkv_off(rb, hpp, qld, d_count)};
}

// Positions r0 .. r0+63 of one head (x its first row, ld floats between
// positions) into a shared tile by a block of THREADS threads, each value
// times mul; positions past T and columns past D are zero. Row-major
// (s[i][d]) or transposed (s[d][i]), as the product that reads it wants.
// Four values a load where rows start 16-byte aligned (D and ld multiples
// of 4, x aligned: the same answer for every thread of the block).
template <bool TRANSPOSED, int THREADS>
__device__ __forceinline__ void ge2_attn_tile_load(float *s, const float *x, int r0, int t_count, int d_count,
                                                   long long ld, float mul)
{
    if (d_count % 4 == 0 && ld % 4 == 0 && (reinterpret_cast<uintptr_t>(x) & 15) == 0) {
        for (int e = threadIdx.x; e < GE2_ATTN_TILE * GE2_ATTN_TILE / 4; e += THREADS) {
            const int i = e / (GE2_ATTN_TILE / 4), d = e % (GE2_ATTN_TILE / 4) * 4;
            float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (r0 + i < t_count && d < d_count) {
                v = *reinterpret_cast<const float4 *>(x + (long long)(r0 + i) * ld + d);
                v.x *= mul, v.y *= mul, v.z *= mul, v.w *= mul;
            }
            if (TRANSPOSED)
                s[d * GE2_ATTN_TS + i] = v.x, s[(d + 1) * GE2_ATTN_TS + i] = v.y, s[(d + 2) * GE2_ATTN_TS + i] = v.z,
                                    s[(d + 3) * GE2_ATTN_TS + i] = v.w;
            else
                *reinterpret_cast<float4 *>(s + i * GE2_ATTN_TS + d) = v;
        }
        return;
    }
    for (int e = threadIdx.x; e < GE2_ATTN_TILE * GE2_ATTN_TILE; e += THREADS) {
        const int i = e / GE2_ATTN_TILE, d = e % GE2_ATTN_TILE;
        const float val = r0 + i < t_count && d < d_count ? mul * x[(long long)(r0 + i) * ld + d] : 0.0f;
        s[TRANSPOSED ? d * GE2_ATTN_TS + i : i * GE2_ATTN_TS + d] = val;
    }
}

// The base-2 log-sum-exp and delta of queries q0 .. q0+63 of the head whose
// first row is rb into shared rows, by the block's first 64 threads (0
// past T)
__device__ __forceinline__ void ge2_attn_query_stats(float *lse2, float *dl, const float *lse, const float *delta,
                                                     long long rb, int hpp, int q0, int t_count)
{
    if (threadIdx.x < GE2_ATTN_TILE) {
        const int i = q0 + (int)threadIdx.x;
        lse2[threadIdx.x] = i < t_count ? lse[rb + (long long)i * hpp] * GE2_ATTN_LOG2E : 0.0f;
        dl[threadIdx.x] = i < t_count ? delta[rb + (long long)i * hpp] : 0.0f;
    }
}

// Does query i see key j?
__device__ __forceinline__ bool ge2_attn_sees(int i, int j, int t_count, bool causal)
{
    return i < t_count && j < t_count && (!causal || j <= i);
}

// ------------------------------------------------------------------ dropout

#define GE2_ATTN_DROP_BYTES (GE2_ATTN_TILE * GE2_ATTN_TILE / 8) // a tile's dropout mask: a bit a weight

// The seed and the step's offset a kernel draws with (0 without dropout:
// the control block is not read then)
__device__ __forceinline__ void ge2_attn_drop_key(const ge2_attn_dropout &d, uint64_t &seed, uint64_t &offset)
{
    seed = d.threshold ? d.control->rng_seed : 0;
    offset = d.threshold ? d.control->rng_offset : 0;
}

// The dropout factor of head hd's weight (query i, key j), drawn alone
// (the row kernels'): 1 without dropout, else 0 or the scale
__device__ __forceinline__ float ge2_attn_drop_at(const ge2_attn_dropout &d, uint64_t seed, uint64_t offset,
                                                  long long hd, int i, int j, int t_count)
{
    if (!d.threshold)
        return 1.0f;
    return ge2_attn_drop_keeps(ge2_attn_drop_draw(seed, offset, d.stream, hd, i, j, t_count), j, d.threshold)
               ? d.scale
               : 0.0f;
}

// The mask of the weights of queries q0 .. q0+63 and keys k0 .. k0+63 of
// head hd into bits, by a block of THREADS threads: bit j mod 8 of byte
// i·8 + j/8 set where weight (q0 + i, k0 + j) is kept. A byte is one draw
// (8 keys of a query, attention.h), so a tile costs 512 draws however the
// kernel's threads hold its weights.
template <int THREADS>
__device__ __forceinline__ void ge2_attn_drop_tile(unsigned char *bits, const ge2_attn_dropout &d, uint64_t seed,
                                                   uint64_t offset, long long hd, int q0, int k0, int t_count)
{
    for (int at = threadIdx.x; at < GE2_ATTN_DROP_BYTES; at += THREADS) {
        const int i = q0 + at / 8, j = k0 + at % 8 * 8;
        unsigned b = 0;
        if (i < t_count && j < t_count) {
            const ge2_philox4 r = ge2_attn_drop_draw(seed, offset, d.stream, hd, i, j, t_count);
#pragma unroll
            for (int e = 0; e < 8; e++)
                b |= (unsigned)ge2_attn_drop_keeps(r, e, d.threshold) << e;
        }
        bits[at] = (unsigned char)b;
    }
}

// The factor of weight (q0 + i, k0 + j) of such a mask: 0 or the scale
__device__ __forceinline__ float ge2_attn_drop_factor(const unsigned char *bits, float scale, int i, int j)
{
    return bits[i * 8 + j / 8] >> (j % 8) & 1 ? scale : 0.0f;
}

// ------------------------------------------------------- the dk, dv kernels

// One query tile of a dk, dv kernel (queries q0 .. q0+63 against its key
// tile k0): q's and dy's rows straight into qs and dys, the queries'
// statistics, and the dropout's kept bits, by a block of THREADS threads.
// Both dk, dv kernels (cuda.cu's and tensor_cores.cu's) take their tiles so.
template <int THREADS>
__device__ __forceinline__ void ge2_attn_grad_kv_query_tile(float *qs, float *dys, float *lse2, float *dl,
                                                            unsigned char *kept, const ge2_attn_dropout &drop,
                                                            uint64_t seed, uint64_t offset, const float *q,
                                                            const float *dy, const float *lse, const float *delta,
                                                            long long rb, int hpp, long long ld, long long qld, int q0,
                                                            int k0, int t_count, int d_count)
{
    ge2_attn_tile_load<false, THREADS>(qs, q, q0, t_count, d_count, qld, 1.0f);
    ge2_attn_tile_load<false, THREADS>(dys, dy, q0, t_count, d_count, ld, 1.0f);
    ge2_attn_query_stats(lse2, dl, lse, delta, rb, hpp, q0, t_count);
    if (drop.threshold)
        ge2_attn_drop_tile<THREADS>(kept, drop, seed, offset, blockIdx.y, q0, k0, t_count);
}

// One (key, query) pair of a dk, dv kernel: from its base-2 score s and
// dp = v_j · dy_i, s becomes the (dropped) weight p·m that dv sums and dp
// the score's gradient p·(dp·m − δ_i) that dk sums; p = 2^(s − lse_i) where
// the query sees the key, else 0; m: the dropout's factor (1 without).
__device__ __forceinline__ void ge2_attn_grad_kv_pair(float &s, float &dp, bool sees, float lse2, float dl,
                                                      bool dropping, float m)
{
    const float p = sees ? exp2f(s - lse2) : 0.0f;
    s = dropping ? p * m : p;
    dp = p * ((dropping ? dp * m : dp) - dl);
}

// tensor_cores.cu: the tiled kernels on tensor cores (mma: GE2_ATTN_TF32 or
// GE2_ATTN_3XTF32), with cuda.cu's arguments (and its dropout) and grid (query or key tiles,
// heads); enqueue on stream. Shared memory past 48 KiB: grant once per mma
// (ge2_attn_tc_grant) before the first launch; smem: the most a kernel asks.
cudaError_t ge2_attn_tc_grant(int mma);
size_t ge2_attn_tc_smem(void);
cudaError_t ge2_attn_tc_forward(int mma, dim3 grid, cudaStream_t stream, int t_count, int d_count, int hpp,
                                long long qld, float scale, bool causal, ge2_attn_dropout drop, const float *q,
                                const float *k, const float *v, float *y, float *lse);
cudaError_t ge2_attn_tc_grad_q(int mma, dim3 grid, cudaStream_t stream, int t_count, int d_count, int hpp,
                               long long qld, float scale, bool causal, ge2_attn_dropout drop, const float *dy,
                               const float *q, const float *k, const float *v, const float *lse,
                               const float *delta, float *dq);
cudaError_t ge2_attn_tc_grad_kv(int mma, dim3 grid, cudaStream_t stream, int t_count, int d_count, int hpp,
                                long long qld, float scale, bool causal, ge2_attn_dropout drop, const float *dy,
                                const float *q, const float *k, const float *v, const float *lse,
                                const float *delta, float *dk, float *dv);

#endif /* GE2_OPS_ATTENTION_CUDA_TILES_H */
