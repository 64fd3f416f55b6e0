/* ge2's own fp32 GEMM for the small problems of an MLP step, with LINEAR's
 * epilogues fused and split-K reduced on chip.
 *
 * Why: at batch 64-256 an MLP step's GEMMs are [64..256] x [10..1024] with
 * k up to 1024. cuBLASLt's fp32 (SIMT) kernels run those on a handful of
 * CTAs and add a split-K reduction kernel and, for the bias gradient, another
 * kernel; each of those costs a graph node, i.e. a few microseconds, more
 * than the arithmetic. This kernel fills the GPU by splitting k over the CTAs
 * of a thread-block cluster (sm_90) and sums the partial tiles through
 * distributed shared memory in split order: one kernel, no workspace, no
 * atomics, deterministic. Everything after the sum (bias, activation, the
 * relu bit-mask, z, act', the bias gradient) happens in the same kernel.
 *
 * The problem, row-major with free strides so that every operand is read
 * where it lies (no transposed copies):
 *
 *   acc(i, j) = sum over l < k of A(i, l) · B(l, j),  i < m, j < n
 *   A(i, l) = a[i·a_m + l·a_k]     B(l, j) = b[l·b_k + j·b_n]
 *
 * and the epilogue writes one of
 *   PLAIN     c(i, j) = acc; row_sums[i] = sum over l of A(i, l) when asked:
 *             LINEAR_GRAD_WEIGHT's dW = dzᵀ·x with db = the row sums of dzᵀ.
 *             The row sums are one more column of B (all ones) in the same
 *             accumulation, so they cost no pass of their own.
 *   BIAS_ACT  z = acc + bias[j]; c = act(z); the z stash and/or relu's
 *             bit-mask [m, ge2_relu_mask_row_bytes(n)] when asked: LINEAR.
 *   DACT      c = acc · act'(saved(i, j)), from the relu bit-mask or from
 *             z / y [m, n]: LINEAR_GRAD_INPUT.
 *
 * A configuration is a tile (the output block one CTA computes) and a split
 * count (CTAs per cluster sharing that block's k range: 1, 2, 4 or 8). The
 * kernel registry (gemm_registry.h) times the candidates against cuBLASLt's;
 * without timing, the first of ge2_tiled_candidates (a work model) runs.
 *
 * Plain C header (host side); the kernels are in gemm_tiled.cu.
 */
#ifndef GE2_KERNELS_CUDA_GEMM_TILED_H
#define GE2_KERNELS_CUDA_GEMM_TILED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "graph/error.h"
#include "graph/ir.h"

typedef enum ge2_tiled_epilogue {
    GE2_TILED_PLAIN,
    GE2_TILED_BIAS_ACT,
    GE2_TILED_DACT,
    GE2_TILED_EPILOGUE_COUNT
} ge2_tiled_epilogue;

/* One problem; device pointers. Pointers not used by the epilogue are NULL. */
typedef struct ge2_tiled_gemm {
    int64_t m, n, k;
    const float *a; /* A(i, l) = a[i·a_m + l·a_k]: [m, k] */
    int64_t a_m, a_k;
    const float *b; /* B(l, j) = b[l·b_k + j·b_n]: [k, n] */
    int64_t b_k, b_n;
    float *c; /* [m, n], row-major */

    ge2_tiled_epilogue epilogue;
    float *row_sums;           /* PLAIN: [m], or NULL */
    ge2_activation act;        /* BIAS_ACT, DACT */
    float slope;               /* leaky relu's */
    bool from_output;          /* DACT: saved is y, not z */
    const float *bias;         /* BIAS_ACT: [n], or NULL */
    float *z;                  /* BIAS_ACT: [m, n] the pre-activation, or NULL */
    uint8_t *mask;             /* BIAS_ACT relu: [m, ge2_relu_mask_row_bytes(n)], or NULL */
    const float *saved;        /* DACT: [m, n] z or y, or NULL */
    const uint8_t *saved_mask; /* DACT relu: [m, ge2_relu_mask_row_bytes(n)], or NULL */
    bool no_pdl;               /* launch without programmatic dependent launch (ge2_kernel_settings.pdl off) */
} ge2_tiled_gemm;

/* Output tiles (rows x columns per CTA). */
typedef enum ge2_tiled_tile {
    GE2_TILED_32X32,
    GE2_TILED_64X32,
    GE2_TILED_64X64,
    GE2_TILED_TILE_COUNT
} ge2_tiled_tile;

/* Most CTAs of one cluster sharing a tile's k range. */
#define GE2_TILED_MAX_SPLITS 8
/* Most configurations ge2_tiled_candidates returns. */
#define GE2_TILED_MAX_CANDIDATES (GE2_TILED_TILE_COUNT * 4)

typedef struct ge2_tiled_config {
    ge2_tiled_tile tile;
    int splits; /* 1, 2, 4 or 8 */
} ge2_tiled_config;

/* gemm_tiled_config.c (plain C): */
/* "32x32", ... */
const char *ge2_tiled_tile_name(ge2_tiled_tile tile);
/* A known tile and 1, 2, 4 or 8 splits (every tile has at least 8 rows per split). */
bool ge2_tiled_config_valid(ge2_tiled_config cfg);
/* "ge2 tiled 32x32 split 4" into buf. */
void ge2_tiled_config_str(ge2_tiled_config cfg, char *buf, size_t size);
/* Parses "32x32:4" (the registry's cache token after "tiled:"); false if malformed. */
bool ge2_tiled_config_parse(const char *text, ge2_tiled_config *out);
void ge2_tiled_config_format(ge2_tiled_config cfg, char *buf, size_t size);

/* gemm_tiled.cu: */
/* Whether the kernel can run g. False with the reason in why (may be NULL)
 * for what it does not take: empty or huge dims, misaligned mask pointers,
 * an epilogue's missing operand. */
bool ge2_tiled_supports(const ge2_tiled_gemm *g, char *why, size_t why_size);
/* The configurations worth timing for g on a GPU with sm_count SMs, into
 * out[0..return). The first is the work model's favourite: fewest waves of
 * the largest per-CTA work that still fills the GPU. */
int ge2_tiled_candidates(const ge2_tiled_gemm *g, int sm_count, ge2_tiled_config *out, int max);

/* Enqueues g with cfg on stream (a cudaStream_t). Capturable: no allocation,
 * no synchronization. `who` names the caller in an error ("linear (node 3)"). */
ge2_status ge2_tiled_gemm_run(const ge2_tiled_gemm *g, ge2_tiled_config cfg, void *stream, const char *who);

#ifdef __cplusplus
}
#endif

#endif /* GE2_KERNELS_CUDA_GEMM_TILED_H */
