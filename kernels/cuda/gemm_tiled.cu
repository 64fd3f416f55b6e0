// ge2's own fp32 GEMM for small problems: cluster split-K, LINEAR's
// epilogues fused. What and why: gemm_tiled.h.
//
// One CTA computes a BM x BN block of acc over its share of k, each thread
// a TM x TN register block, operands staged through shared memory BK
// columns of k at a time by cp.async, STAGES slices deep. The CTAs sharing a block form one cluster
// along z; each leaves its partial block in its shared memory, and after a
// cluster barrier CTA r sums rows [r·BM/S, (r+1)·BM/S) of all S partials in
// rank order, reading its peers' shared memory directly, and runs the
// epilogue on them. The order of the sum is fixed, so results do not depend
// on which CTA finishes first.
#include "kernels/cuda/gemm_tiled.h"

#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "kernels/activation_math.h"
#include "kernels/relu_mask.h"
}

#include "kernels/cuda/cp_async.h"
#include "kernels/cuda/pdl.h"
namespace cg = cooperative_groups;

#define BK 16
// 256 threads per CTA whatever the tile: the epilogue walks the block's
// elements with dependent global reads (saved, bias), and fewer threads
// means more of those round trips each (64-thread CTAs were 2x slower on
// the small backward GEMMs).
#define THREADS 256
// Shared rows are padded so that the k-fast operand's transposing copy
// (consecutive threads write consecutive k, i.e. different rows) does not
// hit one bank 16 times; 4 keeps the rows float4-aligned.
#define PAD 4
// Slices of k in shared memory at once: loads run STAGES - 1 slices ahead
// of the multiply, so a CTA's few slices (k is split over the cluster) are
// mostly all in flight together instead of one memory latency each.
#define STAGES 4

// ------------------------------------------------------------------ kernels

// The epilogue of one summed element acc(i, j); every lane of a warp calls it
// for the same row i and 32 consecutive columns j (relu's mask word is one
// ballot). row_bytes: the relu bit-mask's row length.
__device__ __forceinline__ void ge2_tiled_epilogue_at(const ge2_tiled_gemm &g, int64_t i, int64_t j, float v,
                                                      int64_t row_bytes)
{
    const bool in = j < g.n;
    const int64_t at = i * g.n + j;
    switch (g.epilogue) {
    case GE2_TILED_PLAIN:
        if (in && g.c)
            g.c[at] = v;
        else if (j == g.n && g.row_sums)
            g.row_sums[i] = v;
        break;
    case GE2_TILED_BIAS_ACT: {
        const float z = v + (in && g.bias ? g.bias[j] : 0.0f);
        if (in && g.z)
            g.z[at] = z;
        if (in && g.c)
            g.c[at] = ge2_act_f32(g.act, z, g.slope);
        if (g.mask) {
            // relu: y > 0 exactly where z > 0; columns past n are padding, 0
            const unsigned bits = __ballot_sync(0xffffffffu, in && z > 0.0f);
            const int64_t word = j / 32;
            if ((threadIdx.x & 31) == 0 && word * 4 < row_bytes)
                reinterpret_cast<uint32_t *>(g.mask + i * row_bytes)[word] = bits;
        }
        break;
    }
    case GE2_TILED_DACT:
        if (in) {
            const float d = g.saved_mask ? (float)ge2_relu_mask_bit(g.saved_mask + i * row_bytes, j)
                          : g.saved      ? ge2_act_grad_f32(g.act, g.saved[at], g.from_output, g.slope)
                                         : 1.0f;
            g.c[at] = v * d;
        }
        break;
    default:
        break;
    }
}

// A_K_FAST: a_k == 1 (consecutive threads read along k), else along m.
// B_N_FAST: b_n == 1 (consecutive threads read along n), else along k.
// N consecutive floats from shared memory in one load (N = 2 or 4, aligned).
template <int N> __device__ __forceinline__ void load_shared(const float *p, float *out)
{
    if (N == 4) {
        const float4 v = *reinterpret_cast<const float4 *>(p);
        out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w;
    } else {
        const float2 v = *reinterpret_cast<const float2 *>(p);
        out[0] = v.x, out[1] = v.y;
    }
}

// Each thread keeps a TM x TN block of acc (TM, TN = 2 or 4).
template <int BM, int BN, int TM, int TN, bool A_K_FAST, bool B_N_FAST>
__global__ void __launch_bounds__(THREADS) ge2_tiled_gemm_kernel(const ge2_tiled_gemm g, const int splits)
{
    static_assert((BM / TM) * (BN / TN) == THREADS, "one TM x TN block per thread");
    static_assert(BN % 32 == 0, "a warp's epilogue covers whole 32-column mask words");
    constexpr int A_PER = BM * BK / THREADS, B_PER = BK * BN / THREADS;
    constexpr int AS = BM + PAD, BS = BN + PAD;
    constexpr int PIPE = STAGES * BK * (AS + BS);
    // The pipeline's slices, then (once the multiply is done) this CTA's
    // partial block in the same memory: peers read it through DSMEM.
    __shared__ __align__(16) float smem[PIPE > BM * BN ? PIPE : BM * BN];
    float(*As)[BK][AS] = reinterpret_cast<float(*)[BK][AS]>(smem);                // [STAGES][BK][BM], k-major
    float(*Bs)[BK][BS] = reinterpret_cast<float(*)[BK][BS]>(smem + STAGES * BK * AS); // [STAGES][BK][BN]
    float *Cs = smem;                                                               // [BM, BN], row-major

    const int tid = threadIdx.x;
    const int tx = tid % (BN / TN), ty = tid / (BN / TN);
    const int64_t m0 = (int64_t)blockIdx.y * BM, n0 = (int64_t)blockIdx.x * BN;
    const int split = blockIdx.z; // the cluster spans z: this is the CTA's rank in it
    const int64_t k_tiles = (g.k + BK - 1) / BK, per = (k_tiles + splits - 1) / splits;
    const int64_t kt_begin = split * per, kt_end = min(k_tiles, kt_begin + per);
    const bool ones = g.row_sums != NULL; // B's column n is all ones: the row sums

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++)
            acc[i][j] = 0.0f;

    // Element e of a slice -> (row, k) of A's and (k, column) of B's, so that
    // consecutive threads read consecutive addresses.
    auto a_coord = [](int e, int &mm, int &kk) {
        if (A_K_FAST) { kk = e % BK; mm = e / BK; } else { mm = e % BM; kk = e / BM; }
    };
    auto b_coord = [](int e, int &kk, int &nn) {
        if (B_N_FAST) { nn = e % BN; kk = e / BN; } else { kk = e % BK; nn = e / BK; }
    };
    // Slice kt into stage st, asynchronously; out of range reads zero-fill.
    auto issue = [&](int64_t kt, int st) {
        const int64_t k0 = kt * BK;
#pragma unroll
        for (int r = 0; r < A_PER; r++) {
            int mm, kk;
            a_coord(tid + r * THREADS, mm, kk);
            const int64_t i = m0 + mm, l = k0 + kk;
            const bool ok = i < g.m && l < g.k;
            cp_async_f32(&As[st][kk][mm], ok ? g.a + i * g.a_m + l * g.a_k : g.a, ok);
        }
#pragma unroll
        for (int r = 0; r < B_PER; r++) {
            int kk, nn;
            b_coord(tid + r * THREADS, kk, nn);
            const int64_t l = k0 + kk, j = n0 + nn;
            if (ones && j == g.n) {
                Bs[st][kk][nn] = l < g.k ? 1.0f : 0.0f;
            } else {
                const bool ok = l < g.k && j < g.n;
                cp_async_f32(&Bs[st][kk][nn], ok ? g.b + l * g.b_k + j * g.b_n : g.b, ok);
            }
        }
    };

    // Operands may be the previous kernel's outputs (programmatic dependent launch).
    ge2_pdl_wait();
    // STAGES - 1 slices in flight before the first multiply; one group per
    // slice, empty groups included, so wait_group counts slices.
    const int64_t n_slices = kt_end > kt_begin ? kt_end - kt_begin : 0;
#pragma unroll
    for (int st = 0; st < STAGES - 1; st++) {
        if (st < n_slices)
            issue(kt_begin + st, st);
        cp_async_commit();
    }
    for (int64_t t = 0; t < n_slices; t++) {
        cp_async_wait<STAGES - 2>(); // slice t has landed (this thread's part)
        __syncthreads();             // ... everyone's; and slice t - 1's stage is free
        const int64_t next = t + STAGES - 1;
        if (next < n_slices)
            issue(kt_begin + next, (int)(next % STAGES));
        cp_async_commit();
        const int st = (int)(t % STAGES);
#pragma unroll
        for (int kk = 0; kk < BK; kk++) {
            float av[TM], bv[TN];
            load_shared<TM>(&As[st][kk][ty * TM], av);
            load_shared<TN>(&Bs[st][kk][tx * TN], bv);
#pragma unroll
            for (int i = 0; i < TM; i++)
#pragma unroll
                for (int j = 0; j < TN; j++)
                    acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
        }
    }
    cp_async_wait<0>(); // only empty groups are left; the slices' memory becomes Cs
    __syncthreads();
    // The next kernel may start launching; it waits for this grid's end before reading.
    ge2_pdl_launch_dependents();
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++)
            Cs[(ty * TM + i) * BN + tx * TN + j] = acc[i][j];

    if (splits > 1)
        cg::this_cluster().sync(); // every partial block is in place
    else
        __syncthreads();

    // This CTA's rows of the block: summed over the cluster in rank order, then the epilogue.
    const int rows = BM / splits, row0 = split * rows;
    const int64_t row_bytes = ge2_relu_mask_row_bytes(g.n);
    for (int e = tid; e < rows * BN; e += THREADS) {
        const int r = row0 + e / BN, col = e % BN;
        const int64_t i = m0 + r;
        if (i >= g.m) // a whole warp: its 32 elements share a row
            continue;
        float v = 0.0f;
        if (splits > 1) {
            // every peer's element first (independent loads, one latency), then the sum in rank order
            cg::cluster_group cluster = cg::this_cluster();
            float part[GE2_TILED_MAX_SPLITS];
#pragma unroll
            for (int s = 0; s < GE2_TILED_MAX_SPLITS; s++)
                part[s] = s < splits ? cluster.map_shared_rank(Cs, s)[r * BN + col] : 0.0f;
#pragma unroll
            for (int s = 0; s < GE2_TILED_MAX_SPLITS; s++)
                if (s < splits)
                    v += part[s];
        } else {
            v = Cs[r * BN + col];
        }
        ge2_tiled_epilogue_at(g, i, n0 + col, v, row_bytes);
    }
    // The last column block also clears the mask words past its columns (row padding).
    if (g.mask && blockIdx.x == gridDim.x - 1) {
        const int64_t first = (n0 + BN) / 32, words = row_bytes / 4;
        for (int64_t e = tid; e < rows * (words - first); e += THREADS) {
            const int64_t i = m0 + row0 + e / (words - first);
            if (i < g.m)
                reinterpret_cast<uint32_t *>(g.mask + i * row_bytes)[first + e % (words - first)] = 0u;
        }
    }
    if (splits > 1)
        cg::this_cluster().sync(); // peers may still be reading this CTA's Cs
}

// ---------------------------------------------------------------- launchers

typedef void (*tiled_kernel_fn)(const ge2_tiled_gemm, const int);

typedef struct tile_info {
    int bm, bn, threads;
    tiled_kernel_fn kernel[2][2]; // [A_K_FAST][B_N_FAST]
} tile_info;

#define TILE_ROW(BM, BN, TM, TN)                                                                            \
    {BM, BN, THREADS,                                                                                       \
     {{ge2_tiled_gemm_kernel<BM, BN, TM, TN, false, false>, ge2_tiled_gemm_kernel<BM, BN, TM, TN, false, true>}, \
      {ge2_tiled_gemm_kernel<BM, BN, TM, TN, true, false>, ge2_tiled_gemm_kernel<BM, BN, TM, TN, true, true>}}}

// In ge2_tiled_tile order (gemm_tiled_config.c names them).
static const tile_info tiles[GE2_TILED_TILE_COUNT] = {
    TILE_ROW(32, 32, 2, 2),
    TILE_ROW(64, 32, 4, 2),
    TILE_ROW(64, 64, 4, 4),
};

static int64_t ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

static int64_t out_cols(const ge2_tiled_gemm *g)
{
    return g->n + (g->row_sums ? 1 : 0);
}

extern "C" bool ge2_tiled_supports(const ge2_tiled_gemm *g, char *why, size_t why_size)
{
    const char *reason = NULL;
    // grid.y counts 32-row blocks (at most 65535); int32 element offsets are never formed
    if (g->m < 1 || g->n < 1 || g->k < 1)
        reason = "an empty dimension";
    else if (g->m > 65535 * 32 || g->n > ((int64_t)1 << 30) || g->k > ((int64_t)1 << 30))
        reason = "dimensions too large";
    else if (!g->a || !g->b)
        reason = "no operand";
    else if ((unsigned)g->epilogue >= GE2_TILED_EPILOGUE_COUNT)
        reason = "unknown epilogue";
    else if (g->row_sums && g->epilogue != GE2_TILED_PLAIN)
        reason = "row sums with a non-plain epilogue";
    else if (g->mask && (g->epilogue != GE2_TILED_BIAS_ACT || g->act != GE2_ACT_RELU || (uintptr_t)g->mask % 4))
        reason = "a relu mask that is not 4-byte aligned or not relu's";
    else if (g->saved_mask && g->act != GE2_ACT_RELU)
        reason = "a bit-mask for an activation other than relu";
    else if (g->epilogue == GE2_TILED_DACT && (!g->c || (g->act != GE2_ACT_NONE && !g->saved && !g->saved_mask)))
        reason = "act' without its output or saved operand";
    else if (!g->c && !g->row_sums && !g->z && !g->mask)
        reason = "nothing to write";
    if (reason && why)
        snprintf(why, why_size, "%s", reason);
    return reason == NULL;
}

// Relative cost of cfg in the work model: waves of CTAs times one CTA's
// time, counted in FMAs per thread plus a fixed cost per k slice (loads,
// barriers) and per summed partial.
static double model_cost(const ge2_tiled_gemm *g, ge2_tiled_config cfg, int sm_count)
{
    const tile_info *t = &tiles[cfg.tile];
    const int64_t k_tiles = ceil_div(g->k, BK);
    const int64_t ctas = ceil_div(g->m, t->bm) * ceil_div(out_cols(g), t->bn) * cfg.splits;
    const int64_t waves = ceil_div(ctas, sm_count > 0 ? sm_count : 1);
    const double slice = (double)t->bm * t->bn * BK / t->threads + 40.0;
    const double reduce = cfg.splits > 1 ? 8.0 * cfg.splits * t->bm * t->bn / t->threads : 0.0;
    return (double)waves * ((double)ceil_div(k_tiles, cfg.splits) * slice + reduce);
}

extern "C" int ge2_tiled_candidates(const ge2_tiled_gemm *g, int sm_count, ge2_tiled_config *out, int max)
{
    const int64_t k_tiles = ceil_div(g->k, BK);
    ge2_tiled_config all[GE2_TILED_MAX_CANDIDATES];
    int n = 0;
    for (int t = 0; t < GE2_TILED_TILE_COUNT; t++) {
        const int64_t blocks = ceil_div(g->m, tiles[t].bm) * ceil_div(out_cols(g), tiles[t].bn);
        for (int s = 1; s <= GE2_TILED_MAX_SPLITS; s *= 2) {
            // at least two k slices per CTA, and no more CTAs than a few waves
            if (s > 1 && (k_tiles < 2 * s || blocks * s > 4 * (int64_t)sm_count))
                continue;
            all[n++] = (ge2_tiled_config){(ge2_tiled_tile)t, s};
        }
    }
    // the model's favourite first
    int best = 0;
    for (int i = 1; i < n; i++)
        if (model_cost(g, all[i], sm_count) < model_cost(g, all[best], sm_count))
            best = i;
    int m = 0;
    if (n > 0 && max > 0)
        out[m++] = all[best];
    for (int i = 0; i < n && m < max; i++)
        if (i != best)
            out[m++] = all[i];
    return m;
}

extern "C" ge2_status ge2_tiled_gemm_run(const ge2_tiled_gemm *g, ge2_tiled_config cfg, void *stream,
                                        const char *who)
{
    char why[96];
    if (!ge2_tiled_supports(g, why, sizeof why))
        return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_%s: tiled GEMM [%lld, %lld] x [%lld, %lld]: %s", who,
                         (long long)g->m, (long long)g->k, (long long)g->k, (long long)g->n, why);
    if (!ge2_tiled_config_valid(cfg))
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_%s: tiled GEMM: no configuration tile %d split %d", who,
                         (int)cfg.tile, cfg.splits);
    const tile_info *t = &tiles[cfg.tile];
    cudaLaunchConfig_t lc;
    memset(&lc, 0, sizeof lc);
    lc.gridDim = dim3((unsigned)ceil_div(out_cols(g), t->bn), (unsigned)ceil_div(g->m, t->bm), (unsigned)cfg.splits);
    lc.blockDim = dim3((unsigned)t->threads, 1, 1);
    lc.stream = (cudaStream_t)stream;
    cudaLaunchAttribute attr[2];
    memset(attr, 0, sizeof attr);
    unsigned n_attr = 0;
    if (cfg.splits > 1) {
        attr[n_attr].id = cudaLaunchAttributeClusterDimension;
        attr[n_attr].val.clusterDim.x = 1;
        attr[n_attr].val.clusterDim.y = 1;
        attr[n_attr].val.clusterDim.z = (unsigned)cfg.splits;
        n_attr++;
    }
    ge2_cuda_pdl_attribute(attr, &n_attr, !g->no_pdl);
    lc.attrs = attr;
    lc.numAttrs = n_attr;
    const ge2_tiled_gemm arg = *g;
    const int splits = cfg.splits;
    cudaError_t e = cudaLaunchKernelEx(&lc, t->kernel[g->a_k == 1][g->b_n == 1], arg, splits);
    if (e != cudaSuccess) {
        cudaGetLastError();
        char name[48];
        ge2_tiled_config_str(cfg, name, sizeof name);
        return ge2_error(GE2_ERR_CUDA, "ge2_%s: %s [%lld, %lld] x [%lld, %lld]: %s (%s)", who, name,
                         (long long)g->m, (long long)g->k, (long long)g->k, (long long)g->n, cudaGetErrorName(e),
                         cudaGetErrorString(e));
    }
    return GE2_OK;
}
