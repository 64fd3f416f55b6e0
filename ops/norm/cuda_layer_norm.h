/* CUDA C++ only: the row arithmetic LAYER_NORM's kernels share with the
 * fusions that run a layer norm inside their own kernels.
 *
 * Backward: LAYER_NORM_GRAD_INPUT's rows, shared by its kernel
 * (cuda_layer_norm.cu) and the fused layer-norm backward
 * (fusion/ln_backward), so both compute dx by the same expressions (the
 * compiler may still contract them into fused multiply-adds differently
 * in each kernel). With g = dy·w and x̂ = (x - mean)·rstd:
 * dx = rstd · (g - mean(g) - x̂ · mean(g·x̂)).
 *
 * Forward: a row held four values a lane (the "row4" form), shared by
 * LAYER_NORM's kernel and the fused dropout-then-layer-norm
 * (fusion/dropout_ln), so both give the same mean, rstd and y. */
#ifndef GE2_OPS_NORM_CUDA_LAYER_NORM_H
#define GE2_OPS_NORM_CUDA_LAYER_NORM_H

#ifndef __CUDACC__
#error "ops/norm/cuda_layer_norm.h is device code for .cu files"
#endif

#include "kernels/cuda/bf16_store.h"
#include "kernels/cuda/block_reduce.h"
#include "kernels/cuda/check.h"
#include "ops/norm/norm.h"

// ------------------------------------------------------- launch geometry
// The row norms' launchers (LAYER_NORM's, RMS_NORM's, the fused residual
// norms'): x [..., C] as rows x c, refused where a lane's int column index
// could overflow as it strides a row, and one row a warp in blocks of
// `threads`.
static inline ge2_status ge2_row_norm_geom(const ge2_launch *l, ge2_shape x, ge2_ln_geom *g)
{
    *g = ge2_ln_geom_of(x);
    if (g->c < 1 || g->c > INT32_MAX - 1024 || g->rows < 1)
        return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_%s (node %d): x is %lld rows of %lld; the CUDA kernels take rows of "
                         "1 to 2^31 - 1025 values",
                         ge2_cuda_op_name(l), l->node->id, (long long)g->rows, (long long)g->c);
    return GE2_OK;
}

static inline unsigned ge2_row_norm_warp_blocks(long long rows, int threads)
{
    const long long per_block = threads / GE2_WARP;
    return (unsigned)((rows + per_block - 1) / per_block);
}

// One value's part of the row sums Σ g and Σ g·x̂
__device__ __forceinline__ void ge2_ln_grad_sums(float d, float x, float w, float mean, float rstd, float &sg,
                                                 float &sgx)
{
    const float g = d * w;
    sg += g;
    sgx += g * (x - mean) * rstd;
}

// One value of dx, given the row's mean(g) and mean(g·x̂)
__device__ __forceinline__ float ge2_ln_grad_dx(float d, float x, float w, float mean, float rstd, float mg, float mgx)
{
    return __fmul_rn(rstd, d * w - mg - (x - mean) * rstd * mgx);
}

// The same for four neighbouring values (a row4 lane's), .x to .w in order
__device__ __forceinline__ void ge2_ln_grad_sums4(float4 d, float4 x, float4 w, float mean, float rstd, float &sg,
                                                  float &sgx)
{
    ge2_ln_grad_sums(d.x, x.x, w.x, mean, rstd, sg, sgx);
    ge2_ln_grad_sums(d.y, x.y, w.y, mean, rstd, sg, sgx);
    ge2_ln_grad_sums(d.z, x.z, w.z, mean, rstd, sg, sgx);
    ge2_ln_grad_sums(d.w, x.w, w.w, mean, rstd, sg, sgx);
}

__device__ __forceinline__ float4 ge2_ln_grad_dx4(float4 d, float4 x, float4 w, float mean, float rstd, float mg,
                                                  float mgx)
{
    return make_float4(ge2_ln_grad_dx(d.x, x.x, w.x, mean, rstd, mg, mgx),
                       ge2_ln_grad_dx(d.y, x.y, w.y, mean, rstd, mg, mgx),
                       ge2_ln_grad_dx(d.z, x.z, w.z, mean, rstd, mg, mgx),
                       ge2_ln_grad_dx(d.w, x.w, w.w, mean, rstd, mg, mgx));
}

// ---------------------------------------------------------------- row4
// A row of c values (c a multiple of 4) in a warp, lane l holding columns
// 4l + 128k .. 4l + 128k + 3 for k < Q (those below c) as v[k]: each lane
// moves 16 bytes at a time. Rows ge2_ln_row4_takes (ops/norm/norm.h), with
// the pointers 16-byte aligned (ge2_cuda_aligned16 of the bases: c % 4 == 0
// keeps every row so).
#define GE2_LN_ROW4_MAX_Q (GE2_LN_ROW4_MAX_C / 128)

// The column of a lane's k-th four, and whether the row has it
__device__ __forceinline__ int ge2_ln_row4_col(int lane, int k) { return 4 * lane + 128 * k; }

// The row's mean and rstd = 1/sqrt(var + eps), var about the mean (two
// passes over the registers); each lane's fours in order, then the warp's
// fixed tree: the same bits on every run
template <int Q>
__device__ __forceinline__ void ge2_ln_row4_stats(const float4 (&v)[Q], int c, int lane, float eps, float &mean,
                                                  float &rstd)
{
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < Q; k++)
        if (ge2_ln_row4_col(lane, k) < c)
            s += (v[k].x + v[k].y) + (v[k].z + v[k].w);
    mean = ge2_warp_sum(s) / (float)c;
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < Q; k++)
        if (ge2_ln_row4_col(lane, k) < c) {
            const float a = v[k].x - mean, b = v[k].y - mean, d = v[k].z - mean, e = v[k].w - mean;
            ss += (a * a + b * b) + (d * d + e * e);
        }
    rstd = rsqrtf(ge2_warp_sum(ss) / (float)c + eps);
}

// yr [c] = (v - mean)·rstd·w + b (b NULL: none); a bf16 yr rounded at the store
template <int Q, typename Y>
__device__ __forceinline__ void ge2_ln_row4_store(const float4 (&v)[Q], int c, int lane, float mean, float rstd,
                                                  const float *w, const float *b, Y *yr)
{
#pragma unroll
    for (int k = 0; k < Q; k++) {
        const int col = ge2_ln_row4_col(lane, k);
        if (col >= c)
            continue;
        const float4 wk = ge2_load4(w + col), bk = b ? ge2_load4(b + col) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        ge2_store4(yr + col, make_float4((v[k].x - mean) * rstd * wk.x + bk.x, (v[k].y - mean) * rstd * wk.y + bk.y,
                                         (v[k].z - mean) * rstd * wk.z + bk.z, (v[k].w - mean) * rstd * wk.w + bk.w));
    }
}

// The rest of row r's forward once its values are held: the statistics,
// then y's row (yr; NULL: not wanted) and saved [2, rows] (mean, rstd;
// NULL: not wanted)
template <int Q, typename Y>
__device__ __forceinline__ void ge2_ln_row4_forward(const float4 (&v)[Q], int c, int lane, float eps, const float *w,
                                                    const float *b, Y *yr, float *saved, long long r, long long rows)
{
    float mean, rstd;
    ge2_ln_row4_stats(v, c, lane, eps, mean, rstd);
    if (yr)
        ge2_ln_row4_store(v, c, lane, mean, rstd, w, b, yr);
    if (saved && lane == 0) {
        saved[r] = mean;
        saved[rows + r] = rstd;
    }
}

// Runs KERNEL<Q>(args) for the least Q of {1, 2, 3, 4, 6, 8} with 128·Q >= c
#define GE2_LN_ROW4_DISPATCH(c, KERNEL, grid, threads, smem, stream, ...)                                              \
    do {                                                                                                         \
        const int q_needed_ = (int)(((c) + 127) / 128);                                                          \
        if (q_needed_ <= 1)                                                                                      \
            KERNEL<1><<<grid, threads, smem, stream>>>(__VA_ARGS__);                                                \
        else if (q_needed_ <= 2)                                                                                 \
            KERNEL<2><<<grid, threads, smem, stream>>>(__VA_ARGS__);                                                \
        else if (q_needed_ <= 3)                                                                                 \
            KERNEL<3><<<grid, threads, smem, stream>>>(__VA_ARGS__);                                                \
        else if (q_needed_ <= 4)                                                                                 \
            KERNEL<4><<<grid, threads, smem, stream>>>(__VA_ARGS__);                                                \
        else if (q_needed_ <= 6)                                                                                 \
            KERNEL<6><<<grid, threads, smem, stream>>>(__VA_ARGS__);                                                \
        else                                                                                                     \
            KERNEL<GE2_LN_ROW4_MAX_Q><<<grid, threads, smem, stream>>>(__VA_ARGS__);                                \
    } while (0)

#endif /* GE2_OPS_NORM_CUDA_LAYER_NORM_H */
