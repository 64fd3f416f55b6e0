// LAYER_NORM and its backward ops: a warp per row for the forward and the
// input gradient (each row's sums are warp reductions in a fixed tree); the
// parameter gradients are column sums over the rows, split into chunks of
// rows, a block per (32 columns, or 128 four a thread where rows allow it,
// chunk), whose partials the last block (kernels/cuda/block_reduce.h's
// ticket) adds in chunk order. No float atomics: replay equals eager
// bitwise.
#include "kernels/cuda/bf16_store.h"
#include "kernels/cuda/block_reduce.h"
#include "kernels/cuda/check.h"
#include "ops/norm/cuda_layer_norm.h"
#include "ops/norm/norm.h"

#define GE2_LN_THREADS 256
// Rows per block of the parameter gradients: with 32 columns a block, a
// GPT batch (16k rows, 384 columns) gives a few hundred blocks.
#define GE2_LN_CHUNK 512
#define GE2_LN_LANES (GE2_LN_THREADS / 32) // row lanes of a parameter-gradient block
// Rows per block where a thread takes four columns: a GPT batch gives 64
// chunks of 3 tiles, and the last block adds 64 partials a column.
#define GE2_LN_CHUNK4 256

// ------------------------------------------------------------------- kernels

// x [rows, c] -> y = (x - mean)·rstd·w + b, saved [2, rows] (mean, rstd);
// a bf16 y (the storage pass's: only GEMMs read it) is rounded at the store
template <typename Y>
__global__ void ge2_layer_norm_kernel(long long rows, int c, float eps, const float *x, const float *w,
                                      const float *b, Y *y, float *saved)
{
    const long long r = ge2_grid_warp();
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

// The same in the row4 form (ops/norm/cuda_layer_norm.h: c a multiple of
// 4, pointers 16-byte aligned), each value loaded once into registers:
// the row's three passes run from them, 16 bytes a lane at a time
template <int Q, typename Y>
__global__ void ge2_layer_norm_row4_kernel(long long rows, int c, float eps, const float *x, const float *w,
                                           const float *b, Y *y, float *saved)
{
    const long long r = ge2_grid_warp();
    const int lane = threadIdx.x % GE2_WARP;
    if (r >= rows)
        return; // the whole warp: r is the warp's
    float4 v[Q];
#pragma unroll
    for (int k = 0; k < Q; k++) {
        const int col = ge2_ln_row4_col(lane, k);
        v[k] = col < c ? ge2_load4(x + r * c + col) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    ge2_ln_row4_forward(v, c, lane, eps, w, b, y ? y + r * c : y, saved, r, rows);
}

// dx [rows, c] = rstd · (g - mean(g) - x̂ · mean(g·x̂)), g = dy·w; plus (an
// addend, fusion/add_into) added to it after its own rounding, or NULL
__global__ void ge2_layer_norm_grad_input_kernel(long long rows, int c, const float *dy, const float *x,
                                                 const float *w, const float *saved, const float *plus, float *dx)
{
    const long long r = ge2_grid_warp();
    const int lane = threadIdx.x % GE2_WARP;
    if (r >= rows)
        return;
    const float mean = saved[r], rstd = saved[rows + r];
    const float *xr = x + r * c, *dyr = dy + r * c;
    float sg = 0.0f, sgx = 0.0f;
    for (int i = lane; i < c; i += GE2_WARP)
        ge2_ln_grad_sums(dyr[i], xr[i], w[i], mean, rstd, sg, sgx);
    sg = ge2_warp_sum(sg) / (float)c;
    sgx = ge2_warp_sum(sgx) / (float)c;
    for (int i = lane; i < c; i += GE2_WARP) {
        const float v = ge2_ln_grad_dx(dyr[i], xr[i], w[i], mean, rstd, sg, sgx);
        dx[r * c + i] = plus ? plus[r * c + i] + v : v;
    }
}

// The last block's part of the parameter gradients: each column's chunk
// partials (w, b) added in chunk order into dw and db (either may be NULL).
// Unrolled, so eight loads from L2 are in flight before their adds (which
// keep their order): one at a time, the loads' latency was most of the tail.
__device__ __forceinline__ void ge2_ln_params_finish(int c, int chunks, const float2 *partials, float *dw,
                                                     float *db)
{
    for (int i = threadIdx.x; i < c; i += blockDim.x) {
        float tw = 0.0f, tb = 0.0f;
#pragma unroll 8
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
    ge2_ln_params_finish(c, chunks, partials, dw, db);
    ge2_ticket_reset(&ctl->blocks_done);
}

// The same sums with four columns a thread (c a multiple of 4, dy and x
// 16-byte aligned): a warp reads 512 bytes of a row at once, the plain
// kernel 128, which left it at half the memory's speed. Block b: columns
// [128·tile, +128) of rows [GE2_LN_CHUNK4·chunk, +GE2_LN_CHUNK4).
__global__ void ge2_layer_norm_grad_params4_kernel(long long rows, int c, int chunks, const float *dy,
                                                   const float *x, const float *saved, float *dw, float *db,
                                                   float2 *partials /* [chunks, c] */, ge2_control *ctl)
{
    __shared__ float4 lanes_w[GE2_LN_LANES][GE2_WARP], lanes_b[GE2_LN_LANES][GE2_WARP];
    const int tile = blockIdx.x / chunks, chunk = blockIdx.x % chunks, t = threadIdx.x % GE2_WARP;
    const int col = 4 * (tile * GE2_WARP + t), lane = threadIdx.x / GE2_WARP;
    const long long r0 = (long long)chunk * GE2_LN_CHUNK4;
    const long long r1 = r0 + GE2_LN_CHUNK4 < rows ? r0 + GE2_LN_CHUNK4 : rows;
    float4 sw = make_float4(0.0f, 0.0f, 0.0f, 0.0f), sb = sw;
#pragma unroll 4
    for (long long r = r0 + lane; col < c && r < r1; r += GE2_LN_LANES) {
        const float4 d = *reinterpret_cast<const float4 *>(dy + r * c + col);
        const float4 v = *reinterpret_cast<const float4 *>(x + r * c + col);
        const float mean = saved[r], rstd = saved[rows + r];
        sw.x += d.x * (v.x - mean) * rstd;
        sw.y += d.y * (v.y - mean) * rstd;
        sw.z += d.z * (v.z - mean) * rstd;
        sw.w += d.w * (v.w - mean) * rstd;
        sb.x += d.x;
        sb.y += d.y;
        sb.z += d.z;
        sb.w += d.w;
    }
    lanes_w[lane][t] = sw;
    lanes_b[lane][t] = sb;
    __syncthreads();
    if (lane == 0 && col < c) {
        float4 w = lanes_w[0][t], b = lanes_b[0][t];
        for (int k = 1; k < GE2_LN_LANES; k++) {
            const float4 wk = lanes_w[k][t], bk = lanes_b[k][t];
            w = make_float4(w.x + wk.x, w.y + wk.y, w.z + wk.z, w.w + wk.w);
            b = make_float4(b.x + bk.x, b.y + bk.y, b.z + bk.z, b.w + bk.w);
        }
        float2 *out = partials + (long long)chunk * c + col;
        out[0] = make_float2(w.x, b.x);
        out[1] = make_float2(w.y, b.y);
        out[2] = make_float2(w.z, b.z);
        out[3] = make_float2(w.w, b.w);
    }
    if (!ge2_ticket_is_last(&ctl->blocks_done))
        return;
    ge2_ln_params_finish(c, chunks, partials, dw, db);
    ge2_ticket_reset(&ctl->blocks_done);
}

// ----------------------------------------------------------------- launchers

extern "C" ge2_status ge2_cuda_layer_norm_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    ge2_ln_geom g;
    GE2_TRY(ge2_row_norm_geom(l, l->in[0].shape, &g));
    const unsigned blocks = ge2_row_norm_warp_blocks(g.rows, GE2_LN_THREADS);
    const float eps = (float)GE2_ATTRS(ge2_layer_norm_attrs, l->node->attrs)->eps;
    const float *x = (const float *)l->in[0].data, *w = (const float *)l->in[1].data;
    const float *b = l->n_in > 2 ? (const float *)l->in[2].data : NULL;
    float *saved = l->n_out > 1 ? (float *)l->out[1].data : NULL;
    const bool row4 = ge2_ln_row4_takes(g.c) && ge2_cuda_aligned16(x) && ge2_cuda_aligned16(w) && ge2_cuda_aligned16(b) &&
                      ge2_cuda_aligned16(l->out[0].data);
    cudaStream_t stream = ge2_cuda_stream(l);
    if (row4 && l->out[0].dtype == GE2_BF16)
        GE2_LN_ROW4_DISPATCH(g.c, ge2_layer_norm_row4_kernel, blocks, GE2_LN_THREADS, 0, stream, g.rows,
                             (int)g.c, eps, x, w, b, (__nv_bfloat16 *)l->out[0].data, saved);
    else if (row4)
        GE2_LN_ROW4_DISPATCH(g.c, ge2_layer_norm_row4_kernel, blocks, GE2_LN_THREADS, 0, stream, g.rows,
                             (int)g.c, eps, x, w, b, (float *)l->out[0].data, saved);
    else if (l->out[0].dtype == GE2_BF16)
        ge2_layer_norm_kernel<<<blocks, GE2_LN_THREADS, 0, ge2_cuda_stream(l)>>>(
            g.rows, (int)g.c, eps, x, w, b, (__nv_bfloat16 *)l->out[0].data, saved);
    else
        ge2_layer_norm_kernel<<<blocks, GE2_LN_THREADS, 0, ge2_cuda_stream(l)>>>(
            g.rows, (int)g.c, eps, x, w, b, (float *)l->out[0].data, saved);
    return ge2_cuda_check_launch(l, "ge2_layer_norm_kernel");
}

extern "C" ge2_status ge2_cuda_layer_norm_grad_params_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    GE2_TRY(ge2_cuda_require_control(l));
    ge2_ln_geom g;
    GE2_TRY(ge2_row_norm_geom(l, l->in[1].shape, &g));
    const float *dy = (const float *)l->in[0].data, *x = (const float *)l->in[1].data;
    // four columns a thread where every row's start is 16-byte aligned and
    // their (smaller) chunks' partials fit the workspace
    const long long chunks4 = (g.rows + GE2_LN_CHUNK4 - 1) / GE2_LN_CHUNK4;
    const bool quads = g.c % 4 == 0 && (uintptr_t)dy % 16 == 0 && (uintptr_t)x % 16 == 0 &&
                       (size_t)(chunks4 * g.c) * sizeof(float2) <= l->workspace_bytes;
    const long long chunk = quads ? GE2_LN_CHUNK4 : GE2_LN_CHUNK, cols = quads ? 4 * GE2_WARP : GE2_WARP;
    const long long chunks = (g.rows + chunk - 1) / chunk, tiles = (g.c + cols - 1) / cols;
    const size_t need = (size_t)(chunks * g.c) * sizeof(float2);
    if (chunks * tiles > INT32_MAX || need > l->workspace_bytes || !l->workspace)
        return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_%s (node %d): %lld rows x %lld columns need %zu bytes of workspace, "
                         "the launch has %zu",
                         ge2_cuda_op_name(l), l->node->id, (long long)g.rows, (long long)g.c, need, l->workspace_bytes);
    const float *saved = (const float *)l->in[2].data;
    float *dw = (float *)l->out[0].data, *db = (float *)l->out[1].data;
    if (quads) {
        ge2_layer_norm_grad_params4_kernel<<<(unsigned)(chunks * tiles), GE2_LN_THREADS, 0, ge2_cuda_stream(l)>>>(
            g.rows, (int)g.c, (int)chunks, dy, x, saved, dw, db, (float2 *)l->workspace, l->control);
        return ge2_cuda_check_launch(l, "ge2_layer_norm_grad_params4_kernel");
    }
    ge2_layer_norm_grad_params_kernel<<<(unsigned)(chunks * tiles), GE2_LN_THREADS, 0, ge2_cuda_stream(l)>>>(
        g.rows, (int)g.c, (int)chunks, dy, x, saved, dw, db, (float2 *)l->workspace, l->control);
    return ge2_cuda_check_launch(l, "ge2_layer_norm_grad_params_kernel");
}

extern "C" ge2_status ge2_cuda_layer_norm_grad_input_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    if (!l->out[0].data)
        return GE2_OK;
    ge2_ln_geom g;
    GE2_TRY(ge2_row_norm_geom(l, l->in[1].shape, &g));
    ge2_layer_norm_grad_input_kernel<<<ge2_row_norm_warp_blocks(g.rows, GE2_LN_THREADS), GE2_LN_THREADS, 0,
                                       ge2_cuda_stream(l)>>>(
        g.rows, (int)g.c, (const float *)l->in[0].data, (const float *)l->in[1].data, (const float *)l->in[2].data,
        (const float *)l->in[3].data, l->n_in > 4 ? (const float *)l->in[4].data : NULL, (float *)l->out[0].data);
    return ge2_cuda_check_launch(l, "ge2_layer_norm_grad_input_kernel");
}
