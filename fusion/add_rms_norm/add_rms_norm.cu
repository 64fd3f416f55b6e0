// ADD_RMS_NORM's CUDA kernel: a warp per row writes s = a + b, then runs the
// RMS norm's row (ops/rms_norm/rms_norm_row.h) over the values it just
// wrote, so y and rstd are the RMS_NORM kernel's bits for the ADD's s.
#include "fusion/add_rms_norm/add_rms_norm.h"
#include "kernels/cuda/block_reduce.h"
#include "kernels/cuda/check.h"
#include "ops/norm/cuda_layer_norm.h"
#include "ops/rms_norm/rms_norm_row.h"

#define GE2_ADD_RMS_THREADS 256

// The row given as the sum of two rows (where no key reads s, the row is
// never stored): a [c] + b [c], rounded to f32 as ADD's kernel rounds it
struct row_sum {
    const float *a, *b;
    __device__ float operator()(int i) const { return a[i] + b[i]; }
};

// s [rows, c] = a + b; y = s·rstd·w; saved [rows] = rstd (s, y, saved may be NULL)
__global__ void ge2_add_rms_norm_kernel(long long rows, int c, float eps, const float *a /* [rows, c] */,
                                        const float *b /* [rows, c] */, const float *w /* [c] */,
                                        float *s /* [rows, c] or NULL */, float *y /* [rows, c] or NULL */,
                                        float *saved /* [rows] or NULL */)
{
    const long long r = ge2_grid_warp();
    if (r >= rows)
        return; // the whole warp: r is the warp's
    const int lane = threadIdx.x % GE2_WARP;
    float *yr = y ? y + r * c : NULL, rstd;
    if (s) {
        float *sr = s + r * c;
        for (int i = lane; i < c; i += GE2_WARP)
            sr[i] = a[r * c + i] + b[r * c + i];
        rstd = ge2_rms_norm_row(ge2_row_in_memory{sr}, c, eps, w, yr);
    } else {
        rstd = ge2_rms_norm_row(row_sum{a + r * c, b + r * c}, c, eps, w, yr);
    }
    if (saved && lane == 0)
        saved[r] = rstd;
}

extern "C" ge2_status ge2_cuda_add_rms_norm_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    ge2_ln_geom g;
    GE2_TRY(ge2_row_norm_geom(l, l->in[0].shape, &g));
    ge2_add_rms_norm_kernel<<<ge2_row_norm_warp_blocks(g.rows, GE2_ADD_RMS_THREADS), GE2_ADD_RMS_THREADS, 0,
                              ge2_cuda_stream(l)>>>(
        g.rows, (int)g.c, (float)GE2_ATTRS(ge2_rms_norm_attrs, l->node->attrs)->eps, (const float *)l->in[0].data,
        (const float *)l->in[1].data, (const float *)l->in[2].data, (float *)l->out[0].data,
        (float *)l->out[1].data, (float *)l->out[2].data);
    return ge2_cuda_check_launch(l, "ge2_add_rms_norm_kernel");
}
