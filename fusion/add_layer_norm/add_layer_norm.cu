// ADD_LAYER_NORM's CUDA kernel: a warp per row in the layer norm's row4
// form (ops/norm/cuda_layer_norm.h) loads a and b, holds s = a + b in
// registers, writes it, and runs the layer norm's row over the registers:
// y and the statistics are LAYER_NORM's kernel's bits for the ADD's s.
#include "fusion/add_layer_norm/add_layer_norm.h"
#include "kernels/cuda/block_reduce.h"
#include "kernels/cuda/check.h"
#include "ops/norm/cuda_layer_norm.h"

#define GE2_ADD_LN_THREADS 256

// s [rows, c] = a + b (NULL: no key keeps it); y = LAYER_NORM(s) (f32 or
// bf16, NULL: not wanted); saved [2, rows] (mean, rstd; NULL: not wanted)
template <int Q, typename Y>
__global__ void ge2_add_layer_norm_kernel(long long rows, int c, float eps, const float *a /* [rows, c] */,
                                          const float *b /* [rows, c] */, const float *w /* [c] */,
                                          const float *bias /* [c] or NULL */, float *s, Y *y, float *saved)
{
    const long long r = ge2_grid_warp();
    const int lane = threadIdx.x % GE2_WARP;
    if (r >= rows)
        return; // the whole warp: r is the warp's
    float4 v[Q];
#pragma unroll
    for (int k = 0; k < Q; k++) {
        const int col = ge2_ln_row4_col(lane, k);
        if (col >= c) {
            v[k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            continue;
        }
        const float4 x = ge2_load4(a + r * c + col), u = ge2_load4(b + r * c + col);
        v[k] = make_float4(x.x + u.x, x.y + u.y, x.z + u.z, x.w + u.w);
        if (s)
            ge2_store4(s + r * c + col, v[k]);
    }
    ge2_ln_row4_forward(v, c, lane, eps, w, bias, y ? y + r * c : y, saved, r, rows);
}

extern "C" ge2_status ge2_cuda_add_layer_norm_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    const ge2_ln_geom g = ge2_ln_geom_of(l->in[0].shape);
    const float *bias = l->n_in > 3 ? (const float *)l->in[3].data : NULL;
    bool aligned = ge2_cuda_aligned16(bias);
    for (int i = 0; i < 3; i++)
        aligned = aligned && ge2_cuda_aligned16(l->in[i].data) && ge2_cuda_aligned16(l->out[i].data);
    if (!ge2_ln_row4_takes(g.c) || g.rows < 1 || !aligned)
        return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_%s (node %d): %lld rows of %lld values; the CUDA kernel takes rows "
                         "of a multiple of 4 up to %d, every tensor 16-byte aligned",
                         ge2_cuda_op_name(l), l->node->id, (long long)g.rows, (long long)g.c, GE2_LN_ROW4_MAX_C);
    const float eps = (float)GE2_ATTRS(ge2_layer_norm_attrs, l->node->attrs)->eps;
    const float *a = (const float *)l->in[0].data, *b = (const float *)l->in[1].data;
    const float *w = (const float *)l->in[2].data;
    float *s = (float *)l->out[0].data, *saved = (float *)l->out[2].data;
    const unsigned blocks = ge2_row_norm_warp_blocks(g.rows, GE2_ADD_LN_THREADS);
    cudaStream_t stream = ge2_cuda_stream(l);
    if (l->out[1].dtype == GE2_BF16)
        GE2_LN_ROW4_DISPATCH(g.c, ge2_add_layer_norm_kernel, blocks, GE2_ADD_LN_THREADS, 0, stream, g.rows, (int)g.c,
                             eps, a, b, w, bias, s, (__nv_bfloat16 *)l->out[1].data, saved);
    else
        GE2_LN_ROW4_DISPATCH(g.c, ge2_add_layer_norm_kernel, blocks, GE2_ADD_LN_THREADS, 0, stream, g.rows, (int)g.c,
                             eps, a, b, w, bias, s, (float *)l->out[1].data, saved);
    return ge2_cuda_check_launch(l, "ge2_add_layer_norm_kernel");
}
