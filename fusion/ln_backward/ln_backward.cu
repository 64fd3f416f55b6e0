// The fused layer-norm backward (ln_backward.h): kernels, then launchers.
#include "fusion/ln_backward/ln_backward.h"
#include "kernels/cuda/block_reduce.h"
#include "kernels/cuda/check.h"
#include "ops/norm/cuda_layer_norm.h"
#include "ops/norm/norm.h"

#define GE2_LNB_THREADS 256
#define GE2_LNB_WARPS (GE2_LNB_THREADS / GE2_WARP)
#define GE2_LNB_ROWS GE2_LNB_WARPS // rows a block, one a warp: a GPT batch (16k rows) gives 2048 blocks
#define GE2_LNB_MAX_CPL (GE2_LN_BACKWARD_MAX_C / GE2_WARP)

// ------------------------------------------------------------------- kernels

// dy, x [rows, c], w [c], saved [2, rows] (mean, rstd), plus [rows, c] or
// NULL -> dx [rows, c]; part [blocks, c] (Σ dy·x̂, Σ dy over the block's 8
// rows, in row order). Warp k takes the block's row k; lane l holds
// columns l, l + 32, ... (CPL of them), loading dy, x and plus at once.
// Shared: [8 warps, c] float2.
template <int CPL>
__global__ void __launch_bounds__(GE2_LNB_THREADS)
    ge2_ln_backward_kernel(long long rows, int c, const float *dy, const float *x, const float *w, const float *saved,
                           const float *plus, float *dx, float2 *part)
{
    extern __shared__ float2 warp_part[];
    const int lane = threadIdx.x % GE2_WARP, warp = threadIdx.x / GE2_WARP;
    const long long r = (long long)blockIdx.x * GE2_LNB_ROWS + warp;
    if (r < rows) {
        const float mean = saved[r], rstd = saved[rows + r];
        float d[CPL], xv[CPL], pl[CPL], sg = 0.0f, sgx = 0.0f;
#pragma unroll
        for (int k = 0; k < CPL; k++) {
            const int col = lane + GE2_WARP * k;
            d[k] = col < c ? dy[r * c + col] : 0.0f;
            xv[k] = col < c ? x[r * c + col] : 0.0f;
            pl[k] = col < c && plus ? plus[r * c + col] : 0.0f;
        }
#pragma unroll
        for (int k = 0; k < CPL; k++)
            if (lane + GE2_WARP * k < c)
                ge2_ln_grad_sums(d[k], xv[k], w[lane + GE2_WARP * k], mean, rstd, sg, sgx);
        sg = ge2_warp_sum(sg) / (float)c;
        sgx = ge2_warp_sum(sgx) / (float)c;
#pragma unroll
        for (int k = 0; k < CPL; k++) {
            const int col = lane + GE2_WARP * k;
            if (col >= c)
                continue;
            const float v = ge2_ln_grad_dx(d[k], xv[k], w[col], mean, rstd, sg, sgx);
            dx[r * c + col] = plus ? pl[k] + v : v;
            warp_part[warp * c + col] = make_float2(d[k] * (xv[k] - mean) * rstd, d[k]);
        }
    } else {
        for (int col = lane; col < c; col += GE2_WARP) // past the last row: nothing to add
            warp_part[warp * c + col] = make_float2(0.0f, 0.0f);
    }
    __syncthreads();
    for (int col = threadIdx.x; col < c; col += GE2_LNB_THREADS) {
        float2 t = warp_part[col];
        for (int k = 1; k < GE2_LNB_WARPS; k++)
            t = make_float2(t.x + warp_part[k * c + col].x, t.y + warp_part[k * c + col].y);
        part[(long long)blockIdx.x * c + col] = t;
    }
}

// dw, db [c] (either may be NULL) = part's column sums over blocks: a warp
// a column, lane l adding blocks l, l + 32, ... in order, then the lanes in
// a fixed tree
__global__ void ge2_ln_backward_params_kernel(int c, int blocks, const float2 *part, float *dw, float *db)
{
    const int col = blockIdx.x * GE2_LNB_WARPS + threadIdx.x / GE2_WARP, lane = threadIdx.x % GE2_WARP;
    if (col >= c)
        return; // the whole warp
    float sw = 0.0f, sb = 0.0f;
    for (int b = lane; b < blocks; b += GE2_WARP) {
        const float2 p = part[(long long)b * c + col];
        sw += p.x;
        sb += p.y;
    }
    sw = ge2_warp_sum(sw);
    sb = ge2_warp_sum(sb);
    if (lane == 0 && dw)
        dw[col] = sw;
    if (lane == 0 && db)
        db[col] = sb;
}

// ----------------------------------------------------------------- launchers

static long long lnb_blocks(long long rows) { return (rows + GE2_LNB_ROWS - 1) / GE2_LNB_ROWS; }

extern "C" bool ge2_ln_backward_takes(const ge2_launch *pair, char *why, size_t why_size)
{
    const ge2_launch *gp = &pair[0], *gi = &pair[1];
    const ge2_ln_geom g = ge2_ln_geom_of(gi->in[1].shape);
    for (int i = 0; i < gi->n_in; i++)
        if (gi->in[i].data && gi->in[i].dtype != GE2_F32) {
            snprintf(why, why_size, "input %d of the input gradient is %s, not f32", i, ge2_dtype_name(gi->in[i].dtype));
            return false;
        }
    if (!gi->out[0].data || gi->out[0].dtype != GE2_F32) {
        snprintf(why, why_size, "no f32 input gradient to make");
        return false;
    }
    for (int k = 0; k < gp->n_out; k++)
        if (gp->out[k].data && gp->out[k].dtype != GE2_F32) {
            snprintf(why, why_size, "parameter gradient %d is %s, not f32", k, ge2_dtype_name(gp->out[k].dtype));
            return false;
        }
    if (g.c < 1 || g.c > GE2_LN_BACKWARD_MAX_C || g.rows < 1 || lnb_blocks(g.rows) > INT32_MAX) {
        snprintf(why, why_size, "%lld rows of %lld values (the kernel takes rows of 1 to %d)", (long long)g.rows,
                 (long long)g.c, GE2_LN_BACKWARD_MAX_C);
        return false;
    }
    const size_t need = (size_t)lnb_blocks(g.rows) * (size_t)g.c * sizeof(float2);
    if (!gp->workspace || gp->workspace_bytes < need) {
        snprintf(why, why_size, "the partial sums need %zu bytes of workspace, the launch has %zu", need,
                 gp->workspace ? gp->workspace_bytes : (size_t)0);
        return false;
    }
    return true;
}

// Runs KERNEL<CPL> for the least CPL of {4, 8, 12, 16, 24} with 32·CPL >= c
#define GE2_LNB_DISPATCH(cpl_needed, grid, smem, stream, ...)                                                       \
    do {                                                                                                            \
        if ((cpl_needed) <= 4)                                                                                      \
            ge2_ln_backward_kernel<4><<<grid, GE2_LNB_THREADS, smem, stream>>>(__VA_ARGS__);                        \
        else if ((cpl_needed) <= 8)                                                                                 \
            ge2_ln_backward_kernel<8><<<grid, GE2_LNB_THREADS, smem, stream>>>(__VA_ARGS__);                        \
        else if ((cpl_needed) <= 12)                                                                                \
            ge2_ln_backward_kernel<12><<<grid, GE2_LNB_THREADS, smem, stream>>>(__VA_ARGS__);                       \
        else if ((cpl_needed) <= 16)                                                                                \
            ge2_ln_backward_kernel<16><<<grid, GE2_LNB_THREADS, smem, stream>>>(__VA_ARGS__);                       \
        else                                                                                                        \
            ge2_ln_backward_kernel<GE2_LNB_MAX_CPL><<<grid, GE2_LNB_THREADS, smem, stream>>>(__VA_ARGS__);          \
    } while (0)

extern "C" ge2_status ge2_ln_backward_launch(const ge2_launch *pair)
{
    const ge2_launch *gp = &pair[0], *gi = &pair[1];
    const ge2_ln_geom g = ge2_ln_geom_of(gi->in[1].shape);
    const int c = (int)g.c, blocks = (int)lnb_blocks(g.rows), cpl = (c + GE2_WARP - 1) / GE2_WARP;
    cudaStream_t stream = ge2_cuda_stream(gp);
    float2 *part = (float2 *)gp->workspace;
    const size_t smem = (size_t)GE2_LNB_WARPS * (size_t)c * sizeof(float2); // <= 48 KiB: c <= 768
    GE2_LNB_DISPATCH(cpl, (unsigned)blocks, smem, stream, g.rows, c, (const float *)gi->in[0].data,
                     (const float *)gi->in[1].data, (const float *)gi->in[2].data, (const float *)gi->in[3].data,
                     gi->n_in > 4 ? (const float *)gi->in[4].data : NULL, (float *)gi->out[0].data, part);
    GE2_TRY(ge2_cuda_check_launch(gi, "ge2_ln_backward_kernel"));
    if (!gp->out[0].data && !gp->out[1].data)
        return GE2_OK;
    ge2_ln_backward_params_kernel<<<(unsigned)((c + GE2_LNB_WARPS - 1) / GE2_LNB_WARPS), GE2_LNB_THREADS, 0, stream>>>(
        c, blocks, part, (float *)gp->out[0].data, (float *)gp->out[1].data);
    return ge2_cuda_check_launch(gp, "ge2_ln_backward_params_kernel");
}
