// The classifier head's two kernels (head.h): LOSS, a small LINEAR with
// its cross-entropy, and GRADIENTS, that layer's input and weight
// gradients. Kernels, then the matcher, then the launchers.
#include "fusion/head/head.h"

#include <stdio.h>

#include "kernels/cuda/bad_index.h"
#include "kernels/cuda/block_reduce.h"
#include "kernels/cuda/check.h"
#include "ops/loss/loss.h"
#include "ops/loss/loss_row.h"
#include "kernels/cuda/pdl.h"
extern "C" {
#include "ops/linear/stash.h"
}
#include "ops/ops.h"

// Warps per block of both kernels.
#define HEAD_WARPS 8
// LOSS: batch rows a block takes at a time (each W float4 it loads serves
// them all); at most HEAD_WARPS, a warp per row for the loss.
// GRADIENTS: columns of the layer's input per block (a warp is
// HEAD_COLUMNS columns by GE2_WARP / HEAD_COLUMNS rows), and the rows each
// thread has in flight.
// Tuned on the medium MLP: more, smaller blocks win until a block has too
// little to do (bench/RESULTS.md has the sweep).
#define HEAD_LOSS_ROWS 1
#define HEAD_COLUMNS 4
#define HEAD_GRADIENT_ROWS 8

// ------------------------------------------------------------------ kernels

// LOSS. Rows [r0, r0 + HEAD_LOSS_ROWS) of logits [B, C] = x [B, K] · w [C,
// K]ᵀ + b [C], then each row's cross-entropy (loss_row.h, the CROSS_ENTROPY
// kernel's math) and dlogits. The block's threads stride over the row's
// float4s of k (k4 = K / 4), so a row costs one or a few memory round trips
// whatever K is (a warp per row walked K serially, many round trips);
// each thread's sums are reduced over its warp, then
// over the warps in order in shared memory, and warp i finishes row r0 + i.
// CMAX >= C: the classes' sums are registers, so their count is a constant.
template <int CMAX>
__global__ void __launch_bounds__(HEAD_WARPS *GE2_WARP)
    ge2_head_loss_kernel(int rows, int cols, long long k4, const float4 *__restrict__ x /* [B, k4] */,
                         const float4 *__restrict__ w /* [C, k4] */, const float *__restrict__ bias /* [C] or NULL */,
                         const int *__restrict__ labels /* [B] */, float smoothing,
                         float *__restrict__ logits /* [B, C] */, float *__restrict__ loss /* [] or NULL */,
                         float *__restrict__ dlogits /* [B, C] or NULL */, bool seeds, ge2_control *ctl,
                         int ce_node)
{
    constexpr int R = HEAD_LOSS_ROWS;
    static_assert(R <= HEAD_WARPS, "a warp per row finishes the rows");
    __shared__ float part[HEAD_WARPS][R][CMAX]; // [warp][row][class]
    __shared__ float row_logits[R][CMAX];
    const int lane = threadIdx.x % GE2_WARP, warp = threadIdx.x / GE2_WARP;
    // dlogits carries the loss scale where the loss is the cross-entropy itself (ge2_loss_scaling)
    const float inv_rows = 1.0f / (float)rows, dx_scale = seeds ? inv_rows * ctl->loss_scale : inv_rows;
    float my_loss = 0.0f;
    // The gradients kernel after this one may start launching now: it waits
    // for this grid's end before it reads dlogits.
    ge2_pdl_launch_dependents();
    for (int r0 = blockIdx.x * R; r0 < rows; r0 += gridDim.x * R) {
        // what finishing the row reads, loaded now so it arrives with the dot products
        const int r = r0 + warp;
        const bool finishes = warp < R && r < rows;
        const int label = finishes ? labels[r] : -1;
        const float bias_c = finishes && bias && lane < cols ? bias[lane] : 0.0f;
        float acc[R][CMAX] = {};
        for (long long k = threadIdx.x; k < k4; k += blockDim.x) {
            float4 a[R];
#pragma unroll
            for (int i = 0; i < R; i++)
                a[i] = r0 + i < rows ? x[(long long)(r0 + i) * k4 + k] : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
            for (int c = 0; c < CMAX; c++) {
                if (c < cols) {
                    const float4 b = w[(long long)c * k4 + k];
#pragma unroll
                    for (int i = 0; i < R; i++)
                        acc[i][c] += a[i].x * b.x + a[i].y * b.y + a[i].z * b.z + a[i].w * b.w;
                }
            }
        }
#pragma unroll
        for (int i = 0; i < R; i++)
#pragma unroll
            for (int c = 0; c < CMAX; c++)
                if (c < cols) {
                    const float s = ge2_warp_sum(acc[i][c]);
                    if (lane == 0)
                        part[warp][i][c] = s;
                }
        __syncthreads();
        if (finishes) {
            if (lane < cols) {
                float v = bias_c;
                for (int p = 0; p < HEAD_WARPS; p++)
                    v += part[p][warp][lane];
                row_logits[warp][lane] = v;
                logits[(long long)r * cols + lane] = v;
            }
            __syncwarp();
            if (lane == 0)
                ge2_index_ok(ctl, ce_node, GE2_BAD_LABEL, r, label, cols);
            my_loss += ge2_cross_entropy_row<1>(ge2_warp_team(), row_logits[warp], cols, cols, label, smoothing,
                                                dx_scale, dlogits ? dlogits + (long long)r * cols : NULL);
        }
        __syncthreads(); // part and row_logits are the next rows'
    }
    float total;
    if (!ge2_grid_sum(lane == 0 ? my_loss : 0.0f, ctl, &total))
        return;
    if (threadIdx.x == 0 && loss)
        *loss = total * inv_rows;
    ge2_ticket_reset(&ctl->blocks_done);
}

// act'(saved) at (r, j) of a [B, H] input gradient: relu's bit-mask, the
// saved z or y, or 1 without an activation.
struct head_dact {
    ge2_act_attrs act;
    const float *saved;  // [B, H] or NULL
    const uint8_t *mask; // [B, mask_row_bytes] or NULL
    long long mask_row_bytes;
    __device__ __forceinline__ float at(int r, long long h, long long j) const
    {
        if (mask)
            return (float)ge2_relu_mask_bit(mask + r * mask_row_bytes, j);
        if (saved)
            return ge2_act_grad_f32(act.act, saved[r * h + j], act.from_output, act.slope);
        return 1.0f;
    }
};

// GRADIENTS over columns [HEAD_COLUMNS blockIdx.x, +HEAD_COLUMNS) of the
// layer's input (H):
//   dx [B, H] = (g [B, C] · w [C, H]) ⊙ act', dx_sums [H] its column sums,
//   dw [C, H] = gᵀ · x [B, H], and in block 0 db [C] = g's column sums.
// Thread t takes column t % HEAD_COLUMNS and every G-th row from t /
// HEAD_COLUMNS (G = 256 / HEAD_COLUMNS row groups), HEAD_GRADIENT_ROWS rows
// at a time: their x and act' are loaded before the first dx is stored (a
// store may alias the mask, so the compiler keeps later loads behind it).
// g's row is read from global memory, a few addresses a warp, L1 after the
// first block. The row groups' partial dw and dx_sums are summed in a fixed
// order: within a warp by shuffles, then over the warps in shared memory.
// (A block per 32 columns, a warp per row, left most SMs idle and each
// warp thousands of instructions long.)
template <int CMAX>
__global__ void __launch_bounds__(HEAD_WARPS *GE2_WARP)
    ge2_head_gradients_kernel(int rows, int cols, long long h, const float *__restrict__ g /* [B, C] */,
                              const float *__restrict__ w /* [C, H] */, const float *__restrict__ x /* [B, H] */,
                              head_dact dact, float *__restrict__ dx /* [B, H] */,
                              float *__restrict__ dx_sums /* [H] or NULL */, float *__restrict__ dw /* [C, H] */,
                              float *__restrict__ db /* [C] or NULL */)
{
    constexpr int G = HEAD_WARPS * GE2_WARP / HEAD_COLUMNS, N = HEAD_GRADIENT_ROWS;
    constexpr int SUBS = GE2_WARP / HEAD_COLUMNS; // row groups within a warp
    __shared__ float partial[HEAD_WARPS][CMAX + 1][HEAD_COLUMNS]; // [warp][class, then dx_sums][column]
    // Launched before its predecessor (in an MLP step, the loss kernel) ends:
    // nothing is read before that kernel's writes are visible.
    ge2_pdl_wait();
    const int lane = threadIdx.x % GE2_WARP, warp = threadIdx.x / GE2_WARP;
    const int col = threadIdx.x % HEAD_COLUMNS, group = threadIdx.x / HEAD_COLUMNS;
    const long long j = (long long)blockIdx.x * HEAD_COLUMNS + col;
    const bool in = j < h;
    float wj[CMAX], acc[CMAX], col_sum = 0.0f;
#pragma unroll
    for (int c = 0; c < CMAX; c++) {
        wj[c] = c < cols && in ? w[c * h + j] : 0.0f;
        acc[c] = 0.0f;
    }
    for (int r0 = group; r0 < rows; r0 += G * N) {
        float xv[N], act[N];
#pragma unroll
        for (int u = 0; u < N; u++) {
            const int r = r0 + u * G;
            const bool live = in && r < rows;
            xv[u] = live ? x[r * h + j] : 0.0f;
            act[u] = live ? dact.at(r, h, j) : 0.0f;
        }
#pragma unroll
        for (int u = 0; u < N; u++) {
            const int r = r0 + u * G;
            if (r >= rows)
                break;
            const float *gr = g + (long long)r * cols;
            float d = 0.0f;
#pragma unroll
            for (int c = 0; c < CMAX; c++) {
                if (c < cols) {
                    const float gc = gr[c];
                    d += gc * wj[c];
                    acc[c] += gc * xv[u];
                }
            }
            if (in) {
                d *= act[u];
                dx[r * h + j] = d;
                col_sum += d;
            }
        }
    }
    // within the warp: the SUBS row groups of each column, lane order
#pragma unroll
    for (int off = HEAD_COLUMNS; off < GE2_WARP; off *= 2) {
#pragma unroll
        for (int c = 0; c < CMAX; c++)
            if (c < cols)
                acc[c] += __shfl_xor_sync(0xffffffffu, acc[c], off);
        col_sum += __shfl_xor_sync(0xffffffffu, col_sum, off);
    }
    static_assert(SUBS >= 1 && GE2_WARP % HEAD_COLUMNS == 0, "whole columns per warp");
    if (lane < HEAD_COLUMNS) {
#pragma unroll
        for (int c = 0; c < CMAX; c++)
            partial[warp][c][lane] = acc[c];
        partial[warp][CMAX][lane] = col_sum;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < (CMAX + 1) * HEAD_COLUMNS; i += blockDim.x) {
        const int c = i / HEAD_COLUMNS, l = i % HEAD_COLUMNS;
        const long long jj = (long long)blockIdx.x * HEAD_COLUMNS + l;
        if (jj >= h || (c < CMAX && c >= cols) || (c == CMAX && !dx_sums))
            continue;
        float s = 0.0f;
        for (int v = 0; v < HEAD_WARPS; v++)
            s += partial[v][c][l];
        if (c < CMAX)
            dw[c * h + jj] = s;
        else
            dx_sums[jj] = s;
    }
    if (!db || blockIdx.x != 0)
        return;
    float s = 0.0f; // db: warp v sums rows v, v + HEAD_WARPS, ... of class lane
    if (lane < cols)
        for (int r = warp; r < rows; r += HEAD_WARPS)
            s += g[(long long)r * cols + lane];
    __syncthreads(); // partial is reused
    if (lane < cols) // cols <= CMAX, so lane indexes a row of partial
        partial[warp][lane][0] = s;
    __syncthreads();
    if (threadIdx.x < cols) {
        float t = 0.0f;
        for (int v = 0; v < HEAD_WARPS; v++)
            t += partial[v][threadIdx.x][0];
        db[threadIdx.x] = t;
    }
}

// ------------------------------------------------------------------ matcher

static bool no(char *why, size_t size, const char *reason)
{
    if (why && size)
        snprintf(why, size, "%s", reason);
    return false;
}

static const void *end_of(const ge2_view *v)
{
    return (const unsigned char *)v->data + (size_t)ge2_shape_numel(v->shape) * ge2_dtype_size(v->dtype);
}

// Whether an output of `writer` shares a byte with an input of `reader`
// other than `except` (the one the pair means to pass from one to the other).
static bool writes_what_reads(const ge2_launch *writer, const ge2_launch *reader, const void *except)
{
    for (int o = 0; o < writer->n_out; o++)
        for (int i = 0; i < reader->n_in; i++) {
            const ge2_view *a = &writer->out[o], *b = &reader->in[i];
            if (a->data && b->data && b->data != except && a->data < end_of(b) && b->data < end_of(a))
                return true;
        }
    return false;
}

static bool is_matrix(const ge2_view *v, ge2_dtype dtype)
{
    return v->data && v->dtype == dtype && v->shape.ndim == 2;
}

static bool classes_fit(int64_t c) { return c >= 1 && c <= GE2_HEAD_MAX_CLASSES; }

static bool match_loss(const ge2_launch *lin, const ge2_launch *ce, char *why, size_t size)
{
    if (lin->n_out > 1 && lin->out[1].data)
        return no(why, size, "the LINEAR saves an activation");
    const ge2_view *x = &lin->in[0], *w = &lin->in[1], *y = &lin->out[0];
    const bool bias = lin->n_in > 2 && lin->in[2].data;
    if (!is_matrix(x, GE2_F32) || !is_matrix(w, GE2_F32) || !is_matrix(y, GE2_F32) || ce->in[0].data != y->data ||
        ce->in[1].dtype != GE2_I32 || !ce->control)
        return no(why, size, "not a LINEAR whose f32 output is the cross-entropy's logits");
    const int64_t rows = x->shape.dim[0], k = x->shape.dim[1], cols = w->shape.dim[0];
    if (w->shape.dim[1] != k || y->shape.dim[0] != rows || y->shape.dim[1] != cols ||
        ge2_shape_numel(ce->in[1].shape) != rows ||
        (bias && (lin->in[2].dtype != GE2_F32 || ge2_shape_numel(lin->in[2].shape) != cols)))
        return no(why, size, "the LINEAR's and the cross-entropy's shapes disagree");
    if (!classes_fit(cols) || rows > INT32_MAX || k % 4 || !ge2_cuda_aligned16(x->data) || !ge2_cuda_aligned16(w->data))
        return no(why, size, "more than 32 classes, or inputs not in aligned float4s");
    if (writes_what_reads(ce, lin, NULL) || writes_what_reads(lin, ce, y->data))
        return no(why, size, "the cross-entropy writes what the LINEAR reads");
    return true;
}

static bool match_gradients(const ge2_launch *gi, const ge2_launch *gw, char *why, size_t size)
{
    const ge2_view *g = &gi->in[0], *w = &gi->in[1], *x = &gw->in[1], *dx = &gi->out[0], *dw = &gw->out[0];
    if (gw->in[0].data != g->data || !is_matrix(g, GE2_F32) || !is_matrix(w, GE2_F32) || !is_matrix(x, GE2_F32) ||
        !is_matrix(dx, GE2_F32) || !is_matrix(dw, GE2_F32))
        return no(why, size, "the gradients do not share one f32 dz");
    const int64_t rows = g->shape.dim[0], cols = g->shape.dim[1], h = w->shape.dim[1];
    if (w->shape.dim[0] != cols || x->shape.dim[0] != rows || x->shape.dim[1] != h || dx->shape.dim[0] != rows ||
        dx->shape.dim[1] != h || dw->shape.dim[0] != cols || dw->shape.dim[1] != h)
        return no(why, size, "the gradients' shapes disagree");
    if (!classes_fit(cols) || rows > INT32_MAX)
        return no(why, size, "more than 32 classes");
    const ge2_view *saved = gi->n_in > 2 && gi->in[2].data ? &gi->in[2] : NULL;
    if (saved && !(saved->dtype == GE2_F32 && ge2_shape_numel(saved->shape) == rows * h) &&
        !(saved->dtype == GE2_U8 && ge2_shape_numel(saved->shape) == rows * ge2_relu_mask_row_bytes(h)))
        return no(why, size, "a saved activation of another shape");
    if (writes_what_reads(gi, gw, NULL) || writes_what_reads(gw, gi, NULL))
        return no(why, size, "one gradient writes what the other reads");
    return true;
}

extern "C" ge2_head_kind ge2_head_match(const ge2_launch *pair, char *why, size_t why_size)
{
    switch (ge2_head_pair_of(pair[0].node, pair[1].node)) {
    case GE2_HEAD_LOSS:
        return match_loss(&pair[0], &pair[1], why, why_size) ? GE2_HEAD_LOSS : GE2_HEAD_NONE;
    case GE2_HEAD_GRADIENTS: {
        const bool gi_first = pair[0].node->op == GE2_OP_LINEAR_GRAD_INPUT;
        return match_gradients(&pair[gi_first ? 0 : 1], &pair[gi_first ? 1 : 0], why, why_size) ? GE2_HEAD_GRADIENTS
                                                                                                 : GE2_HEAD_NONE;
    }
    default:
        no(why, why_size, "no head pair (fusion/head/pattern.h)");
        return GE2_HEAD_NONE;
    }
}

extern "C" const char *ge2_head_describe(ge2_head_kind kind)
{
    switch (kind) {
    case GE2_HEAD_LOSS:
        return "ge2 head kernel (linear + cross-entropy)";
    case GE2_HEAD_GRADIENTS:
        return "ge2 head kernel (input and weight gradients)";
    default:
        return "no head kernel";
    }
}

// ---------------------------------------------------------------- launchers

static float *out_or_null(const ge2_launch *l, int o) { return l->n_out > o ? (float *)l->out[o].data : NULL; }

template <int CMAX> static void loss_kernel(const ge2_launch *lin, const ge2_launch *ce, unsigned blocks)
{
    const ge2_view *x = &lin->in[0];
    ge2_head_loss_kernel<CMAX><<<blocks, HEAD_WARPS * GE2_WARP, 0, ge2_cuda_stream(lin)>>>(
        (int)x->shape.dim[0], (int)lin->in[1].shape.dim[0], x->shape.dim[1] / 4, (const float4 *)x->data,
        (const float4 *)lin->in[1].data, lin->n_in > 2 ? (const float *)lin->in[2].data : NULL,
        (const int *)ce->in[1].data, GE2_ATTRS(ge2_loss_attrs, ce->node->attrs)->label_smoothing, (float *)lin->out[0].data,
        out_or_null(ce, 0), out_or_null(ce, 1), GE2_ATTRS(ge2_loss_attrs, ce->node->attrs)->seeds_backward, ce->control,
        ce->node->id);
}

static ge2_status launch_loss(const ge2_launch *lin, const ge2_launch *ce)
{
    const int64_t rows = lin->in[0].shape.dim[0];
    if (rows == 0)
        return GE2_OK;
    const unsigned blocks = ge2_grid_sum_blocks(rows, HEAD_LOSS_ROWS);
    if (lin->in[1].shape.dim[0] <= 16)
        loss_kernel<16>(lin, ce, blocks);
    else
        loss_kernel<32>(lin, ce, blocks);
    return ge2_cuda_check_launch(ce, "ge2_head_loss_kernel");
}

template <int CMAX>
static cudaError_t gradients_kernel(const ge2_launch *gi, const ge2_launch *gw, head_dact dact)
{
    const ge2_view *g = &gi->in[0];
    const long long h = gi->in[1].shape.dim[1];
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t lc = ge2_cuda_pdl_config(dim3((unsigned)((h + HEAD_COLUMNS - 1) / HEAD_COLUMNS)),
                                                      dim3(HEAD_WARPS * GE2_WARP), ge2_cuda_stream(gi), &attr,
                                                      !gi->settings || gi->settings->pdl);
    return cudaLaunchKernelEx(&lc, ge2_head_gradients_kernel<CMAX>, (int)g->shape.dim[0], (int)g->shape.dim[1], h,
                              (const float *)g->data, (const float *)gi->in[1].data, (const float *)gw->in[1].data,
                              dact, (float *)gi->out[0].data, out_or_null(gi, 1), (float *)gw->out[0].data,
                              out_or_null(gw, 1));
}

static ge2_status launch_gradients(const ge2_launch *gi, const ge2_launch *gw)
{
    const long long h = gi->in[1].shape.dim[1];
    if (h == 0)
        return GE2_OK;
    head_dact dact = {(*GE2_ATTRS(ge2_act_attrs, gi->node->attrs)), NULL, NULL, ge2_relu_mask_row_bytes(h)};
    if (gi->n_in > 2 && gi->in[2].data) {
        if (gi->in[2].dtype == GE2_U8)
            dact.mask = (const uint8_t *)gi->in[2].data;
        else
            dact.saved = (const float *)gi->in[2].data;
    }
    const cudaError_t e =
        gi->in[0].shape.dim[1] <= 16 ? gradients_kernel<16>(gi, gw, dact) : gradients_kernel<32>(gi, gw, dact);
    if (e != cudaSuccess)
        return ge2_cuda_check_call(gi, e, "cudaLaunchKernelEx(ge2_head_gradients_kernel)");
    return ge2_cuda_check_launch(gi, "ge2_head_gradients_kernel");
}

extern "C" ge2_status ge2_head_launch(ge2_head_kind kind, const ge2_launch *pair)
{
    switch (kind) {
    case GE2_HEAD_LOSS:
        return launch_loss(&pair[0], &pair[1]);
    case GE2_HEAD_GRADIENTS:
        return pair[0].node->op == GE2_OP_LINEAR_GRAD_INPUT ? launch_gradients(&pair[0], &pair[1])
                                                           : launch_gradients(&pair[1], &pair[0]);
    default:
        return ge2_error(GE2_ERR_STATE, "ge2 head kernel: launched for a pair it did not match");
    }
}
