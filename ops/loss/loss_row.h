// One row of a loss or metric, computed by one warp: the row math shared by
// the standalone CROSS_ENTROPY / ACCURACY kernels (loss.cu) and the loss
// epilogue of the whole-step MLP kernel (mlp_step.cu), so both give the
// same values from the same logits. CUDA C++ only.
#ifndef GE2_OPS_LOSS_LOSS_ROW_H
#define GE2_OPS_LOSS_LOSS_ROW_H

#include "kernels/cuda/block_reduce.h"

// Softmax cross-entropy of one row of logits x [cols] against label y,
// smoothed: -(1-eps) log p_y - eps/C sum_c log p_c, with log p_c = x_c - lse.
// Writes dx [cols] = (p - target) * dx_scale when dx is not NULL: 1 / rows
// for the mean loss's gradient, times the control block's loss_scale. A label
// outside [0, cols) is never used as an index: the row gives zero loss and
// zero gradient (the caller counts it, kernels/cuda/bad_index.h). The
// returned loss is the same in every lane.
__device__ __forceinline__ float ge2_cross_entropy_row(const float *x /* [cols] */, int cols, int y, float smoothing,
                                                       float dx_scale, float *dx /* [cols] or NULL */)
{
    const int lane = threadIdx.x % GE2_WARP;
    const float off_target = smoothing / (float)cols;      /* smoothed target of every class */
    const float on_target = 1.0f - smoothing + off_target; /* ... plus the label's share */
    const bool valid = y >= 0 && y < cols;
    float m = -INFINITY, sx = 0.0f;
    for (int c = lane; c < cols; c += GE2_WARP) {
        m = fmaxf(m, x[c]);
        sx += x[c];
    }
    m = ge2_warp_max(m);
    sx = ge2_warp_sum(sx);
    float s = 0.0f;
    for (int c = lane; c < cols; c += GE2_WARP)
        s += expf(x[c] - m);
    s = ge2_warp_sum(s);
    const float lse = m + logf(s);
    if (dx) {
        const float inv_s = 1.0f / s;
        for (int c = lane; c < cols; c += GE2_WARP) {
            float p = expf(x[c] - m) * inv_s;
            float target = c == y ? on_target : off_target;
            dx[c] = valid ? (p - target) * dx_scale : 0.0f;
        }
    }
    return valid ? (1.0f - smoothing) * (lse - x[y]) + off_target * ((float)cols * lse - sx) : 0.0f;
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
