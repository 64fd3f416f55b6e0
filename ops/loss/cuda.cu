// Losses and metrics: CROSS_ENTROPY (softmax, mean loss and dlogits fused in
// one kernel), MSE_LOSS and ACCURACY; LOSS_SCALE, the backward's seed.
//
// Each is one launch that ends in a scalar. No zero-fill kernel or memset
// node precedes it: ge2_grid_sum (block_reduce.h) has every block write its
// partial into the control block's scratch and take a ticket; the last block
// sums the partials in block order, writes the scalar and resets the ticket.
// Rows are dealt to blocks by a fixed rule, so for a given shape the sum's
// order — hence its bits — is the same on every run and every replay.
#include "kernels/cuda/bad_index.h"
#include "kernels/cuda/block_reduce.h"
#include "kernels/cuda/check.h"
#include "ops/loss/loss_row.h"
#include "ops/loss/loss.h"

// Threads per block for the row kernels: 8 warps, one row per warp at a time.
#define GE2_LOSS_WARPS 8
// Threads of the block a vocabulary-wide row (GE2_LOSS_WIDE_COLS, loss.h) takes
#define GE2_LOSS_WIDE_THREADS 512

// ------------------------------------------------------------------- kernels

// Rows go to teams (block_reduce.h) in order, team t taking rows t, t +
// count, ...: a warp per row for narrow rows (GE2_LOSS_WARPS rows of a block
// at a time), the whole block for wide ones (GE2_LOSS_WIDE_COLS and up). The
// rule is fixed for a shape, so the loss's sum order — its bits — is too.
// A label outside [0, classes) is never used as an index: it is counted in the
// control block (the program then fails the step, graph/control.h) and its
// row contributes zero loss and zero gradient. dlogits is the
// gradient of the mean loss, times the control block's loss_scale when the
// loss is this node's output (seeds: ge2_loss_attrs.seeds_backward;
// ge2_loss_scaling).
// X, DX: the logits' and dlogits' storage, float or __nv_bfloat16 (the
// bf16 storage pass's, ge2_op_def_cross_entropy); V: columns a thread reads
// at a time (ge2_cross_entropy_row).
template <typename Team, int V, typename X, typename DX>
__global__ void __launch_bounds__(GE2_LOSS_WIDE_THREADS) ge2_cross_entropy_kernel(int rows, int cols, int classes, float smoothing, const X *logits /* [B, C] */,
                                         const int *labels /* [B] */, float *loss /* [] */,
                                         DX *dlogits /* [B, C] or NULL */, bool seeds, ge2_control *ctl, int node)
{
    const Team team;
    float inv_rows = 1.0f / (float)rows, dx_scale = seeds ? inv_rows * ctl->loss_scale : inv_rows;
    float my_loss = 0.0f;
    for (long long r = team.index(); r < rows; r += team.count()) {
        const int y = labels[r];
        if (team.rank() == 0)
            ge2_index_ok(ctl, node, GE2_BAD_LABEL, r, y, classes);
        my_loss += ge2_cross_entropy_row<V>(team, logits + r * cols, cols, classes, y, smoothing, dx_scale,
                                            dlogits ? dlogits + r * cols : NULL);
    }
    float total;
    if (!ge2_grid_sum(team.rank() == 0 ? my_loss : 0.0f, ctl, &total))
        return;
    if (threadIdx.x == 0 && loss)
        *loss = total * inv_rows;
    ge2_ticket_reset(&ctl->blocks_done);
}

__global__ void ge2_mse_kernel(long long n, const float *pred /* [n] */, const float *target /* [n] */,
                               float *loss /* [] */, ge2_control *ctl)
{
    float acc = 0.0f;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float d = pred[i] - target[i];
        acc += d * d;
    }
    float total;
    if (!ge2_grid_sum(acc, ctl, &total))
        return;
    if (threadIdx.x == 0)
        *loss = total / (float)n;
    ge2_ticket_reset(&ctl->blocks_done);
}

// A row is correct when its first maximum (lowest index among equal maxima,
// as a serial argmax finds it) is the label. Counts are integers, exact in
// f32 up to 2^24 rows. A label outside [0, C) is counted as the loss's is.
__global__ void ge2_accuracy_kernel(int rows, int cols, const float *logits /* [B, C] */,
                                    const int *labels /* [B] */, float *correct /* [] */, ge2_control *ctl, int node)
{
    int lane = threadIdx.x % GE2_WARP, warp = threadIdx.x / GE2_WARP;
    int warps = gridDim.x * GE2_LOSS_WARPS;
    int hits = 0;
    for (int r = blockIdx.x * GE2_LOSS_WARPS + warp; r < rows; r += warps) {
        const int y = labels[r];
        if (lane == 0)
            ge2_index_ok(ctl, node, GE2_BAD_LABEL, r, y, cols);
        hits += ge2_argmax_row(logits + (long long)r * cols, cols) == y;
    }
    float total;
    if (!ge2_grid_sum(lane == 0 ? (float)hits : 0.0f, ctl, &total))
        return;
    if (threadIdx.x == 0)
        *correct = total;
    ge2_ticket_reset(&ctl->blocks_done);
}

// The backward's seed: the control block's loss_scale (one thread)
__global__ void ge2_loss_scale_kernel(const ge2_control *ctl, float *seed) { *seed = ctl->loss_scale; }

// ----------------------------------------------------------------- launchers

// Blocks for `rows` rows at GE2_LOSS_WARPS rows per block (one row per warp).
static unsigned row_blocks(long long rows) { return ge2_grid_sum_blocks(rows, GE2_LOSS_WARPS); }

static ge2_status check_logits_labels(const ge2_launch *l, long long *rows, long long *cols)
{
    GE2_TRY(ge2_cuda_require_f32(l, 1u << 1)); /* logits f32 or (the storage pass's) bf16 */
    ge2_shape x = l->in[0].shape;
    if (x.ndim != 2 || ge2_shape_numel(l->in[1].shape) != x.dim[0])
        return ge2_error(GE2_ERR_SHAPE, "ge2_%s: logits must be [B, C] and labels [B]", ge2_cuda_op_name(l));
    if (x.dim[0] > INT32_MAX || x.dim[1] > INT32_MAX)
        return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_%s: logits too large for the CUDA kernel", ge2_cuda_op_name(l));
    GE2_TRY(ge2_cuda_require_control(l));
    *rows = x.dim[0];
    *cols = x.dim[1];
    return GE2_OK;
}

extern "C" ge2_status ge2_cuda_cross_entropy_launch(const ge2_launch *l)
{
    long long rows = 0, cols = 0;
    GE2_TRY(check_logits_labels(l, &rows, &cols));
    if (rows == 0 || (!l->out[0].data && (l->n_out < 2 || !l->out[1].data)))
        return GE2_OK;
    void *dlogits = l->n_out > 1 ? l->out[1].data : NULL;
    const bool x_bf16 = l->in[0].dtype == GE2_BF16, dx_bf16 = dlogits && l->out[1].dtype == GE2_BF16;
    const ge2_loss_attrs *at = GE2_ATTRS(ge2_loss_attrs, l->node->attrs);
    const long long classes = ge2_loss_classes(l->node, cols);
    const int *labels = (const int *)l->in[1].data;
    float *loss = (float *)l->out[0].data;
    const bool wide = cols >= GE2_LOSS_WIDE_COLS;
    /* a wide row eight columns a thread (two four-column loads) where every
     * row starts aligned for them */
    const bool by8 = cols % 8 == 0 && (x_bf16 ? ge2_store4_aligned((const __nv_bfloat16 *)l->in[0].data)
                                               : ge2_store4_aligned((const float *)l->in[0].data)) &&
                     (!dlogits || (dx_bf16 ? ge2_store4_aligned((const __nv_bfloat16 *)dlogits)
                                           : ge2_store4_aligned((const float *)dlogits)));
    const dim3 grid(wide ? ge2_grid_sum_blocks(rows, 1) : row_blocks(rows)),
        block(wide ? GE2_LOSS_WIDE_THREADS : GE2_LOSS_WARPS * GE2_WARP);
#define GE2_CE_LAUNCH_AS(TEAM, V, X, DX)                                                                          \
    ge2_cross_entropy_kernel<TEAM, V, X, DX><<<grid, block, 0, ge2_cuda_stream(l)>>>(                            \
        (int)rows, (int)cols, (int)classes, at->label_smoothing, (const X *)l->in[0].data, labels, loss,          \
        (DX *)dlogits, at->seeds_backward, l->control, l->node->id)
#define GE2_CE_LAUNCH(X, DX)                                                                                      \
    do {                                                                                                          \
        if (wide && by8)                                                                                          \
            GE2_CE_LAUNCH_AS(ge2_block_team, 8, X, DX);                                                           \
        else if (wide)                                                                                            \
            GE2_CE_LAUNCH_AS(ge2_block_team, 1, X, DX);                                                           \
        else                                                                                                      \
            GE2_CE_LAUNCH_AS(ge2_warp_team, 1, X, DX);                                                            \
    } while (0)
    if (x_bf16 && dx_bf16)
        GE2_CE_LAUNCH(__nv_bfloat16, __nv_bfloat16);
    else if (x_bf16)
        GE2_CE_LAUNCH(__nv_bfloat16, float);
    else if (dx_bf16)
        GE2_CE_LAUNCH(float, __nv_bfloat16);
    else
        GE2_CE_LAUNCH(float, float);
#undef GE2_CE_LAUNCH
#undef GE2_CE_LAUNCH_AS
    return ge2_cuda_check_launch(l, "ge2_cross_entropy_kernel");
}

extern "C" ge2_status ge2_cuda_mse_loss_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    GE2_TRY(ge2_cuda_require_control(l));
    long long n = ge2_shape_numel(l->in[0].shape);
    if (ge2_shape_numel(l->in[1].shape) != n)
        return ge2_error(GE2_ERR_SHAPE, "ge2_%s: pred and target differ in size", ge2_cuda_op_name(l));
    if (!l->out[0].data || n == 0)
        return GE2_OK;
    unsigned blocks = ge2_grid_sum_blocks(n, GE2_CUDA_THREADS);
    ge2_mse_kernel<<<blocks, GE2_CUDA_THREADS, 0, ge2_cuda_stream(l)>>>(
        n, (const float *)l->in[0].data, (const float *)l->in[1].data, (float *)l->out[0].data, l->control);
    return ge2_cuda_check_launch(l, "ge2_mse_kernel");
}

extern "C" ge2_status ge2_cuda_accuracy_launch(const ge2_launch *l)
{
    long long rows = 0, cols = 0;
    GE2_TRY(check_logits_labels(l, &rows, &cols));
    if (!l->out[0].data || rows == 0)
        return GE2_OK;
    ge2_accuracy_kernel<<<row_blocks(rows), GE2_LOSS_WARPS * GE2_WARP, 0, ge2_cuda_stream(l)>>>(
        (int)rows, (int)cols, (const float *)l->in[0].data, (const int *)l->in[1].data, (float *)l->out[0].data,
        l->control, l->node->id);
    return ge2_cuda_check_launch(l, "ge2_accuracy_kernel");
}

extern "C" ge2_status ge2_cuda_loss_scale_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    GE2_TRY(ge2_cuda_require_control(l));
    if (!l->out[0].data)
        return GE2_OK;
    ge2_loss_scale_kernel<<<1, 1, 0, ge2_cuda_stream(l)>>>(l->control, (float *)l->out[0].data);
    return ge2_cuda_check_launch(l, "ge2_loss_scale_kernel");
}
