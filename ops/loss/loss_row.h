// One row of a loss or metric, computed by one warp: the row math shared by
// the standalone CROSS_ENTROPY / ACCURACY kernels (loss.cu) and the loss
// epilogue of the whole-step MLP kernel (mlp_step.cu), so both give the
// same values from the same logits. CUDA C++ only.
#ifndef GE2_OPS_LOSS_LOSS_ROW_H
#define GE2_OPS_LOSS_LOSS_ROW_H

#include "kernels/cuda/bf16_store.h"
#include "kernels/cuda/block_reduce.h"

// Softmax cross-entropy of one row of logits x [cols] against label y, over
// its first `classes` columns (the rest are padding: zero gradient), smoothed:
// -(1-eps) log p_y - eps/K sum_c log p_c over the K = classes columns, with
// log p_c = x_c - lse. Writes dx [cols] = (p - target) * dx_scale when dx is
// not NULL: 1 / rows for the mean loss's gradient, times the control block's
// loss_scale. A label outside [0, classes) is never used as an index: the row
// gives zero loss and zero gradient (the caller counts it,
// kernels/cuda/bad_index.h). The returned loss is the same in every lane.
//
// Two passes over the row: the maximum and the sum of exponentials together
// (each lane rescales its sum when its maximum grows, the lanes' pairs are
// then merged), then the gradient. A row is wider than the cache holds for
// every row in flight, so each pass reads it from memory. X and DX: float or
// __nv_bfloat16 (the math is f32 either way).
template <typename X, typename DX>
__device__ __forceinline__ float ge2_cross_entropy_row(const X *x /* [cols] */, int cols, int classes, int y,
                                                       float smoothing, float dx_scale, DX *dx /* [cols] or NULL */)
{
    const int lane = threadIdx.x % GE2_WARP;
    const float off_target = smoothing / (float)classes;   /* smoothed target of every class */
    const float on_target = 1.0f - smoothing + off_target; /* ... plus the label's share */
    const bool valid = y >= 0 && y < classes;
    float m = -INFINITY, s = 0.0f, sx = 0.0f;
    for (int c = lane; c < classes; c += GE2_WARP) {
        const float v = ge2_load(x + c);
        if (v > m) {
            s = s * expf(m - v) + 1.0f;
            m = v;
        } else if (m > -INFINITY) { /* a masked -inf before any finite value adds nothing (not exp(-inf + inf)) */
            s += expf(v - m);
        }
        sx += v;
    }
    const float row_max = ge2_warp_max(m);
    s = m == -INFINITY ? 0.0f : s * expf(m - row_max);
    s = ge2_warp_sum(s);
    sx = ge2_warp_sum(sx);
    const float lse = row_max + logf(s);
    if (dx) {
        const float inv_s = 1.0f / s;
        for (int c = lane; c < cols; c += GE2_WARP) {
            float p = expf(ge2_load(x + c) - row_max) * inv_s;
            float target = c == y ? on_target : off_target;
            ge2_store(dx + c, valid && c < classes ? (p - target) * dx_scale : 0.0f);
        }
    }
    return valid ? (1.0f - smoothing) * (lse - ge2_load(x + y)) + off_target * ((float)classes * lse - sx) : 0.0f;
}

// The row's first maximum (lowest index among equal maxima, as a serial
// argmax finds it); cols for a row of NaNs, which matches no label. Same in
// every lane.
__device__ __forceinline__ int ge2_argmax_row(const float *x /* [cols] */, int cols)
{
    const int lane = threadIdx.x % GE2_WARP;
    if (cols <= GE2_WARP) {
        /* a column per lane: the warp's maximum, then the first lane holding
         * it (lanes past cols hold -inf, so a row of -inf finds column 0 and
         * a row of NaNs, whose maximum is -inf or NaN, finds cols) */
        const float v = lane < cols ? x[lane] : -INFINITY, best = ge2_warp_max(v);
        const unsigned holds = __ballot_sync(0xffffffffu, v == best);
        return holds ? min(__ffs(holds) - 1, cols) : cols;
    }
    float best = -INFINITY;
    int arg = cols;
    for (int c = lane; c < cols; c += GE2_WARP)
        if (x[c] > best || (arg == cols && x[c] == best)) {
            best = x[c];
            arg = c;
        }
    for (int off = GE2_WARP / 2; off > 0; off /= 2) {
        float ob = __shfl_xor_sync(0xffffffffu, best, off);
        int oa = __shfl_xor_sync(0xffffffffu, arg, off);
        if (ob > best || (ob == best && oa < arg)) {
            best = ob;
            arg = oa;
        }
    }
    return arg;
}

#endif /* GE2_OPS_LOSS_LOSS_ROW_H */
