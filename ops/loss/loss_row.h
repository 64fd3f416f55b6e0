// One row of a loss or metric, computed by a warp or a block: the row math
// shared by the standalone CROSS_ENTROPY / ACCURACY kernels (cuda.cu) and the
// loss epilogues of the fused kernels (mlp_step.cu, head.cu), so all give the
// same values from the same logits. CUDA C++ only.
#ifndef GE2_OPS_LOSS_LOSS_ROW_H
#define GE2_OPS_LOSS_LOSS_ROW_H

#include "kernels/cuda/bf16_store.h"
#include "kernels/cuda/block_reduce.h"

// V consecutive elements x[0..V) as f32, and their stores: V = 1, or a
// multiple of 4 with x aligned for ge2_load4 / ge2_store4 (bf16_store.h).
template <int V, typename X> __device__ __forceinline__ void ge2_row_load(const X *x, float v[V])
{
    if constexpr (V % 4 == 0) {
#pragma unroll
        for (int i = 0; i < V; i += 4) {
            const float4 q = ge2_load4(x + i);
            v[i] = q.x, v[i + 1] = q.y, v[i + 2] = q.z, v[i + 3] = q.w;
        }
    } else {
        static_assert(V == 1, "ge2_row_load: V is 1 or a multiple of 4");
        v[0] = ge2_load(x);
    }
}

template <int V, typename Y> __device__ __forceinline__ void ge2_row_store(Y *y, const float v[V])
{
    if constexpr (V % 4 == 0) {
#pragma unroll
        for (int i = 0; i < V; i += 4)
            ge2_store4(y + i, make_float4(v[i], v[i + 1], v[i + 2], v[i + 3]));
    } else {
        static_assert(V == 1, "ge2_row_store: V is 1 or a multiple of 4");
        ge2_store(y, v[0]);
    }
}

// Softmax cross-entropy of one row of logits x [cols] against label y, over
// its first `classes` columns (the rest are padding: zero gradient), smoothed:
// -(1-eps) log p_y - eps/K sum_c log p_c over the K = classes columns, with
// log p_c = x_c - lse. Writes dx [cols] = (p - target) * dx_scale when dx is
// not NULL: 1 / rows for the mean loss's gradient, times the control block's
// loss_scale; dx may be x itself (each element is read before it is written
// over, by the thread that writes it). A label outside [0, classes) is never used as an index: the row
// gives zero loss and zero gradient (the caller counts it,
// kernels/cuda/bad_index.h). The returned loss is the same in every thread
// of the team (block_reduce.h), which every thread of it calls this with.
//
// Each thread reads V consecutive columns at a time (V > 1 needs cols a
// multiple of V and x, dx aligned for ge2_load4 / ge2_store4). Two passes
// over the row: the maximum and the sum of exponentials together (a thread
// rescales its sum when its maximum grows; the team then merges the pairs),
// then the gradient. A wide row read by a whole block is still in L2 for the
// second pass; a warp's narrow rows are small. X and DX: float or
// __nv_bfloat16 (the math is f32 either way).
template <int V, typename Team, typename X, typename DX>
__device__ __forceinline__ float ge2_cross_entropy_row(Team team, const X *x /* [cols] */, int cols, int classes,
                                                       int y, float smoothing, float dx_scale,
                                                       DX *dx /* [cols] or NULL */)
{
    const float off_target = smoothing / (float)classes;   /* smoothed target of every class */
    const float on_target = 1.0f - smoothing + off_target; /* ... plus the label's share */
    const bool valid = y >= 0 && y < classes;
    const int first = team.rank() * V, stride = team.size() * V;
    float m = -INFINITY, s = 0.0f, sx = 0.0f;
    for (int c = first; c < classes; c += stride) {
        float v[V], chunk_max = -INFINITY;
        ge2_row_load<V>(x + c, v);
#pragma unroll
        for (int i = 0; i < V; i++)
            if (c + i < classes) /* columns past the classes are padding */
                chunk_max = fmaxf(chunk_max, v[i]);
        if (chunk_max > m) {
            s *= expf(m - chunk_max);
            m = chunk_max;
        }
#pragma unroll
        for (int i = 0; i < V; i++)
            if (c + i < classes) {
                if (m > -INFINITY) /* a masked -inf before any finite value adds nothing (not exp(-inf + inf)) */
                    s += expf(v[i] - m);
                sx += v[i];
            }
    }
    const float row_max = team.max(m);
    s = m == -INFINITY ? 0.0f : s * expf(m - row_max);
    s = team.sum(s);
    sx = team.sum(sx);
    const float lse = row_max + logf(s);
    /* the label's logit before any gradient is written: dx may be x itself
     * (ge2_op_def.over_output), each thread writing over what it read */
    const float x_y = valid ? ge2_load(x + y) : 0.0f;
    if (dx) {
        team.sync();
        const float inv_s = 1.0f / s;
        for (int c = first; c < cols; c += stride) {
            float v[V];
            ge2_row_load<V>(x + c, v);
#pragma unroll
            for (int i = 0; i < V; i++) {
                const float p = expf(v[i] - row_max) * inv_s, target = c + i == y ? on_target : off_target;
                v[i] = valid && c + i < classes ? (p - target) * dx_scale : 0.0f;
            }
            ge2_row_store<V>(dx + c, v);
        }
    }
    return valid ? (1.0f - smoothing) * (lse - x_y) + off_target * ((float)classes * lse - sx) : 0.0f;
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
