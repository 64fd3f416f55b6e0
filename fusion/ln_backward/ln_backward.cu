// The fused layer-norm backward (ln_backward.h): kernels, then launchers.
#include "fusion/ln_backward/ln_backward.h"
#include "fusion/fusion.h"
#include "kernels/cuda/block_reduce.h"
#include "kernels/cuda/check.h"
#include "ops/dropout/cuda_dropout.h"
#include "ops/norm/cuda_layer_norm.h"
#include "ops/norm/norm.h"

#define GE2_LNB_THREADS 256
#define GE2_LNB_WARPS (GE2_LNB_THREADS / GE2_WARP)
#define GE2_LNB_ROWS GE2_LNB_WARPS // rows a block, one a warp: a GPT batch (16k rows) gives 2048 blocks

// The DROPOUT_BACKWARD after the pair, when the group has one
struct ge2_lnb_dropout {
    float p, scale;
    unsigned stream;
    const ge2_control *ctl;
};

// ------------------------------------------------------------------- kernels

// A row's part of dw and db at four columns: (dy·x̂, dy) each
__device__ __forceinline__ void put_parts(float2 *to, float4 d, float4 x, float mean, float rstd)
{
    to[0] = make_float2(d.x * (x.x - mean) * rstd, d.x);
    to[1] = make_float2(d.y * (x.y - mean) * rstd, d.y);
    to[2] = make_float2(d.z * (x.z - mean) * rstd, d.z);
    to[3] = make_float2(d.w * (x.w - mean) * rstd, d.w);
}

// dy, x [rows, c], w [c], saved [2, rows] (mean, rstd), plus [rows, c] or
// NULL -> dx [rows, c]; part [blocks, c] (Σ dy·x̂, Σ dy over the block's 8
// rows, in row order); dd [rows, c] or NULL: DROPOUT_BACKWARD of dx (its
// mask drawn again, as DROPOUT's kernel draws it: element i is word i mod
// 4 of draw i / 4). Warp k takes the block's row k in the row4 form (ops/
// norm/cuda_layer_norm.h: lane l holds columns 4l + 128j .. + 3), loading
// dy, x and plus 16 bytes at a time. Shared: [8 warps, c] float2.
template <int Q, typename DD>
__global__ void __launch_bounds__(GE2_LNB_THREADS)
    ge2_ln_backward_kernel(long long rows, int c, const float *dy, const float *x, const float *w, const float *saved,
                           const float *plus, float *dx, float2 *part, ge2_lnb_dropout drop, DD *dd)
{
    extern __shared__ float2 warp_part[];
    const int lane = threadIdx.x % GE2_WARP, warp = threadIdx.x / GE2_WARP;
    const long long r = ge2_grid_warp();
    if (r < rows) {
        const float mean = saved[r], rstd = saved[rows + r];
        const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        float4 d[Q], xv[Q], pl[Q];
        float sg = 0.0f, sgx = 0.0f;
#pragma unroll
        for (int k = 0; k < Q; k++) {
            const int col = ge2_ln_row4_col(lane, k);
            const bool in = col < c;
            d[k] = in ? ge2_load4(dy + r * c + col) : zero;
            xv[k] = in ? ge2_load4(x + r * c + col) : zero;
            pl[k] = in && plus ? ge2_load4(plus + r * c + col) : zero;
        }
#pragma unroll
        for (int k = 0; k < Q; k++) {
            const int col = ge2_ln_row4_col(lane, k);
            if (col >= c)
                continue;
            ge2_ln_grad_sums4(d[k], xv[k], ge2_load4(w + col), mean, rstd, sg, sgx);
        }
        sg = ge2_warp_sum(sg) / (float)c;
        sgx = ge2_warp_sum(sgx) / (float)c;
        const uint64_t seed = dd ? drop.ctl->rng_seed : 0, offset = dd ? drop.ctl->rng_offset : 0;
#pragma unroll
        for (int k = 0; k < Q; k++) {
            const int col = ge2_ln_row4_col(lane, k);
            if (col >= c)
                continue;
            float4 v = ge2_ln_grad_dx4(d[k], xv[k], ge2_load4(w + col), mean, rstd, sg, sgx);
            if (plus)
                v = make_float4(pl[k].x + v.x, pl[k].y + v.y, pl[k].z + v.z, pl[k].w + v.w);
            const long long i = r * c + col; // a multiple of 4: c is
            ge2_store4(dx + i, v);
            if (dd) {
                const ge2_philox4 draw = ge2_philox_step_draw(seed, offset, drop.stream, (uint64_t)(i / 4));
                ge2_store4(dd + i, ge2_dropout_four(draw, drop.p, drop.scale, v, NULL));
            }
            put_parts(&warp_part[warp * c + col], d[k], xv[k], mean, rstd);
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
// a fixed tree. Unrolled, so eight loads are in flight before their adds
// (which keep their order): a lane's loads are a column apart, one at a time
// their latency is the kernel's whole time.
__global__ void ge2_ln_backward_params_kernel(int c, int blocks, const float2 *part, float *dw, float *db)
{
    const int col = blockIdx.x * GE2_LNB_WARPS + threadIdx.x / GE2_WARP, lane = threadIdx.x % GE2_WARP;
    if (col >= c)
        return; // the whole warp
    float sw = 0.0f, sb = 0.0f;
#pragma unroll 8
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

// Whether the group's DROPOUT_BACKWARD (launches[2]) can be done by the
// kernel: it masks this dx into an f32 or bf16 tensor
static bool dropout_takes(const ge2_launch *gi, const ge2_launch *db, char *why, size_t why_size)
{
    if (db->in[0].data != gi->out[0].data)
        return ge2_fusion_no(why, why_size, "the dropout's backward does not read this dx");
    if (!db->control)
        return ge2_fusion_no(why, why_size, "no control block (the dropout's seed and offset)");
    if (db->out[0].data && ((db->out[0].dtype != GE2_F32 && db->out[0].dtype != GE2_BF16) ||
                            !ge2_cuda_aligned16(db->out[0].data)))
        return ge2_fusion_no(why, why_size, "the dropout's gradient is %s or not 16-byte aligned",
                             ge2_dtype_name(db->out[0].dtype));
    return true;
}

extern "C" bool ge2_ln_backward_takes(const ge2_launch *launches, int n, char *why, size_t why_size)
{
    const ge2_launch *gp = &launches[0], *gi = &launches[1];
    const ge2_ln_geom g = ge2_ln_geom_of(gi->in[1].shape);
    for (int i = 0; i < gi->n_in; i++)
        if (gi->in[i].data && (gi->in[i].dtype != GE2_F32 || !ge2_cuda_aligned16(gi->in[i].data)))
            return ge2_fusion_no(why, why_size, "input %d of the input gradient is %s or not 16-byte aligned", i,
                                 ge2_dtype_name(gi->in[i].dtype));
    if (!gi->out[0].data || gi->out[0].dtype != GE2_F32 || !ge2_cuda_aligned16(gi->out[0].data))
        return ge2_fusion_no(why, why_size, "no 16-byte aligned f32 input gradient to make");
    for (int k = 0; k < gp->n_out; k++)
        if (gp->out[k].data && gp->out[k].dtype != GE2_F32)
            return ge2_fusion_no(why, why_size, "parameter gradient %d is %s, not f32", k,
                                 ge2_dtype_name(gp->out[k].dtype));
    if (!ge2_ln_row4_fits(g.c, GE2_LN_BACKWARD_MAX_C, why, why_size))
        return false;
    if (g.rows < 1 || lnb_blocks(g.rows) > INT32_MAX)
        return ge2_fusion_no(why, why_size, "%lld rows", (long long)g.rows);
    const size_t need = (size_t)lnb_blocks(g.rows) * (size_t)g.c * sizeof(float2);
    if (!gp->workspace || gp->workspace_bytes < need)
        return ge2_fusion_no(why, why_size, "the partial sums need %zu bytes of workspace, the launch has %zu", need,
                             gp->workspace ? gp->workspace_bytes : (size_t)0);
    return n == 2 || (n == 3 && dropout_takes(gi, &launches[2], why, why_size));
}

// The kernel for dd's type and c's fours a lane
template <typename DD>
static void lnb_enqueue(const ge2_launch *gi, const ge2_ln_geom &g, float2 *part, const ge2_lnb_dropout &drop, DD *dd)
{
    const int blocks = (int)lnb_blocks(g.rows);
    const size_t smem = (size_t)GE2_LNB_WARPS * (size_t)g.c * sizeof(float2); // <= 48 KiB: c <= 768
    GE2_LN_ROW4_DISPATCH(g.c, ge2_ln_backward_kernel, (unsigned)blocks, GE2_LNB_THREADS, smem,
                              ge2_cuda_stream(gi), g.rows, (int)g.c, (const float *)gi->in[0].data,
                              (const float *)gi->in[1].data, (const float *)gi->in[2].data,
                              (const float *)gi->in[3].data, gi->n_in > 4 ? (const float *)gi->in[4].data : NULL,
                              (float *)gi->out[0].data, part, drop, dd);
}

extern "C" ge2_status ge2_ln_backward_launch(const ge2_launch *launches, int n)
{
    const ge2_launch *gp = &launches[0], *gi = &launches[1], *db = n > 2 ? &launches[2] : NULL;
    const ge2_ln_geom g = ge2_ln_geom_of(gi->in[1].shape);
    float2 *part = (float2 *)gp->workspace;
    ge2_lnb_dropout drop = {0.0f, 1.0f, 0u, NULL};
    if (db && db->out[0].data) {
        const double p = ge2_dropout_step_p(db);
        drop = {(float)p, ge2_dropout_scale(p), GE2_ATTRS(ge2_dropout_attrs, db->node->attrs)->stream, db->control};
    }
    if (drop.ctl && db->out[0].dtype == GE2_BF16)
        lnb_enqueue(gi, g, part, drop, (__nv_bfloat16 *)db->out[0].data);
    else
        lnb_enqueue(gi, g, part, drop, drop.ctl ? (float *)db->out[0].data : (float *)NULL);
    GE2_TRY(ge2_cuda_check_launch(gi, "ge2_ln_backward_kernel"));
    if (!gp->out[0].data && !gp->out[1].data)
        return GE2_OK;
    const int c = (int)g.c;
    ge2_ln_backward_params_kernel<<<(unsigned)((c + GE2_LNB_WARPS - 1) / GE2_LNB_WARPS), GE2_LNB_THREADS, 0,
                                    ge2_cuda_stream(gp)>>>(c, (int)lnb_blocks(g.rows), part, (float *)gp->out[0].data,
                                                           (float *)gp->out[1].data);
    return ge2_cuda_check_launch(gp, "ge2_ln_backward_params_kernel");
}
