// The fused dropout-then-layer-norm (dropout_ln.h): kernel, then launchers.
#include "fusion/dropout_ln/dropout_ln.h"
#include "fusion/fusion.h"
#include "kernels/cuda/check.h"
#include "ops/dropout/cuda_dropout.h"
#include "ops/norm/cuda_layer_norm.h"
#include "ops/norm/norm.h"

#define GE2_DLN_THREADS 256 // 8 rows a block, one a warp

// ------------------------------------------------------------------- kernel

// x, plus (NULL: none) [rows, c] -> h = dropout(x) + plus [rows, c] (f32),
// y = layer_norm(h)·w + b [rows, c] (f32 or bf16; NULL: not wanted),
// saved [2, rows] (mean, rstd; NULL: not wanted). Warp k of a block takes
// row 8·block + k in the row4 form; a lane's four values are one Philox
// draw (element i of the tensor is word i mod 4 of draw i / 4, as DROPOUT's
// kernel draws them). p 0 (eval steps) keeps every value.
template <int Q, typename Y>
__global__ void __launch_bounds__(GE2_DLN_THREADS)
    ge2_dropout_ln_kernel(long long rows, int c, float p, float scale, unsigned stream, const ge2_control *ctl,
                          const float *x, const float *plus, float *h, const float *w, const float *b, float eps, Y *y,
                          float *saved)
{
    const long long r = ge2_grid_warp();
    const int lane = threadIdx.x % GE2_WARP;
    if (r >= rows)
        return; // the whole warp: r is the warp's
    const uint64_t seed = ctl->rng_seed, offset = ctl->rng_offset;
    float4 v[Q];
#pragma unroll
    for (int k = 0; k < Q; k++) {
        const int col = ge2_ln_row4_col(lane, k);
        v[k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (col >= c)
            continue;
        const long long i = r * c + col; // a multiple of 4: c is
        const float4 a = plus ? ge2_load4(plus + i) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        const ge2_philox4 draw = ge2_philox_step_draw(seed, offset, stream, (uint64_t)(i / 4));
        v[k] = ge2_dropout_four(draw, p, scale, ge2_load4(x + i), plus ? &a : NULL);
        ge2_store4(h + i, v[k]);
    }
    ge2_ln_row4_forward(v, c, lane, eps, w, b, y ? y + r * c : y, saved, r, rows);
}

// ----------------------------------------------------------------- launchers

extern "C" bool ge2_dropout_ln_takes(const ge2_launch *launches, int n, char *why, size_t why_size)
{
    const ge2_launch *d = &launches[0], *ln = &launches[n - 1];
    // (the matcher took a DROPOUT or DROPOUT_ADD, row.c: x[, plus] -> y)
    if (n < 2 || d->n_in > 2 || d->n_out != 1 || ln->node->op != GE2_OP_LAYER_NORM)
        return ge2_fusion_no(why, why_size, "not a dropout ... LAYER_NORM group");
    for (int i = 0; i < d->n_in; i++)
        if (d->in[i].dtype != GE2_F32)
            return ge2_fusion_no(why, why_size, "the dropout's input %s is not f32", i ? "addend" : "x");
    if (!d->out[0].data || d->out[0].dtype != GE2_F32)
        return ge2_fusion_no(why, why_size, "the dropout's result is not an f32 tensor this key keeps");
    if (!d->control)
        return ge2_fusion_no(why, why_size, "no control block (the dropout's seed and offset)");
    if (ln->in[0].data != d->out[0].data || ln->in[0].dtype != GE2_F32)
        return ge2_fusion_no(why, why_size, "the layer norm does not read the dropout's f32 result");
    if (ln->n_in < 2 || !ln->in[1].data || ln->in[1].dtype != GE2_F32 || (ln->n_in > 2 && ln->in[2].data &&
                                                                          ln->in[2].dtype != GE2_F32))
        return ge2_fusion_no(why, why_size, "the layer norm has no f32 weight (or a bias that is not f32)");
    if (ln->out[0].data && ln->out[0].dtype != GE2_F32 && ln->out[0].dtype != GE2_BF16)
        return ge2_fusion_no(why, why_size, "the layer norm's result is %s", ge2_dtype_name(ln->out[0].dtype));
    if (ln->n_out > 1 && ln->out[1].data && ln->out[1].dtype != GE2_F32)
        return ge2_fusion_no(why, why_size, "the layer norm's mean and rstd are %s", ge2_dtype_name(ln->out[1].dtype));
    const ge2_ln_geom g = ge2_ln_geom_of(ln->in[0].shape);
    if (!ge2_ln_row4_fits(g.c, GE2_LN_ROW4_MAX_C, why, why_size))
        return false;
    if (g.rows < 1 || g.rows * g.c != ge2_shape_numel(d->in[0].shape))
        return ge2_fusion_no(why, why_size, "%lld rows of %lld values, not the dropout's", (long long)g.rows,
                             (long long)g.c);
    const void *ptrs[] = {d->in[0].data, d->n_in > 1 ? d->in[1].data : NULL, d->out[0].data, ln->in[1].data,
                          ln->n_in > 2 ? ln->in[2].data : NULL, ln->out[0].data};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
        if (!ge2_cuda_aligned16(ptrs[i]))
            return ge2_fusion_no(why, why_size, "a tensor is not 16-byte aligned");
    return true;
}

extern "C" ge2_status ge2_dropout_ln_launch(const ge2_launch *launches, int n)
{
    const ge2_launch *d = &launches[0], *ln = &launches[n - 1];
    const ge2_ln_geom g = ge2_ln_geom_of(ln->in[0].shape);
    const double p = ge2_dropout_step_p(d);
    const unsigned stream_id = GE2_ATTRS(ge2_dropout_attrs, d->node->attrs)->stream;
    const float eps = (float)GE2_ATTRS(ge2_layer_norm_attrs, ln->node->attrs)->eps;
    const float *x = (const float *)d->in[0].data, *plus = d->n_in > 1 ? (const float *)d->in[1].data : NULL;
    const float *w = (const float *)ln->in[1].data, *b = ln->n_in > 2 ? (const float *)ln->in[2].data : NULL;
    float *h = (float *)d->out[0].data, *saved = ln->n_out > 1 ? (float *)ln->out[1].data : NULL;
    const unsigned blocks = (unsigned)((g.rows + GE2_DLN_THREADS / GE2_WARP - 1) / (GE2_DLN_THREADS / GE2_WARP));
    cudaStream_t stream = ge2_cuda_stream(d);
    if (ln->out[0].dtype == GE2_BF16)
        GE2_LN_ROW4_DISPATCH(g.c, ge2_dropout_ln_kernel, blocks, GE2_DLN_THREADS, 0, stream, g.rows, (int)g.c, (float)p,
                             ge2_dropout_scale(p), stream_id, d->control, x, plus, h, w, b, eps,
                             (__nv_bfloat16 *)ln->out[0].data, saved);
    else
        GE2_LN_ROW4_DISPATCH(g.c, ge2_dropout_ln_kernel, blocks, GE2_DLN_THREADS, 0, stream, g.rows, (int)g.c, (float)p,
                             ge2_dropout_scale(p), stream_id, d->control, x, plus, h, w, b, eps,
                             (float *)ln->out[0].data, saved);
    return ge2_cuda_check_launch(ln, "ge2_dropout_ln_kernel");
}
