// RMS_NORM and RMS_NORM_GRAD: a warp per row for the forward and the input
// gradient (each row's sum a warp reduction in a fixed tree); the weight
// gradient is column sums over the rows, split into chunks of rows, a block
// per (32 columns, chunk) writing its partials into the launch's scratch,
// then a second kernel adds each column's partials in chunk order. No float
// atomics: replay equals eager bitwise.
#include "kernels/cuda/block_reduce.h"
#include "kernels/cuda/check.h"
#include "ops/rms_norm/rms_norm.h"
#include "ops/norm/cuda_layer_norm.h"
#include "ops/rms_norm/rms_norm_row.h"

#define GE2_RMS_THREADS 256
#define GE2_RMS_LANES (GE2_RMS_THREADS / GE2_WARP) // row lanes of a weight-gradient block
// Rows per weight-gradient block: a transformer batch (16k rows) gives 32
// chunks, each column's partials few enough for one thread to add.
#define GE2_RMS_CHUNK 512

// ------------------------------------------------------------------- kernels

// x [rows, c] -> y = x·rstd·w, saved [rows] (rstd)
__global__ void ge2_rms_norm_kernel(long long rows, int c, float eps, const float *x /* [rows, c] */,
                                    const float *w /* [c] */, float *y /* [rows, c] or NULL */,
                                    float *saved /* [rows] or NULL */)
{
    const long long r = ge2_grid_warp();
    if (r >= rows)
        return; // the whole warp: r is the warp's
    const float rstd = ge2_rms_norm_row(ge2_row_in_memory{x + r * c}, c, eps, w, y ? y + r * c : NULL);
    if (saved && threadIdx.x % GE2_WARP == 0)
        saved[r] = rstd;
}

// dx [rows, c] = rstd · (g - x̂ · mean(g·x̂)), g = dy·w, x̂ = x·rstd
__global__ void ge2_rms_norm_grad_input_kernel(long long rows, int c, const float *dy /* [rows, c] */,
                                               const float *x /* [rows, c] */, const float *w /* [c] */,
                                               const float *saved /* [rows] */, float *dx /* [rows, c] */)
{
    const long long r = ge2_grid_warp();
    const int lane = threadIdx.x % GE2_WARP;
    if (r >= rows)
        return;
    const float rstd = saved[r];
    const float *xr = x + r * c, *dyr = dy + r * c;
    float sgx = 0.0f;
    for (int i = lane; i < c; i += GE2_WARP)
        sgx += dyr[i] * w[i] * (xr[i] * rstd);
    const float mean_gx = ge2_warp_sum(sgx) / (float)c;
    for (int i = lane; i < c; i += GE2_WARP)
        dx[r * c + i] = rstd * (dyr[i] * w[i] - xr[i] * rstd * mean_gx);
}

// partials [chunks, c]: block (tile, chunk) sums dy·x·rstd over the chunk's
// rows for columns [32·tile, +32); its row lanes stride the rows and add up
// in lane order through shared memory
__global__ void ge2_rms_norm_grad_weight_partials_kernel(long long rows, int c, int chunks,
                                                         const float *dy /* [rows, c] */,
                                                         const float *x /* [rows, c] */,
                                                         const float *saved /* [rows] */,
                                                         float *partials /* [chunks, c] */)
{
    __shared__ float lanes[GE2_RMS_LANES][GE2_WARP];
    const int tile = blockIdx.x / chunks, chunk = blockIdx.x % chunks;
    const int t = threadIdx.x % GE2_WARP, lane = threadIdx.x / GE2_WARP, col = tile * GE2_WARP + t;
    const long long r0 = (long long)chunk * GE2_RMS_CHUNK;
    const long long r1 = r0 + GE2_RMS_CHUNK < rows ? r0 + GE2_RMS_CHUNK : rows;
    float s = 0.0f;
    for (long long r = r0 + lane; col < c && r < r1; r += GE2_RMS_LANES)
        s += dy[r * c + col] * x[r * c + col] * saved[r];
    lanes[lane][t] = s;
    __syncthreads();
    if (lane == 0 && col < c) {
        float total = lanes[0][t];
        for (int k = 1; k < GE2_RMS_LANES; k++)
            total += lanes[k][t];
        partials[(long long)chunk * c + col] = total;
    }
}

// dw [c]: each column's partials added in chunk order
__global__ void ge2_rms_norm_grad_weight_sum_kernel(int c, int chunks, const float *partials /* [chunks, c] */,
                                                    float *dw /* [c] */)
{
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= c)
        return;
    float s = 0.0f;
    for (int k = 0; k < chunks; k++)
        s += partials[(long long)k * c + col];
    dw[col] = s;
}

// ----------------------------------------------------------------- launchers

static long long weight_chunks(long long rows) { return (rows + GE2_RMS_CHUNK - 1) / GE2_RMS_CHUNK; }

extern "C" ge2_status ge2_cuda_rms_norm_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    ge2_ln_geom g;
    GE2_TRY(ge2_row_norm_geom(l, l->in[0].shape, &g));
    float *y = (float *)l->out[0].data, *saved = l->n_out > 1 ? (float *)l->out[1].data : NULL;
    if (!y && !saved)
        return GE2_OK;
    ge2_rms_norm_kernel<<<ge2_row_norm_warp_blocks(g.rows, GE2_RMS_THREADS), GE2_RMS_THREADS, 0,
                          ge2_cuda_stream(l)>>>(
        g.rows, (int)g.c, (float)GE2_ATTRS(ge2_rms_norm_attrs, l->node->attrs)->eps, (const float *)l->in[0].data,
        (const float *)l->in[1].data, y, saved);
    return ge2_cuda_check_launch(l, "ge2_rms_norm_kernel");
}

extern "C" size_t ge2_cuda_rms_norm_grad_scratch_bytes(const ge2_launch *l)
{
    const ge2_ln_geom g = ge2_ln_geom_of(l->in[1].shape);
    return l->n_out > 1 && l->out[1].data ? (size_t)(weight_chunks(g.rows) * g.c) * sizeof(float) : 0;
}

extern "C" ge2_status ge2_cuda_rms_norm_grad_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    ge2_ln_geom g;
    GE2_TRY(ge2_row_norm_geom(l, l->in[1].shape, &g));
    const float *dy = (const float *)l->in[0].data, *x = (const float *)l->in[1].data;
    const float *w = (const float *)l->in[2].data, *saved = (const float *)l->in[3].data;
    cudaStream_t stream = ge2_cuda_stream(l);
    if (l->out[0].data) {
        ge2_rms_norm_grad_input_kernel<<<ge2_row_norm_warp_blocks(g.rows, GE2_RMS_THREADS), GE2_RMS_THREADS, 0,
                                         stream>>>(
            g.rows, (int)g.c, dy, x, w, saved, (float *)l->out[0].data);
        GE2_TRY(ge2_cuda_check_launch(l, "ge2_rms_norm_grad_input_kernel"));
    }
    if (l->n_out < 2 || !l->out[1].data)
        return GE2_OK;
    const long long chunks = weight_chunks(g.rows), tiles = (g.c + GE2_WARP - 1) / GE2_WARP;
    const size_t need = ge2_cuda_rms_norm_grad_scratch_bytes(l);
    if (chunks * tiles > INT32_MAX || !l->scratch || l->scratch_bytes < need)
        return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_%s (node %d): %lld rows x %lld columns need %zu bytes of scratch, "
                         "the launch has %zu",
                         ge2_cuda_op_name(l), l->node->id, (long long)g.rows, (long long)g.c, need,
                         l->scratch ? l->scratch_bytes : 0);
    float *partials = (float *)l->scratch;
    ge2_rms_norm_grad_weight_partials_kernel<<<(unsigned)(chunks * tiles), GE2_RMS_THREADS, 0, stream>>>(
        g.rows, (int)g.c, (int)chunks, dy, x, saved, partials);
    GE2_TRY(ge2_cuda_check_launch(l, "ge2_rms_norm_grad_weight_partials_kernel"));
    ge2_rms_norm_grad_weight_sum_kernel<<<(unsigned)((g.c + GE2_RMS_THREADS - 1) / GE2_RMS_THREADS),
                                          GE2_RMS_THREADS, 0, stream>>>((int)g.c, (int)chunks, partials,
                                                                        (float *)l->out[1].data);
    return ge2_cuda_check_launch(l, "ge2_rms_norm_grad_weight_sum_kernel");
}
