// The whole-step MLP kernel (mlp_step.h): one cooperative grid, one block
// per SM, that walks the step's phases with a grid barrier between them.
//
// A phase is a list of jobs; a job is one GEMM with its epilogue. Each job
// is cut into work items (output tiles) and the phase's items are dealt to
// blocks round-robin. The row chain's phase is one list of jobs with
// whole-row tiles that every item runs in order on its own rows; when it
// is the last layer alone and its classes fit a warp, a warp per row runs
// it instead (mlp_head_item). A weight
// gradient's epilogue also sums the bias gradient (the items of its first
// column tile, from their staged A) and runs the optimizer on both.
//
// A GEMM item computes a TM x TN tile of C = A·B over the whole K: the
// operands are staged in shared memory as they lie in global memory, chunk
// by chunk, and the 256 threads split into P = (TM/4)(TN/4) positions of a
// 4x4 register tile times KG = 256/P groups that take every KG-th run of 4
// k. The groups' partial tiles are summed in a fixed order, so the result's
// bits do not depend on timing.
// Small tiles over the whole K, rather than big tiles split over K, keep
// every item inside one block: no partial-sum traffic, no extra barrier.
#include <cooperative_groups.h>

#include "kernels/cuda/bad_index.h"
#include "kernels/cuda/block_reduce.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/cp_async.h"
#include "ops/loss/loss_row.h"
#include "fusion/mlp_step/mlp_step.h"
#include "ops/optimizer/optimizer_rule.h"

#include "graph/alloc.h"
#include "ops/linear/stash.h"

namespace cg = cooperative_groups;

#define MLP_THREADS 256
#define MLP_THREADS_SHIFT 8
#define MLP_WARP_SHIFT 5
static_assert(MLP_THREADS == 1 << MLP_THREADS_SHIFT && GE2_WARP == 1 << MLP_WARP_SHIFT, "the shifts are log2s");
#define MLP_WARPS (MLP_THREADS / GE2_WARP)
// Shared-memory rows are padded by 4 floats: float4 reads stay aligned and
// rows of a power-of-two length do not all start in the same bank.
#define MLP_PAD 4
// Floats of the per-group partial tiles: KG * TM * TN = (256 / P) * 16 P.
#define MLP_RED_FLOATS (16 * MLP_THREADS)
// Largest output tile side, and the most outputs of a tile.
#define MLP_MAX_TILE 64
#define MLP_MAX_OUTPUTS (MLP_MAX_TILE * MLP_MAX_TILE)
// Dynamic shared memory per block: one block per SM, so take most of it; the
// operands of the widest phase (784 inputs at a 16 x 8 tile: 32 KB) fit
// whole, larger K is staged in chunks.
#define MLP_SMEM_BYTES (160 * 1024)
#define MLP_OPERAND_FLOATS (MLP_SMEM_BYTES / 4 - MLP_MAX_OUTPUTS)
static_assert(MLP_MAX_OUTPUTS <= 16 * MLP_THREADS, "a tile's 4x4 positions are at most the threads");
static_assert(MLP_OPERAND_FLOATS >= MLP_RED_FLOATS + MLP_PAD * MLP_THREADS,
              "the partial tiles (padded slabs) reuse the operands' shared memory");
enum mlp_epilogue {
    MLP_EPI_FORWARD,     // y = act(z), z = acc + bias; relu's bit-mask
    MLP_EPI_LOSS,        // logits = acc + bias; cross-entropy (and accuracy) per row
    MLP_EPI_GRAD_INPUT,  // dz_below = acc ⊙ relu'(mask)
    MLP_EPI_GRAD_WEIGHT, // dW = acc
};

// C[m, n] = sum_k A(m, k) B(k, n), A(m, k) = a[m a_rs + k a_ks], B(k, n) = b[k b_ks + n b_cs].
struct mlp_job {
    int index; // in mlp_params.jobs
    int epilogue;
    int M, N, K;
    int tm, tn, kc; // tile (powers of 2) and k-chunk (a multiple of 4)
    int tm_shift, tn_shift; // log2(tm), log2(tn): an item's thread layout by shifts, no divisions
    bool a_vec, b_vec; // the operand's rows are 16-byte aligned: staged by 16-byte copies
    int tiles_n, items;
    const float *a;
    long long a_rs, a_ks;
    const float *b;
    long long b_ks, b_cs;
    float *c;            // [M, N]
    const float *bias;   // [N] FORWARD, LOSS
    bool relu;           // FORWARD: apply, write the mask; GRAD_INPUT: multiply by its derivative
    uint8_t *mask;       // [M, mask_row_bytes]
    long long mask_row_bytes;
    // LOSS
    const int32_t *labels; // [M]
    float smoothing, inv_rows;
    float *dlogits;        // [M, N]
    float *loss_partials;  // [items]
    float *correct_partials; // [items] or NULL
    // GRAD_WEIGHT: c is the gradient pool at this element offset; the
    // epilogue also updates the parameter and optimizer state there
    long long opt_offset;
    // B is complete before the phase before this job's begins, so
    // mlp_prefetch_weights may stage it during the barrier before this one
    bool b_early;
    // GRAD_WEIGHT: the bias gradient, db[m] = sum over k of A(m, k), at this
    // element offset of the pools, summed by the items of the first column
    // tile from their staged A and updated likewise
    long long db_offset;
};

struct mlp_phase {
    int first_job, n_jobs, items;
    bool chain; // every item runs all the jobs in order (one item space: the first job's)
    bool head;  // a chain of the last layer alone, run by mlp_head_item
};

// The head (mlp_head_item): at most a warp's worth of classes, and each
// lane's share of a row, K / 32, in at most MLP_HEAD_K4 float4s.
#define MLP_HEAD_K4 4
#define MLP_HEAD_MAX_K (4 * GE2_WARP * MLP_HEAD_K4)

// L forwards, L - 1 input gradients, L weight gradients; at most 2L - 1
// phases (fusion/mlp_step/pattern.h: 2c + 1 with c <= L - 1)
#define MLP_MAX_JOBS (3 * GE2_MLP_STEP_MAX_LAYERS)
#define MLP_MAX_PHASES (2 * GE2_MLP_STEP_MAX_LAYERS)
#define MLP_JOB_STAMPS 5

// Passed by value: the job table lives in the kernel's parameter (constant)
// bank, where every block reads it through the constant cache. In global
// memory its fields were dependent loads at every item.
struct mlp_params {
    mlp_job jobs[MLP_MAX_JOBS];
    mlp_phase phases[MLP_MAX_PHASES];
    int n_jobs, n_phases;
    // the loss: block 0 sums the loss job's partials at the start of phase finalize_phase
    int finalize_phase, loss_items;
    const float *loss_partials, *correct_partials;
    float *loss, *correct;
    float inv_rows;
    // the step's copies (step_copy.h): in before phase 0 (none when the
    // launches read the feeds at a staging slot's device staging: no
    // barrier and no copy then), out at the end
    ge2_cuda_copy upload, results[GE2_CUDA_MAX_COPIES];
    int n_results;
    // the profile_fused option: block 0 stamps the global timer at the start,
    // after the upload and after every phase (ns) [n_phases + 2]; NULL otherwise
    unsigned long long *stamps;
    // and per job, by the block that runs its item 0: start, staged, multiplied,
    // reduced, done [n_jobs][MLP_JOB_STAMPS]
    unsigned long long *job_stamps;
    // the optimizer, in the last phase's epilogues
    ge2_optimizer_config cfg;
    ge2_flat_pools pools;
    ge2_control *ctl; // also where an out-of-range label is counted (kernels/cuda/bad_index.h) ...
    int loss_node;    // ... under the cross-entropy's node id (here, not in the job table: the parameter block
                      // each replay passes grows by a field, not by one per job)
};

// ------------------------------------------------------------------- kernels

// An operand tile into shared memory: rows [r0, r0 + T) (zero from R on)
// by k [k0, k0 + kc) (zero from K on), element (r, k) at src[r rs + k ks].
// Stored as it lies in memory, so every copy is contiguous: k-fast (ks == 1)
// as dst[r][k], row stride ld = kc + 4; row-fast as dst[k][r], ld = T + 4.
// Every copy is issued before any is waited for (cp.async), 16 bytes at a
// time where rows are aligned: the stage costs about one memory latency.
// (One plain load per element, transposed into shared memory, and then
// 4-byte cp.async, whose stores lost most shared-memory wavefronts to bank
// conflicts, were both several times slower.)
__device__ __forceinline__ void mlp_stage(float *dst, int ld, bool vec, const float *src, long long rs, long long ks,
                                          int r0, int R, int T, int k0, int K, int kc)
{
    const int warp = threadIdx.x / GE2_WARP, lane = threadIdx.x % GE2_WARP;
    if (ks == 1) {
        for (int r = warp; r < T; r += MLP_WARPS) {
            const bool row_ok = r0 + r < R;
            const float *row = src + (long long)(r0 + r) * rs + k0;
            if (vec && row_ok && k0 + kc <= K) {
                /* the row's chunk whole: no bounds per copy, unrolled so the
                 * address arithmetic of several copies overlaps */
#pragma unroll 4
                for (int k = lane * 4; k < kc; k += 4 * GE2_WARP)
                    cp_async_16(&dst[r * ld + k], row + k, 16);
            } else if (vec) {
                for (int k = lane * 4; k < kc; k += 4 * GE2_WARP) {
                    int bytes = row_ok ? min(max(K - k0 - k, 0), 4) * 4 : 0;
                    cp_async_16(&dst[r * ld + k], bytes ? row + k : src, bytes);
                }
            } else {
                for (int k = lane; k < kc; k += GE2_WARP) {
                    bool ok = row_ok && k0 + k < K;
                    cp_async_f32(&dst[r * ld + k], ok ? row + k : src, ok);
                }
            }
        }
    } else if (vec) {
        /* row-fast: every thread takes copies of the whole operand in turn,
         * 16 bytes each, k-row i >> shift (T, a tile side, is a power of 2).
         * (Per warp one k-row at a time left most lanes idle when T is
         * narrow.) */
        const int shift = __ffs(T / 4) - 1, copies = kc << shift;
#pragma unroll 4
        for (int i = threadIdx.x; i < copies; i += MLP_THREADS) {
            const int k = i >> shift, r = (i - (k << shift)) * 4;
            const int bytes = k0 + k < K ? min(max(R - r0 - r, 0), 4) * 4 : 0;
            cp_async_16(&dst[k * ld + r], bytes ? src + (long long)(k0 + k) * ks + r0 + r : src, bytes);
        }
    } else {
        const int shift = __ffs(T) - 1, copies = kc << shift;
        for (int i = threadIdx.x; i < copies; i += MLP_THREADS) {
            const int k = i >> shift, r = i - (k << shift);
            const bool ok = k0 + k < K && r0 + r < R;
            cp_async_f32(&dst[k * ld + r], ok ? src + (long long)(k0 + k) * ks + r0 + r : src, ok);
        }
    }
}

// Leading dimension of a staged operand (mlp_stage).
__device__ __forceinline__ int mlp_ld(long long ks, int T, int kc) { return ks == 1 ? kc + MLP_PAD : T + MLP_PAD; }

// acc[i][j] += sum over the thread's k of A(im + i, k) B(k, in + j). Each
// step takes 4 consecutive k: four float4 reads per operand, whichever way
// it is stored, for 64 FMAs.
template <bool A_KFAST, bool B_KFAST>
__device__ __forceinline__ void mlp_multiply(const float *as, int lda, const float *bs, int ldb, int kc, int im,
                                             int in, int group, int groups, float acc[4][4])
{
    for (int k = 4 * group; k < kc; k += 4 * groups) {
        float a[4][4], b[4][4]; /* [row or column][k - k0] */
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const float4 va = *reinterpret_cast<const float4 *>(A_KFAST ? &as[(im + i) * lda + k] : &as[(k + i) * lda + im]);
            const float4 vb = *reinterpret_cast<const float4 *>(B_KFAST ? &bs[(in + i) * ldb + k] : &bs[(k + i) * ldb + in]);
            const float fa[4] = {va.x, va.y, va.z, va.w}, fb[4] = {vb.x, vb.y, vb.z, vb.w};
#pragma unroll
            for (int j = 0; j < 4; j++) {
                if (A_KFAST)
                    a[i][j] = fa[j];
                else
                    a[j][i] = fa[j];
                if (B_KFAST)
                    b[i][j] = fb[j];
                else
                    b[j][i] = fb[j];
            }
        }
#pragma unroll
        for (int kk = 0; kk < 4; kk++)
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++)
                    acc[i][j] = fmaf(a[i][kk], b[j][kk], acc[i][j]);
    }
}

// The FORWARD epilogue's relu bit-mask: bit n of row m is z > 0, eight
// columns to a byte (tiles are multiples of 8 wide, so no byte is shared
// between items); the item holding the last column also clears the row's
// padding bytes.
__device__ void mlp_write_mask(const mlp_job &jb, int m0, int n0, const float *z /* [tm, tn] */)
{
    const int bytes_per_row = jb.tn / 8, shift = jb.tn_shift - 3;
    for (int o = threadIdx.x; o < jb.tm * bytes_per_row; o += MLP_THREADS) {
        int r = o >> shift, byte = o - (r << shift), m = m0 + r, col0 = n0 + byte * 8;
        if (m >= jb.M || col0 >= jb.N)
            continue;
        unsigned bits = 0;
        for (int bit = 0; bit < 8 && col0 + bit < jb.N; bit++)
            bits |= (z[r * jb.tn + byte * 8 + bit] > 0.0f ? 1u : 0u) << bit;
        jb.mask[m * jb.mask_row_bytes + col0 / 8] = (uint8_t)bits;
    }
    if (n0 + jb.tn < jb.N)
        return;
    const int used = (jb.N + 7) / 8, pad = (int)jb.mask_row_bytes - used;
    for (int o = threadIdx.x; o < jb.tm * pad; o += MLP_THREADS) {
        int r = o / pad, m = m0 + r;
        if (m < jb.M)
            jb.mask[m * jb.mask_row_bytes + used + (o - r * pad)] = 0;
    }
}

// The label of the warp's first row of the item, loaded when the item
// starts so its latency hides behind the GEMM (mlp_loss_rows).
__device__ __forceinline__ int mlp_first_label(const mlp_job &jb, int m0)
{
    const int m = m0 + (int)threadIdx.x / GE2_WARP;
    return jb.epilogue == MLP_EPI_LOSS && m < jb.M && m < m0 + jb.tm ? jb.labels[m] : 0;
}

// The item's loss and hits: each warp's (the same in all its lanes), summed
// over the warps in order into the loss job's partials.
__device__ void mlp_loss_partials(const mlp_job &jb, int item, float loss, float hits)
{
    __shared__ float warp_loss[MLP_WARPS], warp_hits[MLP_WARPS];
    const int warp = threadIdx.x / GE2_WARP, lane = threadIdx.x % GE2_WARP;
    if (lane == 0) {
        warp_loss[warp] = loss;
        warp_hits[warp] = hits;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        float l = 0.0f, h = 0.0f;
        for (int w = 0; w < MLP_WARPS; w++) {
            l += warp_loss[w];
            h += warp_hits[w];
        }
        jb.loss_partials[item] = l;
        if (jb.correct_partials)
            jb.correct_partials[item] = h;
    }
}

// LOSS: the item holds whole rows of logits; one warp per row.
// first_label: mlp_first_label's.
__device__ void mlp_loss_rows(const mlp_params &p, const mlp_job &jb, int item, int m0,
                              const float *logits /* [tm, tn] */, int first_label)
{
    const int warp = threadIdx.x / GE2_WARP;
    float loss = 0.0f, hits = 0.0f;
    for (int r = warp; r < jb.tm && m0 + r < jb.M; r += MLP_WARPS) {
        const int m = m0 + r, label = r == warp ? first_label : jb.labels[m];
        if (threadIdx.x % GE2_WARP == 0)
            ge2_index_ok(p.ctl, p.loss_node, GE2_BAD_LABEL, m, label, jb.N);
        const float *row = logits + r * jb.tn;
        loss += ge2_cross_entropy_row<1>(ge2_warp_team(), row, jb.N, jb.N, label, jb.smoothing, jb.inv_rows,
                                         jb.dlogits + (long long)m * jb.N);
        if (jb.correct_partials)
            hits += ge2_argmax_row(row, jb.N) == label ? 1.0f : 0.0f;
    }
    mlp_loss_partials(jb, item, loss, hits);
}

// Passes of the optimizer's tile update: tn / 4 threads per row, a float4
// each, so a pass covers 4 * MLP_THREADS elements.
#define MLP_UPDATE_PASSES (MLP_MAX_OUTPUTS / (4 * MLP_THREADS))

// What an item's epilogue reads from global memory besides its tile, loaded
// into registers as the item starts, after its operands' copies are issued:
// the loads then wait out the stage and the multiply instead of adding one
// L2 round trip after another to the end of the item (the optimizer's
// update was two, three with the bias gradient's). Each thread loads what
// it will use: its column's bias (t % tn: the same for each of its
// outputs), its first output's relu mask byte, and the parameters and
// optimizer state of its float4 in each pass of the tile update.
template <class R> struct mlp_preload {
    float bias;
    uint8_t mask;
    float4 param[MLP_UPDATE_PASSES], state[MLP_UPDATE_PASSES][R::ARRAY];
    float db_param, db_state[R::ARRAY];
};

__device__ __forceinline__ float4 mlp_ld4(const float *at) { return *reinterpret_cast<const float4 *>(at); }

// The optimizer's tile update runs float4 by float4 (the rows' starts are
// 16-byte aligned).
__device__ __forceinline__ bool mlp_update_vec(const mlp_job &jb) { return jb.N % 4 == 0; }

template <class R>
__device__ __forceinline__ void mlp_preload_epilogue(const mlp_params &p, const mlp_job &jb, int m0, int n0,
                                                     bool db_thread, int db_row, mlp_preload<R> &pre)
{
    const int t = threadIdx.x, col = t & (jb.tn - 1), r = t >> jb.tn_shift;
    if (jb.epilogue == MLP_EPI_FORWARD || jb.epilogue == MLP_EPI_LOSS) {
        pre.bias = n0 + col < jb.N ? jb.bias[n0 + col] : 0.0f;
    } else if (jb.epilogue == MLP_EPI_GRAD_INPUT) {
        if (jb.relu && r < jb.tm && m0 + r < jb.M && n0 + col < jb.N)
            pre.mask = jb.mask[(long long)(m0 + r) * jb.mask_row_bytes + (n0 + col) / 8];
    } else if (jb.opt_offset >= 0) {
        if (mlp_update_vec(jb)) {
            const int row_shift = jb.tn_shift - 2, lane = t & ((1 << row_shift) - 1);
            const int rows = min(jb.tm, jb.M - m0), cols = min(jb.tn, jb.N - n0);
#pragma unroll
            for (int pass = 0; pass < MLP_UPDATE_PASSES; pass++) {
                const int row = (t >> row_shift) + (pass << (MLP_THREADS_SHIFT - row_shift));
                if (row >= rows || lane * 4 >= cols)
                    break;
                const long long at = jb.opt_offset + (long long)(m0 + row) * jb.N + n0 + lane * 4;
                pre.param[pass] = mlp_ld4(p.pools.params + at);
#pragma unroll
                for (int k = 0; k < R::SLOTS; k++)
                    pre.state[pass][k] = mlp_ld4(p.pools.state + k * p.pools.n + at);
            }
        }
        if (db_thread) {
            const long long at = jb.db_offset + m0 + db_row;
            pre.db_param = p.pools.params[at];
#pragma unroll
            for (int k = 0; k < R::SLOTS; k++)
                pre.db_state[k] = p.pools.state[k * p.pools.n + at];
        }
    }
}

// GRAD_WEIGHT in the last phase: the gradient tile goes to its place in
// the pool, and the optimizer updates the tile's parameters and state with
// the element rule every optimizer kernel uses (optimizer_rule.h), reading
// the gradients from the tile itself, tn/4 threads per row, a float4 each,
// parameters and state preloaded (mlp_preload) where the rows are aligned.
// (A per-element update, 16 elements per thread, was most of the phase;
// reading the gradients back from the pool cost a barrier and an L2 round
// trip; loading parameters and state at the update, a memory latency.)
template <class R>
__device__ void mlp_update_tile(const mlp_params &p, const ge2_opt_scalars &s, const mlp_job &jb, int m0, int n0,
                                const float *tile /* [tm, tn] */, const mlp_preload<R> &pre)
{
    const int rows = min(jb.tm, jb.M - m0), cols = min(jb.tn, jb.N - n0);
    for (int o = threadIdx.x; o < jb.tm * jb.tn; o += MLP_THREADS) {
        const int r = o >> jb.tn_shift, col = o - (r << jb.tn_shift);
        if (r < rows && col < cols)
            p.pools.grads[jb.opt_offset + (long long)(m0 + r) * jb.N + n0 + col] = tile[o];
    }
    if (mlp_update_vec(jb)) {
        /* mlp_preload_epilogue's layout; the rule of every optimizer kernel */
        const int t = threadIdx.x, row_shift = jb.tn_shift - 2, lane = t & ((1 << row_shift) - 1);
#pragma unroll
        for (int pass = 0; pass < MLP_UPDATE_PASSES; pass++) {
            const int row = (t >> row_shift) + (pass << (MLP_THREADS_SHIFT - row_shift));
            if (row >= rows || lane * 4 >= cols)
                break;
            const float4 g4 = *reinterpret_cast<const float4 *>(&tile[(row << jb.tn_shift) + lane * 4]);
            const float g[4] = {g4.x, g4.y, g4.z, g4.w};
            float q[4] = {pre.param[pass].x, pre.param[pass].y, pre.param[pass].z, pre.param[pass].w};
            float st[4][R::ARRAY];
#pragma unroll
            for (int k = 0; k < R::SLOTS; k++) {
                st[0][k] = pre.state[pass][k].x;
                st[1][k] = pre.state[pass][k].y;
                st[2][k] = pre.state[pass][k].z;
                st[3][k] = pre.state[pass][k].w;
            }
#pragma unroll
            for (int j = 0; j < 4; j++)
                ge2_opt_rule_element<R>(&s, p.cfg.nesterov, &q[j], g[j], st[j]);
            const long long at = jb.opt_offset + (long long)(m0 + row) * jb.N + n0 + lane * 4;
            *reinterpret_cast<float4 *>(p.pools.params + at) = make_float4(q[0], q[1], q[2], q[3]);
#pragma unroll
            for (int k = 0; k < R::SLOTS; k++)
                *reinterpret_cast<float4 *>(p.pools.state + k * p.pools.n + at) =
                    make_float4(st[0][k], st[1][k], st[2][k], st[3][k]);
        }
        return;
    }
    /* rows not 16-byte aligned: element by element, tn threads per row,
     * nothing preloaded */
    const int lane = threadIdx.x & (jb.tn - 1);
    for (int r = threadIdx.x >> jb.tn_shift; r < rows; r += MLP_THREADS >> jb.tn_shift) {
        const long long at = jb.opt_offset + (long long)(m0 + r) * jb.N + n0;
        ge2_opt_update_span<R, false>(lane, jb.tn, cols, p.pools.params + at, tile + (r << jb.tn_shift),
                                      p.pools.state + at, p.pools.n, s, p.cfg.nesterov, nullptr);
    }
}

template <class R>
__device__ void mlp_epilogue(const mlp_params &p, const mlp_job &jb, int item, int m0, int n0, float *tile /* [tm, tn] */, int first_label,
                             const mlp_preload<R> &pre)
{
    for (int o = threadIdx.x; o < jb.tm * jb.tn; o += MLP_THREADS) {
        const int r = o >> jb.tn_shift, col = o - (r << jb.tn_shift), m = m0 + r, n = n0 + col;
        if (m >= jb.M || n >= jb.N)
            continue;
        const long long at = (long long)m * jb.N + n;
        const bool first = o == (int)threadIdx.x; /* the output mlp_preload_epilogue loaded for */
        float v = tile[o];
        switch (jb.epilogue) {
        case MLP_EPI_FORWARD:
            v += pre.bias;
            tile[o] = v; /* z, for the mask */
            jb.c[at] = jb.relu ? ge2_act_f32(GE2_ACT_RELU, v, 0.0f) : v;
            break;
        case MLP_EPI_LOSS:
            v += pre.bias;
            tile[o] = v;
            jb.c[at] = v;
            break;
        case MLP_EPI_GRAD_INPUT:
            if (jb.relu && !(first ? (pre.mask >> (n & 7)) & 1 : ge2_relu_mask_bit(jb.mask + m * jb.mask_row_bytes, n)))
                v = 0.0f;
            jb.c[at] = v;
            break;
        default:
            jb.c[at] = v;
            break;
        }
    }
    if (jb.epilogue == MLP_EPI_FORWARD && jb.relu) {
        __syncthreads();
        mlp_write_mask(jb, m0, n0, tile);
    } else if (jb.epilogue == MLP_EPI_LOSS) {
        __syncthreads();
        mlp_loss_rows(p, jb, item, m0, tile, first_label);
    }
}

// the profile_fused option: point `at` of job jb's item 0.
__device__ __forceinline__ void mlp_job_stamp(const mlp_params &p, const mlp_job &jb, int item, int at)
{
    if (p.job_stamps && item == 0 && threadIdx.x == 0) {
        unsigned long long t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        p.job_stamps[jb.index * MLP_JOB_STAMPS + at] = t;
    }
}

// Where an item's operands lie in shared memory (mlp_stage's layouts).
__device__ __forceinline__ int mlp_lda(const mlp_job &jb) { return mlp_ld(jb.a_ks, jb.tm, jb.kc); }
__device__ __forceinline__ int mlp_ldb(const mlp_job &jb) { return mlp_ld(jb.b_ks, jb.tn, jb.kc); }
__device__ __forceinline__ float *mlp_b_stage(const mlp_job &jb, float *smem)
{
    return smem + (jb.a_ks == 1 ? jb.tm : jb.kc) * mlp_lda(jb);
}

// Stages the B operand (k from k0) of item `item` of jb.
__device__ __forceinline__ void mlp_stage_b(const mlp_job &jb, int item, int k0, float *smem)
{
    const int n0 = item % jb.tiles_n * jb.tn;
    mlp_stage(mlp_b_stage(jb, smem), mlp_ldb(jb), jb.b_vec, jb.b, jb.b_cs, jb.b_ks, n0, jb.N, jb.tn, k0, jb.K, jb.kc);
}

// GEMM item `item` of jb; b_staged: its B operand's copies were issued
// already (mlp_prefetch_weights) and are waited for with A's.
template <class R>
__device__ void mlp_gemm_item(const mlp_params &p, const ge2_opt_scalars &s, const mlp_job &jb, int item,
                              bool b_staged, float *smem)
{
    const int tm = jb.tm, tn = jb.tn;
    const int m0 = item / jb.tiles_n * tm, n0 = item % jb.tiles_n * tn;
    /* (tm/4)(tn/4) positions x groups, all powers of 2: shifts, not
     * divisions (six of those delayed every item's start) */
    const int pm_shift = jb.tm_shift - 2, pos_shift = pm_shift + jb.tn_shift - 2;
    const int groups_shift = MLP_THREADS_SHIFT - pos_shift, groups = 1 << groups_shift;
    /* Which threads of a warp differ in k: with both operands k-fast, lanes
     * that take consecutive k read consecutive 16 bytes of a row, where
     * lanes on rows 4 apart hit the same banks (rows are ld = 0 or 4 mod 8
     * float4s apart); a row-fast operand wants the lanes along its rows. */
    const bool k_lanes = jb.a_ks == 1 && jb.b_ks == 1;
    const int t = threadIdx.x;
    const int pos = k_lanes ? t >> groups_shift : t & ((1 << pos_shift) - 1);
    const int group = k_lanes ? t & (groups - 1) : t >> pos_shift;
    const int im = (pos & ((1 << pm_shift) - 1)) * 4, in = (pos >> pm_shift) * 4;
    const int lda = mlp_lda(jb), ldb = mlp_ldb(jb);
    float *as = smem;                  /* [tm, lda] or [kc, lda] */
    float *bs = mlp_b_stage(jb, smem); /* [tn, ldb] or [kc, ldb] */
    float acc[4][4] = {};
    /* the bias gradient's rows: `share` threads per row, each every share-th k */
    const bool db = jb.db_offset >= 0 && n0 == 0;
    const int share_shift = min(MLP_THREADS_SHIFT - jb.tm_shift, MLP_WARP_SHIFT), share = 1 << share_shift;
    const int db_row = t >> share_shift, db_sub = t & (share - 1);
    float db_sum = 0.0f;
    const int label = mlp_first_label(jb, m0);
    const bool db_thread = db && db_sub == 0 && db_row < tm && m0 + db_row < jb.M;
    mlp_preload<R> pre;
    mlp_job_stamp(p, jb, item, 0);
    for (int k0 = 0; k0 < jb.K; k0 += jb.kc) {
        mlp_stage(as, lda, jb.a_vec, jb.a, jb.a_rs, jb.a_ks, m0, jb.M, tm, k0, jb.K, jb.kc);
        if (!(b_staged && k0 == 0))
            mlp_stage_b(jb, item, k0, smem);
        cp_async_commit();
        if (k0 == 0)
            mlp_preload_epilogue<R>(p, jb, m0, n0, db_thread, db_row, pre);
        cp_async_wait<0>();
        __syncthreads();
        if (k0 == 0)
            mlp_job_stamp(p, jb, item, 1);
        const int kc = min(jb.kc, (jb.K - k0 + 3) / 4 * 4); /* past K the stage wrote zeros */
        if (db && db_row < tm)
            for (int k = db_sub; k < kc; k += share)
                db_sum += jb.a_ks == 1 ? as[db_row * lda + k] : as[k * lda + db_row];
        if (jb.a_ks == 1 && jb.b_ks == 1)
            mlp_multiply<true, true>(as, lda, bs, ldb, kc, im, in, group, groups, acc);
        else if (jb.a_ks == 1)
            mlp_multiply<true, false>(as, lda, bs, ldb, kc, im, in, group, groups, acc);
        else if (jb.b_ks == 1)
            mlp_multiply<false, true>(as, lda, bs, ldb, kc, im, in, group, groups, acc);
        else
            mlp_multiply<false, false>(as, lda, bs, ldb, kc, im, in, group, groups, acc);
        __syncthreads();
    }
    mlp_job_stamp(p, jb, item, 2);
    /* [groups, tm * tn + MLP_PAD], over the operands: the padding puts the
     * groups' slabs in different banks, which k_lanes' warps write side by
     * side (unpadded, 32 groups' float4 stores hit one bank) */
    const int outputs = tm * tn, slab = outputs + MLP_PAD;
    float *partial = smem;
    float *tile = smem + MLP_OPERAND_FLOATS; /* [tm, tn] */
#pragma unroll
    for (int i = 0; i < 4; i++)
        *reinterpret_cast<float4 *>(&partial[group * slab + (im + i) * tn + in]) =
            make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
    __syncthreads();
    if (outputs >= MLP_THREADS) {
        for (int o = threadIdx.x; o < outputs; o += MLP_THREADS) {
            float v = 0.0f;
            for (int g = 0; g < groups; g++)
                v += partial[g * slab + o];
            tile[o] = v;
        }
    } else {
        /* small tiles have many groups (up to 128): `share` lanes per output
         * each sum every share-th group, then a fixed shuffle tree (a serial
         * sum over 64 groups was a quarter of the phase) */
        const int shift = MLP_THREADS_SHIFT - jb.tm_shift - jb.tn_shift, share = 1 << shift;
        const int o = t >> shift, sub = t & (share - 1);
        float v = 0.0f;
        for (int g = sub; g < groups; g += share)
            v += partial[g * slab + o];
        for (int off = share / 2; off > 0; off /= 2)
            v += __shfl_down_sync(0xffffffffu, v, off, share);
        if (sub == 0)
            tile[o] = v;
    }
    __syncthreads();
    mlp_job_stamp(p, jb, item, 3);
    if (db) {
        for (int off = share / 2; off > 0; off /= 2)
            db_sum += __shfl_down_sync(0xffffffffu, db_sum, off, share);
        if (db_thread) {
            const long long at = jb.db_offset + m0 + db_row;
            p.pools.grads[at] = db_sum;
            float q = pre.db_param, st[R::ARRAY];
#pragma unroll
            for (int k = 0; k < R::SLOTS; k++)
                st[k] = pre.db_state[k];
            ge2_opt_rule_element<R>(&s, p.cfg.nesterov, &q, db_sum, st);
            p.pools.params[at] = q;
#pragma unroll
            for (int k = 0; k < R::SLOTS; k++)
                p.pools.state[k * p.pools.n + at] = st[k];
        }
    }
    if (jb.opt_offset >= 0)
        mlp_update_tile<R>(p, s, jb, m0, n0, tile, pre);
    else
        mlp_epilogue<R>(p, jb, item, m0, n0, tile, label, pre);
    __syncthreads(); /* the next item overwrites shared memory */
    mlp_job_stamp(p, jb, item, 4);
}

// The job of a phase's item and the item's index within it (a chain
// item's first job: the item runs them all).
__device__ __forceinline__ int mlp_locate(const mlp_params &p, const mlp_phase &ph, int item, int *local)
{
    int j = ph.first_job;
    *local = item;
    while (!ph.chain && *local >= p.jobs[j].items) {
        *local -= p.jobs[j].items;
        j++;
    }
    return j;
}

// Between arriving at the barrier before `phase` and waiting there: this
// block's first item of the phase stages its B operand where that was
// complete before the phase now ending began (mlp_job.b_early: the weights,
// which no phase before the last changes, and a weight gradient's input
// rows made two phases back or more), so only what the ending phase made
// loads after the barrier. After the arrival, whose release would
// otherwise wait for these copies too (issued before it, they made the
// blocks that end a phase later still).
// Returns whether it did.
__device__ __forceinline__ bool mlp_prefetch_weights(const mlp_params &p, int phase, float *smem)
{
    if (phase >= p.n_phases || (int)blockIdx.x >= p.phases[phase].items)
        return false;
    int local;
    const mlp_job &jb = p.jobs[mlp_locate(p, p.phases[phase], blockIdx.x, &local)];
    if (!jb.b_early || jb.kc < jb.K)
        return false;
    mlp_stage_b(jb, local, 0, smem);
    cp_async_commit();
    return true;
}

// The row chain when it is the last layer alone and the classes fit a
// warp: its two GEMMs, logits = x W^T + b and dz below = dlogits W (then
// relu'), are products of one row with W, so a warp takes a row through
// both, W in shared memory (staged as the loss job's B: [class][k]). Each
// lane keeps 4 k of every 128 of its row in registers; a class's logit is
// a warp sum; the loss row code (loss_row.h) writes the dlogits to the
// warp's scratch, and each lane's dz float4s are sums over the classes of
// dlogit (shuffled from its lane) times W. No k-group reduction through
// shared memory and no stage between the two GEMMs. Items of MLP_WARPS rows.
// has_back: back, the input gradient below, follows the loss job (no
// pointer into the parameters: taking one copies them to local memory).
__device__ void mlp_head_item(const mlp_params &p, const mlp_job &fwd, const mlp_job &back, bool has_back, int item,
                              bool b_staged, float *smem)
{
    const int warp = threadIdx.x >> MLP_WARP_SHIFT, lane = threadIdx.x & (GE2_WARP - 1);
    const int C = fwd.N, K = fwd.K, m = item * MLP_WARPS + warp;
    const bool row = m < fwd.M; /* the same in the whole warp */
    const float *w = mlp_b_stage(fwd, smem);
    const int ldw = mlp_ldb(fwd);
    float *logits = smem + MLP_OPERAND_FLOATS + warp * 2 * GE2_WARP, *dlogits = logits + GE2_WARP;
    mlp_job_stamp(p, fwd, item, 0);
    if (!b_staged) {
        mlp_stage_b(fwd, item, 0, smem);
        cp_async_commit();
    }
    /* the row, its relu bits below, its label and the lane's class bias,
     * loaded while W lands */
    float4 x[MLP_HEAD_K4];
    unsigned bits[MLP_HEAD_K4];
#pragma unroll
    for (int j = 0; j < MLP_HEAD_K4; j++) {
        const int k = 4 * lane + 4 * GE2_WARP * j;
        const bool in = row && k < K;
        x[j] = in ? *reinterpret_cast<const float4 *>(fwd.a + m * fwd.a_rs + k) : make_float4(0.f, 0.f, 0.f, 0.f);
        bits[j] = in && has_back && back.relu ? back.mask[m * back.mask_row_bytes + k / 8] >> (k & 7) : 0xfu;
    }
    const int label = row ? fwd.labels[m] : 0;
    const float bias = lane < C ? fwd.bias[lane] : 0.0f;
    cp_async_wait<0>();
    __syncthreads();
    mlp_job_stamp(p, fwd, item, 1);
    /* logits, 8 classes at a time so their warp sums interleave; lane c keeps class c's */
    float logit = 0.0f;
    for (int c0 = 0; c0 < C; c0 += 8) {
        float sum[8];
#pragma unroll
        for (int u = 0; u < 8; u++) {
            sum[u] = 0.0f;
            const int c = min(c0 + u, C - 1);
#pragma unroll
            for (int j = 0; j < MLP_HEAD_K4; j++) {
                const int k = 4 * lane + 4 * GE2_WARP * j;
                if (k < K) {
                    const float4 wv = *reinterpret_cast<const float4 *>(&w[c * ldw + k]);
                    sum[u] = fmaf(x[j].x, wv.x, fmaf(x[j].y, wv.y, fmaf(x[j].z, wv.z, fmaf(x[j].w, wv.w, sum[u]))));
                }
            }
        }
#pragma unroll
        for (int off = GE2_WARP / 2; off > 0; off /= 2)
#pragma unroll
            for (int u = 0; u < 8; u++)
                sum[u] += __shfl_xor_sync(0xffffffffu, sum[u], off);
#pragma unroll
        for (int u = 0; u < 8; u++)
            if (lane == c0 + u)
                logit = sum[u] + bias;
    }
    if (lane < C) {
        logits[lane] = logit;
        if (row)
            fwd.c[(long long)m * C + lane] = logit;
    }
    __syncwarp();
    mlp_job_stamp(p, fwd, item, 2);
    float loss = 0.0f, hits = 0.0f;
    if (row) {
        if (lane == 0)
            ge2_index_ok(p.ctl, p.loss_node, GE2_BAD_LABEL, m, label, C);
        loss = ge2_cross_entropy_row<1>(ge2_warp_team(), logits, C, C, label, fwd.smoothing, fwd.inv_rows, dlogits);
        if (fwd.correct_partials)
            hits = ge2_argmax_row(logits, C) == label ? 1.0f : 0.0f;
    }
    __syncwarp();
    const float dl = row && lane < C ? dlogits[lane] : 0.0f;
    if (row && lane < C)
        fwd.dlogits[(long long)m * C + lane] = dl;
    mlp_job_stamp(p, fwd, item, 3);
    if (has_back) {
        float4 dz[MLP_HEAD_K4];
#pragma unroll
        for (int j = 0; j < MLP_HEAD_K4; j++)
            dz[j] = make_float4(0.f, 0.f, 0.f, 0.f);
        for (int c = 0; c < C; c++) {
            const float d = __shfl_sync(0xffffffffu, dl, c);
#pragma unroll
            for (int j = 0; j < MLP_HEAD_K4; j++) {
                const int k = 4 * lane + 4 * GE2_WARP * j;
                if (k < K) {
                    const float4 wv = *reinterpret_cast<const float4 *>(&w[c * ldw + k]);
                    dz[j].x = fmaf(d, wv.x, dz[j].x);
                    dz[j].y = fmaf(d, wv.y, dz[j].y);
                    dz[j].z = fmaf(d, wv.z, dz[j].z);
                    dz[j].w = fmaf(d, wv.w, dz[j].w);
                }
            }
        }
#pragma unroll
        for (int j = 0; j < MLP_HEAD_K4; j++) {
            const int k = 4 * lane + 4 * GE2_WARP * j;
            if (row && k < K) {
                const float4 v = make_float4(bits[j] & 1u ? dz[j].x : 0.0f, bits[j] & 2u ? dz[j].y : 0.0f,
                                             bits[j] & 4u ? dz[j].z : 0.0f, bits[j] & 8u ? dz[j].w : 0.0f);
                *reinterpret_cast<float4 *>(back.c + (long long)m * K + k) = v;
            }
        }
    }
    mlp_loss_partials(fwd, item, loss, hits);
    mlp_job_stamp(p, fwd, item, 4);
    if (has_back)
        for (int at = 0; at < MLP_JOB_STAMPS; at++)
            mlp_job_stamp(p, back, item, at);
    __syncthreads(); /* W and the scratch, before the block's next item stages over them */
}

// b_staged: mlp_prefetch_weights staged this block's first item's weights.
template <class R>
__device__ void mlp_run_phase(const mlp_params &p, const ge2_opt_scalars &s, int phase, bool b_staged, float *smem)
{
    const mlp_phase ph = p.phases[phase];
    for (int item = blockIdx.x; ph.head && item < ph.items; item += gridDim.x) {
        mlp_head_item(p, p.jobs[ph.first_job], p.jobs[ph.first_job + (ph.n_jobs > 1)], ph.n_jobs > 1, item, b_staged,
                      smem);
        b_staged = false;
    }
    for (int item = blockIdx.x; !ph.head && item < ph.items; item += gridDim.x) {
        /* a chain item runs every job on its rows (its own writes are read
         * back after the __syncthreads that ends each job); otherwise the
         * item is one job's */
        int local;
        const int first = mlp_locate(p, ph, item, &local), end = ph.chain ? ph.first_job + ph.n_jobs : first + 1;
        for (int j = first; j < end; j++) { /* one call site: the kernel's code is its instruction-cache footprint */
            mlp_gemm_item<R>(p, s, p.jobs[j], local, b_staged, smem);
            b_staged = false;
        }
    }
}

__device__ __forceinline__ void mlp_stamp(const mlp_params &p, int at)
{
    if (p.stamps && blockIdx.x == 0 && threadIdx.x == 0) {
        unsigned long long t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        p.stamps[at] = t;
    }
}

// The step. The optimizer's scalars are read from the control block before
// the first barrier and committed by block 0 after its last item: nobody
// reads the control block after the first barrier, so the commit cannot
// race a reader.
template <class R>
__global__ void __launch_bounds__(MLP_THREADS, 1) ge2_mlp_step_kernel(const mlp_params p)
{
    extern __shared__ float4 mlp_smem[];
    float *smem = reinterpret_cast<float *>(mlp_smem);
    __shared__ ge2_opt_scalars scalars;
    cg::grid_group grid = cg::this_grid();
    /* Before the first barrier (see above); the phases' __syncthreads make
     * them the block's long before the last phase uses them. (Worked out in
     * the first barrier's window instead, where thread 0 waits anyway, the
     * one thread's double math made the step slower.) */
    if (threadIdx.x == 0)
        scalars = ge2_opt_scalars_of(&p.cfg, p.ctl);
    mlp_stamp(p, 0);
    bool b_staged;
    if (p.upload.bytes) {
        ge2_copy_share(p.upload, (long long)blockIdx.x * blockDim.x + threadIdx.x,
                       (long long)gridDim.x * blockDim.x);
        auto arrived = grid.barrier_arrive();
        b_staged = mlp_prefetch_weights(p, 0, smem);
        grid.barrier_wait(std::move(arrived));
    } else {
        b_staged = mlp_prefetch_weights(p, 0, smem);
    }
    mlp_stamp(p, 1);
    for (int phase = 0; phase < p.n_phases; phase++) {
        if (phase == p.finalize_phase && blockIdx.x == 0 && threadIdx.x == 0) {
            float loss = 0.0f, hits = 0.0f;
            for (int i = 0; i < p.loss_items; i++) {
                loss += p.loss_partials[i];
                if (p.correct)
                    hits += p.correct_partials[i];
            }
            *p.loss = loss * p.inv_rows;
            if (p.correct)
                *p.correct = hits;
        }
        mlp_run_phase<R>(p, scalars, phase, b_staged, smem);
        if (phase + 1 < p.n_phases) {
            auto arrived = grid.barrier_arrive();
            b_staged = mlp_prefetch_weights(p, phase + 1, smem);
            grid.barrier_wait(std::move(arrived));
            mlp_stamp(p, phase + 2);
        }
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        if (ge2_opt_node_done(p.ctl, 1))
            ge2_opt_commit(p.ctl, &p.cfg, true, &scalars);
        /* the results (loss, metric) were written above by this thread, and
         * the label count by the loss phase, before the grid barriers */
        for (int i = 0; i < p.n_results; i++)
            ge2_copy_share(p.results[i], 0, 1);
        __threadfence_system();
    }
    mlp_stamp(p, p.n_phases + 1);
}

// ----------------------------------------------------------------- launchers

struct ge2_mlp_step {
    mlp_params params;
    mlp_params *launch_params; /* params plus one launch's copies; kept, so a launch allocates nothing */
    float *partials_dev; /* [2, batch]: the loss items' loss and hit partials */
    unsigned long long *stamps_dev; /* the profile_fused option: [n_phases + 2 + n_jobs * MLP_JOB_STAMPS], else NULL */
    const void *kernel;
    int grid;
    char description[160];
};

static ge2_status step_cuda(cudaError_t e, const char *call)
{
    if (e == cudaSuccess)
        return GE2_OK;
    cudaGetLastError();
    return ge2_error(GE2_ERR_CUDA, "ge2 whole-step MLP kernel: %s: %s (%s)", call, cudaGetErrorString(e),
                     cudaGetErrorName(e));
}

static int ceil_div(long long a, long long b) { return (int)((a + b - 1) / b); }

static void set_tile(mlp_job *jb, int tm, int tn)
{
    jb->tm = tm;
    jb->tn = tn;
    jb->tm_shift = jb->tn_shift = 0;
    while ((1 << jb->tm_shift) < tm)
        jb->tm_shift++;
    while ((1 << jb->tn_shift) < tn)
        jb->tn_shift++;
    jb->tiles_n = ceil_div(jb->N, tn);
    jb->items = ceil_div(jb->M, tm) * jb->tiles_n;
    /* either layout of an operand fits in (T + 4)(kc + 4) floats */
    int kc = (MLP_OPERAND_FLOATS / (tm + tn + 2 * MLP_PAD) - MLP_PAD) / 4 * 4;
    int k4 = (jb->K + 3) / 4 * 4;
    jb->kc = k4 < kc ? k4 : kc;
}

// Estimated clocks of one item: a fixed part (a memory round trip, the
// barriers, the reduction and epilogue), staging at ~64 B/clock from L2 and
// FMAs at ~64/clock for 8 warps.
static double item_cost(const mlp_job *jb)
{
    return 2000.0 + (jb->tm + jb->tn) * 4.0 * jb->K / 64.0 + (double)jb->tm * jb->tn * jb->K / 64.0;
}

static int smallest_pow2_at_least(long long n, int floor)
{
    int p = floor;
    while (p < n && p < MLP_MAX_TILE)
        p *= 2;
    return p;
}

// Tiles of a phase's GEMMs, chosen together: its items run in parallel,
// one per block, so the phase takes about its slowest item's time as long
// as all items fit on the grid at once. Start from the largest tiles, then
// keep halving the slowest job's tile while every item still fits.
// (Per-job choice ignored the phase's other jobs and made two waves.)
static void choose_phase_tiles(mlp_params *p, const mlp_phase *ph, int grid)
{
    for (int j = ph->first_job; j < ph->first_job + ph->n_jobs; j++) {
        mlp_job *jb = &p->jobs[j];
        int tn = smallest_pow2_at_least(jb->N, 8);
        int tm = smallest_pow2_at_least(jb->M, 4);
        while (tm * tn > MLP_MAX_OUTPUTS)
            tm > 4 ? tm /= 2 : tn /= 2;
        set_tile(jb, tm, tn);
    }
    for (;;) {
        int items = 0, slowest = -1;
        for (int j = ph->first_job; j < ph->first_job + ph->n_jobs; j++) {
            items += p->jobs[j].items;
            const mlp_job *jb = &p->jobs[j];
            bool can_shrink = jb->tm > 4 || jb->tn > 8;
            if (can_shrink && (slowest < 0 || item_cost(jb) > item_cost(&p->jobs[slowest])))
                slowest = j;
        }
        if (slowest < 0)
            return;
        mlp_job *jb = &p->jobs[slowest], trial = *jb;
        /* halve the longer side */
        if ((jb->tm >= jb->tn && jb->tm > 4) || jb->tn <= 8)
            set_tile(&trial, jb->tm / 2, jb->tn);
        else
            set_tile(&trial, jb->tm, jb->tn / 2);
        if (items - jb->items + trial.items > grid)
            return;
        *jb = trial;
    }
}

static mlp_job gemm_job(int epilogue, int M, int N, int K, const float *a, long long a_rs, long long a_ks,
                        const float *b, long long b_ks, long long b_cs, float *c)
{
    mlp_job jb = {};
    jb.epilogue = epilogue;
    jb.M = M;
    jb.N = N;
    jb.K = K;
    jb.a = a;
    jb.a_rs = a_rs;
    jb.a_ks = a_ks;
    jb.b = b;
    jb.b_ks = b_ks;
    jb.b_cs = b_cs;
    jb.c = c;
    /* 16-byte copies: the base and the stride between contiguous runs aligned */
    jb.a_vec = (uintptr_t)a % 16 == 0 && (a_ks == 1 ? a_rs : a_ks) % 4 == 0;
    jb.b_vec = (uintptr_t)b % 16 == 0 && (b_ks == 1 ? b_cs : b_ks) % 4 == 0;
    jb.opt_offset = jb.db_offset = -1;
    jb.b_early = true; /* the weights; build_jobs decides for the weight gradients */
    set_tile(&jb, 4, 8);
    return jb;
}

static void open_phase(mlp_params *p)
{
    p->phases[p->n_phases++] = (mlp_phase){p->n_jobs, 0, 0, false, false};
}

static void add_job(mlp_params *p, const mlp_job &jb)
{
    p->jobs[p->n_jobs] = jb;
    p->jobs[p->n_jobs].index = p->n_jobs;
    p->n_jobs++;
    p->phases[p->n_phases - 1].n_jobs++;
}

// The row chain's tiles: whole rows of every job, the same rows for all,
// the fewest rows that still give every block an item (at least 4, the
// register tile's side, and a tile of at most 4096 outputs).
static void choose_chain_tiles(mlp_params *p, const mlp_phase *ph, int grid)
{
    int widest = 8;
    for (int j = ph->first_job; j < ph->first_job + ph->n_jobs; j++) {
        mlp_job *jb = &p->jobs[j];
        jb->tn = 8;
        while (jb->tn < jb->N)
            jb->tn *= 2;
        widest = jb->tn > widest ? jb->tn : widest;
    }
    const int M = p->jobs[ph->first_job].M;
    int tm = 4;
    while (ceil_div(M, tm) > grid && 2 * tm * widest <= MLP_MAX_OUTPUTS)
        tm *= 2;
    for (int j = ph->first_job; j < ph->first_job + ph->n_jobs; j++)
        set_tile(&p->jobs[j], tm, p->jobs[j].tn);
}

static mlp_job forward_job(const ge2_mlp_step_desc *d, int l, float *loss_partials)
{
    const ge2_mlp_step_layer *ly = &d->layer[l];
    const bool last = l == d->n_layers - 1;
    mlp_job jb = gemm_job(last ? MLP_EPI_LOSS : MLP_EPI_FORWARD, (int)d->batch, (int)ly->out, (int)ly->in, ly->x,
                          ly->in, 1, ly->w, 1, ly->in, ly->y);
    jb.bias = ly->b;
    jb.relu = ly->act == GE2_ACT_RELU;
    jb.mask = ly->mask;
    jb.mask_row_bytes = ly->mask_row_bytes;
    if (last) {
        jb.labels = d->labels;
        jb.smoothing = d->label_smoothing;
        jb.inv_rows = 1.0f / (float)d->batch;
        jb.dlogits = ly->dz;
        jb.loss_partials = loss_partials;
        jb.correct_partials = d->correct ? loss_partials + d->batch : NULL;
    }
    return jb;
}

/* dz of the layer below l [B, in] = (dz · w) ⊙ relu': A(b, o) = dz[b, o], B(o, i) = w[o, i] */
static mlp_job grad_input_job(const ge2_mlp_step_desc *d, int l)
{
    const ge2_mlp_step_layer *ly = &d->layer[l], *below = &d->layer[l - 1];
    mlp_job dx = gemm_job(MLP_EPI_GRAD_INPUT, (int)d->batch, (int)ly->in, (int)ly->out, ly->dz, ly->out, 1, ly->w,
                          ly->in, 1, below->dz);
    dx.relu = below->act == GE2_ACT_RELU;
    dx.mask = below->mask;
    dx.mask_row_bytes = below->mask_row_bytes;
    return dx;
}

// Whether mlp_head_item runs the chain: the last layer alone (its loss
// job, then the input gradient below it if any), its classes a warp's
// worth, its rows of K floats 16-byte aligned and at most MLP_HEAD_MAX_K,
// its weights staged whole. The warp count is the item's rows.
static bool chain_is_head(const mlp_params *p, const mlp_phase *ph)
{
    const mlp_job *fwd = &p->jobs[ph->first_job], *back = ph->n_jobs > 1 ? fwd + 1 : NULL;
    if (fwd->epilogue != MLP_EPI_LOSS || ph->n_jobs > 2 || fwd->N > GE2_WARP || fwd->K % 4 != 0 ||
        fwd->K > MLP_HEAD_MAX_K || !fwd->a_vec)
        return false;
    mlp_job trial = *fwd;
    set_tile(&trial, MLP_WARPS, smallest_pow2_at_least(fwd->N, 8));
    if (trial.kc < trial.K)
        return false;
    return !back || (back->epilogue == MLP_EPI_GRAD_INPUT && back->N == fwd->K && (uintptr_t)back->c % 16 == 0);
}

// fusion/mlp_step/pattern.h's phase table as jobs. loss_partials: [2, B] floats of scratch.
static void build_jobs(const ge2_mlp_step_desc *d, int grid, float *loss_partials, mlp_params *p)
{
    const int L = d->n_layers, c = d->chain_from;
    for (int l = 0; l < c; l++) {
        open_phase(p);
        add_job(p, forward_job(d, l, loss_partials));
    }
    open_phase(p);
    p->phases[p->n_phases - 1].chain = true;
    for (int l = c; l < L; l++)
        add_job(p, forward_job(d, l, loss_partials));
    for (int l = L - 1; l >= (c > 1 ? c : 1); l--)
        add_job(p, grad_input_job(d, l));
    for (int l = c - 1; l >= 1; l--) {
        open_phase(p);
        add_job(p, grad_input_job(d, l));
    }
    open_phase(p);
    for (int l = L - 1; l >= 0; l--) {
        const ge2_mlp_step_layer *ly = &d->layer[l];
        /* dW [out, in] = dzᵀ · x: A(o, b) = dz[b, o], B(b, i) = x[b, i] */
        mlp_job dw = gemm_job(MLP_EPI_GRAD_WEIGHT, (int)ly->out, (int)ly->in, (int)d->batch, ly->dz, 1, ly->out,
                              ly->x, ly->in, 1, ly->dw);
        dw.opt_offset = ly->dw - d->pools.grads;
        dw.db_offset = ly->db - d->pools.grads;
        /* B is the layer's input: the feed, or made by layer l - 1 in its
         * forward phase or in the chain */
        const int made_in = l == 0 ? -1 : (l - 1 < c ? l - 1 : c);
        dw.b_early = made_in <= p->n_phases - 3;
        add_job(p, dw);
    }
    for (int ph = 0; ph < p->n_phases; ph++) {
        mlp_phase *phase = &p->phases[ph];
        if (phase->chain && chain_is_head(p, phase)) {
            phase->head = true;
            for (int j = phase->first_job; j < phase->first_job + phase->n_jobs; j++)
                set_tile(&p->jobs[j], MLP_WARPS, smallest_pow2_at_least(p->jobs[j].N, 8));
            phase->items = p->jobs[phase->first_job].items;
            continue;
        }
        if (phase->chain) {
            choose_chain_tiles(p, phase, grid);
            phase->items = p->jobs[phase->first_job].items;
            continue;
        }
        choose_phase_tiles(p, phase, grid);
        for (int j = phase->first_job; j < phase->first_job + phase->n_jobs; j++)
            phase->items += p->jobs[j].items;
    }
}

template <class R> static const void *kernel_for(const ge2_opt_slots *slots)
{
    return R::matches(slots) ? (const void *)ge2_mlp_step_kernel<R> : NULL;
}

// The kernel instantiated for the optimizer's rule; NULL for a rule it has
// none for (amsgrad, accumulation: ge2_mlp_step_match refuses them first).
static const void *kernel_of(const ge2_optimizer_config *cfg)
{
    const ge2_opt_slots slots = ge2_opt_slots_of(cfg);
    switch (cfg->kind) {
    case GE2_OPT_ADAM:
        return kernel_for<opt_rule<GE2_OPT_ADAM, false, false, false>>(&slots);
    case GE2_OPT_ADAMW:
        return kernel_for<opt_rule<GE2_OPT_ADAMW, false, false, false>>(&slots);
    case GE2_OPT_SGD:
        return slots.momentum >= 0 ? kernel_for<opt_rule<GE2_OPT_SGD, true, false, false>>(&slots)
                                   : kernel_for<opt_rule<GE2_OPT_SGD, false, false, false>>(&slots);
    default:
        return NULL;
    }
}

static ge2_status check_pools(const ge2_mlp_step_desc *d)
{
    ge2_opt_slots slots = ge2_opt_slots_of(&d->optimizer);
    const ge2_flat_pools *p = &d->pools;
    bool aligned = ((uintptr_t)p->params | (uintptr_t)p->grads | (uintptr_t)p->state) % 16 == 0;
    if (slots.count > p->slots || slots.accum >= 0 || slots.max_exp_avg_sq >= 0)
        return ge2_error(GE2_ERR_UNSUPPORTED, "ge2 whole-step MLP kernel: optimizer state layout not supported");
    if (!aligned || (p->n % 4 != 0 && slots.count > 1))
        return ge2_error(GE2_ERR_UNSUPPORTED, "ge2 whole-step MLP kernel: the flat pools are not float4-aligned");
    return GE2_OK;
}

extern "C" ge2_status ge2_mlp_step_prepare(const ge2_mlp_step_desc *d, ge2_mlp_step **out)
{
    *out = NULL;
    GE2_TRY(check_pools(d));
    const void *kernel = kernel_of(&d->optimizer);
    if (!kernel)
        return ge2_error(GE2_ERR_UNSUPPORTED, "ge2 whole-step MLP kernel: no kernel for optimizer kind %d",
                         (int)d->optimizer.kind);
    int device = 0, sms = 0, per_sm = 0;
    GE2_TRY(step_cuda(cudaGetDevice(&device), "cudaGetDevice"));
    GE2_TRY(step_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute"));
    GE2_TRY(step_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, MLP_SMEM_BYTES),
                      "cudaFuncSetAttribute"));
    GE2_TRY(step_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, MLP_THREADS, MLP_SMEM_BYTES),
                      "cudaOccupancyMaxActiveBlocksPerMultiprocessor"));
    if (per_sm < 1)
        return ge2_error(GE2_ERR_UNSUPPORTED, "ge2 whole-step MLP kernel: does not fit on an SM");
    ge2_mlp_step *s = (ge2_mlp_step *)ge2_calloc(1, sizeof *s);
    mlp_params *launch_params = (mlp_params *)ge2_malloc(sizeof *launch_params);
    if (!s || !launch_params) {
        ge2_free(s);
        ge2_free(launch_params);
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2 whole-step MLP kernel: out of host memory");
    }
    s->launch_params = launch_params;
    s->grid = sms; /* one block per SM: every barrier waits for the fewest blocks */
    s->kernel = kernel;
    /* loss partials: one per loss item, at most one item per row */
    ge2_status st = step_cuda(cudaMalloc((void **)&s->partials_dev, sizeof(float) * 2 * d->batch), "cudaMalloc");
    if (st != GE2_OK) {
        ge2_mlp_step_free(s);
        return st;
    }
    mlp_params *p = &s->params;
    build_jobs(d, s->grid, s->partials_dev, p);
    const mlp_job *loss_job = &p->jobs[p->phases[d->chain_from].first_job + (d->n_layers - 1 - d->chain_from)];
    p->finalize_phase = d->chain_from + 1; /* the phase after the chain, which computes the partials */
    p->loss_items = loss_job->items;
    p->loss_partials = s->partials_dev;
    p->correct_partials = s->partials_dev + d->batch;
    p->loss = d->loss;
    p->correct = d->correct;
    p->inv_rows = 1.0f / (float)d->batch;
    p->cfg = d->optimizer;
    p->pools = d->pools;
    p->ctl = d->control;
    p->loss_node = d->loss_node;
    if (d->profile &&
        cudaMalloc((void **)&s->stamps_dev,
                   sizeof(unsigned long long) * (p->n_phases + 2 + p->n_jobs * MLP_JOB_STAMPS)) == cudaSuccess) {
        p->stamps = s->stamps_dev;
        p->job_stamps = s->stamps_dev + p->n_phases + 2;
        cudaMemset(p->job_stamps, 0, sizeof(unsigned long long) * p->n_jobs * MLP_JOB_STAMPS);
    }
    cudaGetLastError();
    snprintf(s->description, sizeof s->description,
             "ge2 whole-step MLP kernel: %d layers, row chain from layer %d%s, %d phases, %d jobs, grid %d x %d "
             "(cooperative)",
             d->n_layers, d->chain_from, p->phases[d->chain_from].head ? " (a warp per row)" : "", p->n_phases + 1,
             p->n_jobs, s->grid, MLP_THREADS);
    *out = s;
    return GE2_OK;
}

extern "C" ge2_status ge2_mlp_step_launch(const ge2_mlp_step *s, void *stream, const ge2_cuda_copy *upload,
                                          const ge2_cuda_copy *results, int n_results)
{
    /* the step's copies differ per staging slot; the rest was fixed at prepare */
    mlp_params *params = s->launch_params;
    *params = s->params;
    params->upload = upload ? *upload : ge2_cuda_copy{};
    params->n_results = 0;
    int taken = 0; /* results the kernel does itself; the rest follow it */
    for (; taken < n_results && params->n_results < GE2_CUDA_MAX_COPIES; taken++)
        if (results[taken].bytes)
            params->results[params->n_results++] = results[taken];
    cudaLaunchConfig_t lc = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeCooperative;
    attr[0].val.cooperative = 1;
    lc.gridDim = dim3((unsigned)s->grid);
    lc.blockDim = dim3(MLP_THREADS);
    lc.dynamicSmemBytes = MLP_SMEM_BYTES;
    lc.stream = (cudaStream_t)stream;
    lc.attrs = attr;
    lc.numAttrs = 1;
    void *args[] = {(void *)params};
    /* the launch copies the arguments: launch_params may be reused at once */
    GE2_TRY(step_cuda(cudaLaunchKernelExC(&lc, s->kernel, args), "cudaLaunchKernelExC(ge2_mlp_step_kernel)"));
    return ge2_cuda_copy_launch(results + taken, n_results - taken, stream);
}

// the profile_fused option: the last step's phases, printed when the key goes.
static void print_profile(const ge2_mlp_step *s)
{
    static const char *const epilogue[] = {"forward", "loss", "grad_input", "grad_weight"};
    unsigned long long t[MLP_MAX_PHASES + 2 + MLP_MAX_JOBS * MLP_JOB_STAMPS];
    const mlp_params *p = &s->params;
    const int n = p->n_phases + 2;
    if (cudaMemcpy(t, s->stamps_dev, sizeof(unsigned long long) * (n + p->n_jobs * MLP_JOB_STAMPS),
                   cudaMemcpyDeviceToHost) != cudaSuccess) {
        cudaGetLastError();
        return;
    }
    fprintf(stderr, "ge2: whole-step MLP kernel, last step, us per phase (upload, forward.., chain, input "
                    "gradients.., weight gradients and optimizer):");
    for (int i = 1; i < n; i++)
        fprintf(stderr, " %.2f", (double)(t[i] - t[i - 1]) * 1e-3);
    fprintf(stderr, "; total %.2f\n", (double)(t[n - 1] - t[0]) * 1e-3);
    /* each job's item 0: when it started, then its stage, multiply, reduction, epilogue */
    for (int j = 0; j < p->n_jobs; j++) {
        const mlp_job *jb = &p->jobs[j];
        const unsigned long long *js = t + n + j * MLP_JOB_STAMPS;
        fprintf(stderr,
                    "ge2:   job %d %s %dx%dx%d tile %dx%d kc %d, %d items: at %.2f us, stage %.2f, multiply %.2f, "
                    "reduce %.2f, epilogue %.2f\n",
                    j, epilogue[jb->epilogue], jb->M, jb->N, jb->K, jb->tm, jb->tn, jb->kc, jb->items,
                    (double)(js[0] - t[0]) * 1e-3, (double)(js[1] - js[0]) * 1e-3, (double)(js[2] - js[1]) * 1e-3,
                    (double)(js[3] - js[2]) * 1e-3, (double)(js[4] - js[3]) * 1e-3);
    }
}

extern "C" void ge2_mlp_step_free(ge2_mlp_step *s)
{
    if (!s)
        return;
    if (s->stamps_dev) {
        print_profile(s);
        cudaFree(s->stamps_dev);
    }
    cudaFree(s->partials_dev);
    ge2_free(s->launch_params);
    ge2_free(s);
}

extern "C" const char *ge2_mlp_step_describe(const ge2_mlp_step *s) { return s ? s->description : ""; }
