// SOFTMAX and LOG_SOFTMAX over the last axis, and their backwards.
//
// One warp per row: rows are short in the models ge2 targets (class logits,
// attention rows), so a warp covers a row in a few strided steps and the
// row's max and sums stay in registers through shuffles — no shared memory,
// no second pass over global memory for the statistics beyond one re-read.
#include "kernels/cuda/block_reduce.h"
#include "kernels/cuda/check.h"
#include "ops/softmax/softmax.h"

// Rows per block: 4 warps.
#define GE2_SOFTMAX_WARPS 4

// ------------------------------------------------------------------- kernels

template <bool LOG>
__global__ void ge2_softmax_kernel(long long rows, long long cols, const float *x /* [rows, cols] */,
                                   float *y /* [rows, cols] */)
{
    int lane = threadIdx.x % GE2_WARP;
    long long row = (long long)blockIdx.x * GE2_SOFTMAX_WARPS + threadIdx.x / GE2_WARP;
    if (row >= rows)
        return;
    const float *xr = x + row * cols;
    float *yr = y + row * cols;
    float m = -INFINITY;
    for (long long c = lane; c < cols; c += GE2_WARP)
        m = fmaxf(m, xr[c]);
    m = ge2_warp_max(m);
    float s = 0.0f;
    for (long long c = lane; c < cols; c += GE2_WARP)
        s += expf(xr[c] - m);
    s = ge2_warp_sum(s);
    if (LOG) {
        float shift = m + logf(s);
        for (long long c = lane; c < cols; c += GE2_WARP)
            yr[c] = xr[c] - shift;
    } else {
        float inv = 1.0f / s;
        for (long long c = lane; c < cols; c += GE2_WARP)
            yr[c] = expf(xr[c] - m) * inv;
    }
}

// softmax:     dx = y * (dy - sum(dy * y))
// log_softmax: dx = dy - exp(y) * sum(dy)
template <bool LOG>
__global__ void ge2_softmax_backward_kernel(long long rows, long long cols, const float *dy /* [rows, cols] */,
                                            const float *y /* [rows, cols] */, float *dx /* [rows, cols] */)
{
    int lane = threadIdx.x % GE2_WARP;
    long long row = (long long)blockIdx.x * GE2_SOFTMAX_WARPS + threadIdx.x / GE2_WARP;
    if (row >= rows)
        return;
    const float *dyr = dy + row * cols, *yr = y + row * cols;
    float *dxr = dx + row * cols;
    float s = 0.0f;
    for (long long c = lane; c < cols; c += GE2_WARP)
        s += LOG ? dyr[c] : dyr[c] * yr[c];
    s = ge2_warp_sum(s);
    for (long long c = lane; c < cols; c += GE2_WARP)
        dxr[c] = LOG ? dyr[c] - expf(yr[c]) * s : yr[c] * (dyr[c] - s);
}

// ----------------------------------------------------------------- launchers

static void rows_cols(ge2_shape s, long long *rows, long long *cols)
{
    *cols = s.ndim > 0 ? s.dim[s.ndim - 1] : 1;
    *rows = *cols > 0 ? ge2_shape_numel(s) / *cols : 0;
}

static unsigned row_blocks(long long rows)
{
    return (unsigned)((rows + GE2_SOFTMAX_WARPS - 1) / GE2_SOFTMAX_WARPS);
}

extern "C" ge2_status ge2_cuda_softmax_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    long long rows, cols;
    rows_cols(l->in[0].shape, &rows, &cols);
    if (!l->out[0].data || rows == 0)
        return GE2_OK;
    const float *x = (const float *)l->in[0].data;
    float *y = (float *)l->out[0].data;
    dim3 block(GE2_SOFTMAX_WARPS * GE2_WARP);
    if (l->node->op == GE2_OP_LOG_SOFTMAX) {
        ge2_softmax_kernel<true><<<row_blocks(rows), block, 0, ge2_cuda_stream(l)>>>(rows, cols, x, y);
        return ge2_cuda_check_launch(l, "ge2_softmax_kernel<log>");
    }
    ge2_softmax_kernel<false><<<row_blocks(rows), block, 0, ge2_cuda_stream(l)>>>(rows, cols, x, y);
    return ge2_cuda_check_launch(l, "ge2_softmax_kernel");
}

extern "C" ge2_status ge2_cuda_softmax_backward_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    long long rows, cols;
    rows_cols(l->in[0].shape, &rows, &cols);
    if (!l->out[0].data || rows == 0)
        return GE2_OK;
    const float *dy = (const float *)l->in[0].data, *y = (const float *)l->in[1].data;
    float *dx = (float *)l->out[0].data;
    dim3 block(GE2_SOFTMAX_WARPS * GE2_WARP);
    if (l->node->op == GE2_OP_LOG_SOFTMAX_BACKWARD) {
        ge2_softmax_backward_kernel<true><<<row_blocks(rows), block, 0, ge2_cuda_stream(l)>>>(rows, cols, dy, y, dx);
        return ge2_cuda_check_launch(l, "ge2_softmax_backward_kernel<log>");
    }
    ge2_softmax_backward_kernel<false><<<row_blocks(rows), block, 0, ge2_cuda_stream(l)>>>(rows, cols, dy, y, dx);
    return ge2_cuda_check_launch(l, "ge2_softmax_backward_kernel");
}
