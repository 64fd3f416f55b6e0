/* The GEMM kernel registry: which kernel each GEMM node runs, one of
 * cuBLASLt's algorithms or ge2's own tiled GEMM (gemm_tiled.h).
 *
 * cuBLASLt's heuristic ranks its algorithms by a model, not by a clock, and
 * for the small, skinny GEMMs of an MLP step its first choice is often not
 * the fastest. So at prepare time (once per graph key, before warm-up and
 * capture) the registry may time the heuristic's top candidates, and their
 * split-K neighbours (1, half, double) that cuBLASLt accepts, together with
 * the tiled GEMM's configurations where that kernel takes the problem, on
 * the node's own buffers and run the fastest (the heuristic's first stays
 * unless another beats it by more than 3%, the timing noise). Without
 * timing the heuristic's first runs (the tiled kernel's model choice if
 * cuBLASLt offers nothing).
 *
 * Operands are not the step's: prepare runs before the key's first step, so
 * only parameters hold real values; feeds and activations hold whatever
 * their buffers hold then (fresh allocations, or a previous key's values in
 * the shared arena). Shapes, layouts, alignments, epilogue and workspace are
 * the step's, and those select and pace a GEMM kernel (fp32, TF32, or bf16
 * on the launch's operand scratch in the arena under precision BF16); values
 * only move second-order effects (all-zero operands draw less power, so may
 * clock higher). Timing on real operands would mean tuning inside the first
 * (eager) step: not done.
 *
 * The lookup:
 *
 *   key (op, epilogue, transposes, m, n, k, batch, dtype, precision (fp32, tf32, bf16in, fp16in), alignments,
 *        workspace, GPU name + SM count, cuBLASLt version, kernel families)
 *     -> in-memory cache -> disk cache -> time the candidates -> remember
 *
 * A cached choice is a cuBLASLt algorithm's opaque configuration; it is only
 * ever used to pick one of the candidates made now (as above), never
 * run as read from disk, so a stale or hostile cache file can cost a re-tune
 * but never run an unsupported configuration. A choice made among a
 * different number of candidates than are offered now (a tile added to the
 * tiled GEMM since, another cuBLASLt) is tuned again: the new candidates
 * were never timed against it.
 *
 * Switches (ge2_kernel_settings, from the compile options):
 *   autotune off         no timing: the heuristic's first candidate (cached
 *                        choices are not used either).
 *   autotune_log         every candidate's time on stderr as it is tuned.
 *   gemm_kernels         only one family: cuBLASLt or the tiled GEMM (where
 *                        the tiled kernel takes the problem; else cuBLASLt).
 *   kernel_cache         the cache file; NULL: no disk cache, memory only.
 *
 * Cache file: text, one entry per line, '#' starts a comment line:
 *   <key> <kernel> <us> <candidates>
 * where <kernel> is a cuBLASLt algorithm (the 64 bytes of
 * cublasLtMatmulAlgo_t as 128 hex digits) or "tiled:<tile>:<splits>".
 * The file is untrusted: a line that fails any check is skipped, never fatal.
 *
 * This header's host part (keys, the cache, the process-wide registry) is
 * plain C and runs without a GPU; the selection itself (ge2_gemm_select,
 * gemm_registry.cu) is declared for .cu files only.
 */
#ifndef GE2_KERNELS_CUDA_GEMM_REGISTRY_H
#define GE2_KERNELS_CUDA_GEMM_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "graph/error.h"
#include "kernels/cuda/gemm_tiled.h"

/* Longest key text, NUL included. */
#define GE2_GEMM_KEY_MAX 256
/* Bytes of a cuBLASLt algorithm's configuration (cublasLtMatmulAlgo_t). */
#define GE2_GEMM_ALGO_BYTES 64
/* Cache files larger than this are not read (a cache holds a few hundred lines). */
#define GE2_GEMM_CACHE_MAX_FILE_BYTES ((size_t)4 << 20)

/* One GEMM problem as cuBLASLt runs it (column-major): D [m, n] = op(A) · op(B),
 * op(A) [m, k], op(B) [k, n], `batch` times. */
typedef struct ge2_gemm_key {
    const char *op;       /* ge2 op name: "linear", "matmul", "linear_grad_weight", ... */
    const char *epilogue; /* cuBLASLt epilogue: "DEFAULT", "RELU_BIAS", ... */
    bool trans_a, trans_b;
    int64_t m, n, k, batch;
    const char *dtype; /* "f32" */
    bool tf32;
    bool bf16; /* precision BF16: bf16 copies of the operands ("bf16in" in the key) */
    bool f16;  /* precision FP16: fp16 copies ("fp16in") */
    uint32_t align_a, align_b, align_d; /* bytes the heuristic was told it may assume */
    uint64_t workspace_bytes;
    const char *gpu; /* device name; anything outside [A-Za-z0-9._-] is written as '_' */
    int sm_count;
    int lt_version; /* cublasLtGetVersion() */
    const char *kernels; /* the families timed: "lt", "tiled" or "lt+tiled" */
} ge2_gemm_key;

/* Writes the key as one whitespace-free token, e.g.
 * "linear:RELU_BIAS:TN:m256:n64:k784:b1:f32:fp32:a256.256.256:ws33554432:NVIDIA_H200:sm132:lt130100:lt+tiled".
 * Returns GE2_ERR_INVALID_ARGUMENT (message names the key's op) if it does not fit in `size`. */
ge2_status ge2_gemm_key_format(const ge2_gemm_key *key, char *buf, size_t size);

/* What the registry remembers for one key. */
typedef struct ge2_gemm_choice {
    bool tiled;                        /* the winner is ge2's tiled GEMM ... */
    ge2_tiled_config config;           /* ... in this configuration */
    uint8_t algo[GE2_GEMM_ALGO_BYTES]; /* else cublasLtMatmulAlgo_t of the winner, as bytes */
    double us;                         /* its median time per GEMM, microseconds */
    int n_candidates;                  /* how many candidates were timed */
} ge2_gemm_choice;

typedef struct ge2_gemm_cache_entry {
    char key[GE2_GEMM_KEY_MAX];
    ge2_gemm_choice choice;
} ge2_gemm_cache_entry;

/* An in-memory cache; zero-initialized is empty. */
typedef struct ge2_gemm_cache {
    ge2_gemm_cache_entry *entries;
    int n, cap;
} ge2_gemm_cache;

void ge2_gemm_cache_clear(ge2_gemm_cache *cache);
/* The entry for key, or NULL. */
const ge2_gemm_choice *ge2_gemm_cache_find(const ge2_gemm_cache *cache, const char *key);
/* Adds or replaces key's entry. key must be a valid key token. */
ge2_status ge2_gemm_cache_put(ge2_gemm_cache *cache, const char *key, const ge2_gemm_choice *choice);
/* Merges the entries of cache-file text (len bytes, need not be NUL-terminated)
 * into cache; a later line for the same key replaces an earlier one. Malformed
 * lines are skipped and counted in *bad_lines (may be NULL). Fails only when
 * out of memory. */
ge2_status ge2_gemm_cache_parse(ge2_gemm_cache *cache, const char *text, size_t len, int *bad_lines);
/* One entry as a cache-file line, '\n' included. */
ge2_status ge2_gemm_cache_format_line(const char *key, const ge2_gemm_choice *choice, char *buf, size_t size);
/* A missing file is an empty cache (GE2_OK); an unreadable or oversized one is GE2_ERR_IO. */
ge2_status ge2_gemm_cache_load(ge2_gemm_cache *cache, const char *path, int *bad_lines);
/* Writes the whole cache to path through a temporary file and rename, so a
 * reader never sees half a file; creates the missing parent folders. */
ge2_status ge2_gemm_cache_save(const ge2_gemm_cache *cache, const char *path);

/* ------------------------------------------------ the process-wide registry */

/* How each prepared GEMM got its algorithm. */
typedef enum ge2_gemm_source {
    GE2_GEMM_HEURISTIC, /* cuBLASLt's first: tuning off, or nothing to choose from */
    GE2_GEMM_TUNED,     /* timed now */
    GE2_GEMM_CACHED,    /* a previous timing, from memory or the cache file */
    GE2_GEMM_SOURCE_COUNT
} ge2_gemm_source;

typedef struct ge2_gemm_selection {
    ge2_gemm_source source;
    bool tiled;              /* ge2's tiled GEMM runs, in `config` (else cuBLASLt's algos[0]) */
    ge2_tiled_config config;
    double us;        /* TUNED/CACHED: the winner's median time per GEMM */
    int n_candidates; /* candidates the heuristic offered (TUNED/CACHED: that were timed) */
} ge2_gemm_selection;

/* " (tuned 3.1 us of 8 candidates)", " (cached ...)" or " (heuristic, 8 candidates)". */
void ge2_gemm_selection_str(const ge2_gemm_selection *sel, char *buf, size_t size);

/* Counters since the process started (or the last reset), for tests and reports. */
typedef struct ge2_gemm_registry_stats {
    int64_t tuned;      /* GEMM nodes whose candidates were timed */
    int64_t timings;    /* candidate measurements (one per candidate per tuned node) */
    int64_t hits;       /* nodes served from the cache */
    int64_t heuristic;  /* nodes given the heuristic's first */
    int64_t bad_lines;  /* cache-file lines skipped as malformed */
} ge2_gemm_registry_stats;

void ge2_gemm_registry_stats_get(ge2_gemm_registry_stats *out);
/* The remembered choice for key: memory first, the cache file `path`
 * (NULL: none) read once (on the first lookup after start or reset). */
bool ge2_gemm_registry_lookup(const char *path, const char *key, ge2_gemm_choice *out);
/* Remembers a choice in memory and rewrites the cache file `path` (NULL:
 * memory only). A file that cannot be written costs one warning line on
 * stderr, not an error: the choice still holds for this process. */
ge2_status ge2_gemm_registry_store(const char *path, const char *key, const ge2_gemm_choice *choice);
/* Counts one selection in the stats (the .cu side reports through this). */
void ge2_gemm_registry_count(ge2_gemm_source source, int timings);
/* Forgets the in-memory cache and zeroes the stats; the next lookup re-reads the file. */
void ge2_gemm_registry_reset(void);

#ifdef __cplusplus
}
#endif

/* ------------------------------------------------ selection (nvcc only) */
#ifdef __CUDACC__
#include "kernels/cuda/check.h"

#include <cublasLt.h>

/* One prepared GEMM, exactly as the node's launch will run it (C = D, alpha 1, beta 0). */
typedef struct ge2_gemm_problem {
    const char *epilogue; /* the descriptor's epilogue, by name (for the key) */
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t desc; /* epilogue pointers already set */
    cublasLtMatrixLayout_t la, lb, ld;
    const void *a, *b;
    void *d;
    void *workspace;
    size_t workspace_bytes;
    cudaStream_t stream;
    /* what the heuristic was told a, b and d are aligned to (the plan's), for the key */
    uint32_t align_a, align_b, align_d;
} ge2_gemm_problem;

/* Chooses among cuBLASLt's cands[0..n) (and their split-K neighbours) and,
 * when tiled is not NULL (the problem bound to the same buffers, and
 * ge2_tiled_supports it), the tiled GEMM's configurations. A cuBLASLt
 * winner is written to cands[0], the one a launch runs; *sel says which
 * family won (sel->tiled, sel->config) and how. Timed on pb's buffers as
 * they are at prepare (see the top of the file).
 * Timing writes only the launch's outputs, which are saved before and
 * restored after, so a prepare never changes what the step computes. */
ge2_status ge2_gemm_select(const ge2_launch *launch, const ge2_gemm_problem *pb,
                           cublasLtMatmulHeuristicResult_t *cands, int n, const ge2_tiled_gemm *tiled,
                           ge2_gemm_selection *sel);
#endif

#endif /* GE2_KERNELS_CUDA_GEMM_REGISTRY_H */
