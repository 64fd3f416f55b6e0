// LAYER_NORM and its backward ops: a warp per row for the forward and the
// input gradient (each row's sums are warp reductions in a fixed tree); the
// parameter gradients are column sums over the rows, split into chunks of
// rows, a block per (32 columns, chunk), whose partials the last block
// (kernels/cuda/block_reduce.h's ticket) adds in chunk order. No float
// atomics: replay equals eager bitwise.
#include "kernels/cuda/bf16_store.h"
#include "kernels/cuda/block_reduce.h"
#include "kernels/cuda/check.h"
#include "ops/norm/norm.h"

#define GE2_LN_THREADS 256
// Rows per block of the parameter gradients: with 32 columns a block, a
// GPT batch (16k rows, 384 columns) gives a few hundred blocks.
#define GE2_LN_CHUNK 512
#define GE2_LN_LANES (GE2_LN_THREADS / 32) // row lanes of a parameter-gradient block

// ------------------------------------------------------------------- kernels

// x [rows, c] -> y = (x - mean)·rstd·w + b, saved [2, rows] (mean, rstd);
// a bf16 y (the storage pass's: only GEMMs read it) is rounded at the store
template <typename Y>
__global__ void ge2_layer_norm_kernel(long long rows, int c, float eps, const float *x, const float *w,
                                      const float *b, Y *y, float *saved)
{
    const long long r = (long long)blockIdx.x * (blockDim.x / GE2_WARP) + threadIdx.x / GE2_WARP;
    const int lane = threadIdx.x % GE2_WARP;
    if (r >= rows)
        return; // the whole warp: r is the warp's
    const float *xr = x + r * c;
    float s = 0.0f;
    for (int i = lane; i < c; i += GE2_WARP)
        s += xr[i];
    const float mean = ge2_warp_sum(s) / (float)c;
    float ss = 0.0f;
    for (int i = lane; i < c; i += GE2_WARP) {
        const float d = xr[i] - mean;
        ss += d * d;
    }
    const float rstd = rsqrtf(ge2_warp_sum(ss) / (float)c + eps);
    for (int i = lane; y && i < c; i += GE2_WARP)
        ge2_store(&y[r * c + i], (xr[i] - mean) * rstd * w[i] + (b ? b[i] : 0.0f));
    if (saved && lane == 0) {
        saved[r] = mean;
        saved[rows + r] = rstd;
    }
}

// dx [rows, c] = rstd · (g - mean(g) - x̂ · mean(g·x̂)), g = dy·w
__global__ void ge2_layer_norm_grad_input_kernel(long long rows, int c, const float *dy, const float *x,
                                                 const float *w, const float *saved, float *dx)
{
    const long long r = (long long)blockIdx.x * (blockDim.x / GE2_WARP) + threadIdx.x / GE2_WARP;
    const int lane = threadIdx.x % GE2_WARP;
    if (r >= rows)
        return;
    const float mean = saved[r], rstd = saved[rows + r];
    const float *xr = x + r * c, *dyr = dy + r * c;
    float sg = 0.0f, sgx = 0.0f;
    for (int i = lane; i < c; i += GE2_WARP) {
        const float g = dyr[i] * w[i];
        sg += g;
        sgx += g * (xr[i] - mean) * rstd;
    }
    sg = ge2_warp_sum(sg) / (float)c;
    sgx = ge2_warp_sum(sgx) / (float)c;
    for (int i = lane; i < c; i += GE2_WARP)
        dx[r * c + i] = rstd * (dyr[i] * w[i] - sg - (xr[i] - mean) * rstd * sgx);
}

// dweight [c] = Σ_rows dy·x̂, dbias [c] = Σ_rows dy. Block b: columns
// [32·tile, +32) of rows [GE2_LN_CHUNK·chunk, +GE2_LN_CHUNK); thread (lane,
// row lane) strides the chunk's rows by GE2_LN_LANES; the row lanes add up
// in order through shared memory; the last block adds the chunks in order.
__global__ void ge2_layer_norm_grad_params_kernel(long long rows, int c, int chunks, const float *dy,
                                                  const float *x, const float *saved, float *dw, float *db,
                                                  float2 *partials /* [chunks, c] */, ge2_control *ctl)
{
    __shared__ float2 lanes[GE2_LN_LANES][GE2_WARP];
    const int tile = blockIdx.x / chunks, chunk = blockIdx.x % chunks;
    const int col = tile * GE2_WARP + threadIdx.x % GE2_WARP, lane = threadIdx.x / GE2_WARP;
    const long long r0 = (long long)chunk * GE2_LN_CHUNK;
    const long long r1 = r0 + GE2_LN_CHUNK < rows ? r0 + GE2_LN_CHUNK : rows;
    float sw = 0.0f, sb = 0.0f;
    for (long long r = r0 + lane; col < c && r < r1; r += GE2_LN_LANES) {
        const float d = dy[r * c + col];
        sw += d * (x[r * c + col] - saved[r]) * saved[rows + r];
        sb += d;
    }
    lanes[lane][threadIdx.x % GE2_WARP] = make_float2(sw, sb);
    __syncthreads();
    if (lane == 0 && col < c) {
        float2 t = lanes[0][threadIdx.x];
        for (int k = 1; k < GE2_LN_LANES; k++) {
            t.x += lanes[k][threadIdx.x].x;
            t.y += lanes[k][threadIdx.x].y;
        }
        partials[(long long)chunk * c + col] = t;
    }
    if (!ge2_ticket_is_last(&ctl->blocks_done))
        return;
    for (int i = threadIdx.x; i < c; i += blockDim.x) {
        float tw = 0.0f, tb = 0.0f;
        for (int k = 0; k < chunks; k++) {
            const float2 p = __ldcg(&partials[(long long)k * c + i]); // L2: another block's write
            tw += p.x;
            tb += p.y;
        }
        if (dw)
            dw[i] = tw;
        if (db)
            db[i] = tb;
    }
    ge2_ticket_reset(&ctl->blocks_done);
}

// ----------------------------------------------------------------- launchers

static ge2_status ln_geom(const ge2_launch *l, ge2_shape x, ge2_ln_geom *g)
{
    *g = ge2_ln_geom_of(x);
    if (g->c < 1 || g->c > INT32_MAX - GE2_LN_THREADS || g->rows < 1)
        return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_%s (node %d): x is %lld rows of %lld; the CUDA kernels take rows of "
                         "1 to 2^31 - 1 values",
                         ge2_cuda_op_name(l), l->node->id, (long long)g->rows, (long long)g->c);
    return GE2_OK;
}

static unsigned warp_rows_blocks(long long rows)
{
    const long long per_block = GE2_LN_THREADS / GE2_WARP;
    return (unsigned)((rows + per_block - 1) / per_block);
}

extern "C" ge2_status ge2_cuda_layer_norm_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    ge2_ln_geom g;
    GE2_TRY(ln_geom(l, l->in[0].shape, &g));
    const float eps = (float)l->node->attrs.layer_norm.eps;
    const float *x = (const float *)l->in[0].data, *w = (const float *)l->in[1].data;
    const float *b = l->n_in > 2 ? (const float *)l->in[2].data : NULL;
    float *saved = l->n_out > 1 ? (float *)l->out[1].data : NULL;
    if (l->out[0].dtype == GE2_BF16)
        ge2_layer_norm_kernel<<<warp_rows_blocks(g.rows), GE2_LN_THREADS, 0, ge2_cuda_stream(l)>>>(
            g.rows, (int)g.c, eps, x, w, b, (__nv_bfloat16 *)l->out[0].data, saved);
    else
        ge2_layer_norm_kernel<<<warp_rows_blocks(g.rows), GE2_LN_THREADS, 0, ge2_cuda_stream(l)>>>(
            g.rows, (int)g.c, eps, x, w, b, (float *)l->out[0].data, saved);
    return ge2_cuda_check_launch(l, "ge2_layer_norm_kernel");
}

extern "C" ge2_status ge2_cuda_layer_norm_grad_params_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    GE2_TRY(ge2_cuda_require_control(l));
    ge2_ln_geom g;
    GE2_TRY(ln_geom(l, l->in[1].shape, &g));
    const long long chunks = (g.rows + GE2_LN_CHUNK - 1) / GE2_LN_CHUNK, tiles = (g.c + GE2_WARP - 1) / GE2_WARP;
    const size_t need = (size_t)(chunks * g.c) * sizeof(float2);
    if (chunks * tiles > INT32_MAX || need > l->workspace_bytes || !l->workspace)
        return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_%s (node %d): %lld rows x %lld columns need %zu bytes of workspace, "
                         "the launch has %zu",
                         ge2_cuda_op_name(l), l->node->id, (long long)g.rows, (long long)g.c, need, l->workspace_bytes);
    ge2_layer_norm_grad_params_kernel<<<(unsigned)(chunks * tiles), GE2_LN_THREADS, 0, ge2_cuda_stream(l)>>>(
        g.rows, (int)g.c, (int)chunks, (const float *)l->in[0].data, (const float *)l->in[1].data,
        (const float *)l->in[2].data, (float *)l->out[0].data, (float *)l->out[1].data, (float2 *)l->workspace,
        l->control);
    return ge2_cuda_check_launch(l, "ge2_layer_norm_grad_params_kernel");
}

extern "C" ge2_status ge2_cuda_layer_norm_grad_input_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    if (!l->out[0].data)
        return GE2_OK;
    ge2_ln_geom g;
    GE2_TRY(ln_geom(l, l->in[1].shape, &g));
    ge2_layer_norm_grad_input_kernel<<<warp_rows_blocks(g.rows), GE2_LN_THREADS, 0, ge2_cuda_stream(l)>>>(
        g.rows, (int)g.c, (const float *)l->in[0].data, (const float *)l->in[1].data, (const float *)l->in[2].data,
        (const float *)l->in[3].data, (float *)l->out[0].data);
    return ge2_cuda_check_launch(l, "ge2_layer_norm_grad_input_kernel");
}
