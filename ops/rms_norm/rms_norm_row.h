// One row of RMS_NORM computed by one warp: the row math the op's kernel
// (cuda.cu) and the fused residual-add + RMS norm's (fusion/add_rms_norm)
// share, so both give the same bits from the same row. CUDA C++ only.
#ifndef GE2_OPS_RMS_NORM_RMS_NORM_ROW_H
#define GE2_OPS_RMS_NORM_RMS_NORM_ROW_H

#include "kernels/cuda/block_reduce.h"

// y = x·rstd·w over the row's c values, rstd = 1/sqrt(mean(x²) + eps),
// returned (the same in every lane); y NULL: only rstd. x(i) gives the
// row's value i as a float (a load, or a sum of two: the fused residual
// add's); lane l takes columns l, l + 32, ..., so a row a lane wrote just
// before is read back by the lane that wrote it.
template <typename Row>
__device__ __forceinline__ float ge2_rms_norm_row(Row x, int c, float eps, const float *w /* [c] */,
                                                  float *y /* [c] or NULL */)
{
    const int lane = threadIdx.x % GE2_WARP;
    float ss = 0.0f;
    for (int i = lane; i < c; i += GE2_WARP) {
        const float v = x(i);
        ss += v * v;
    }
    const float rstd = rsqrtf(ge2_warp_sum(ss) / (float)c + eps);
    for (int i = lane; y && i < c; i += GE2_WARP)
        y[i] = x(i) * rstd * w[i];
    return rstd;
}

// The row given as memory: x [c]
struct ge2_row_in_memory {
    const float *x;
    __device__ float operator()(int i) const { return x[i]; }
};

#endif // GE2_OPS_RMS_NORM_RMS_NORM_ROW_H
