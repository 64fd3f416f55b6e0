/* The kernel registry's side for ops' CUDA kernels: registered candidates
 * (extension.h: ge2_kernel_candidate_register), timed against the op's own
 * kernel once per problem shape, the choice kept in a cache file beside
 * the GEMM choices. The CUDA backend calls ge2_kernel_choose per launch at
 * prepare, before warm-up and capture. */
#ifndef GE2_KERNELS_CUDA_CANDIDATES_H
#define GE2_KERNELS_CUDA_CANDIDATES_H

#include <stdbool.h>
#include <stddef.h>

#include "graph/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The candidates registered for op; their count in *n. */
const ge2_kernel_candidate *const *ge2_kernel_candidates_of(ge2_op op, int *n);

/* Sets launch->kernel (prepared on launch) and launch->kernel_choice: the
 * op's own kernel when no candidate applies or autotune is off, else the
 * fastest of the op's own and the applicable candidates, timed on scratch
 * copies of the launch's buffers (the real ones are not touched) or taken
 * from the cache. Errors only when even the op's own kernel fails to
 * prepare. */
ge2_status ge2_kernel_choose(ge2_launch *launch);

/* Runs launch l on candidate c from now on (l->kernel, the op's own, was
 * prepared on l): releases the own kernel's state and prepares c; when c
 * does not prepare on l, the op's own kernel again, with the reason in
 * l->kernel_choice. Errors only when the own kernel then fails to prepare. */
ge2_status ge2_kernel_switch_to(ge2_launch *launch, const ge2_kernel_candidate *candidate);

/* The cache file of candidate choices for a GEMM cache path (NULL: none):
 * "<dir>/candidates.txt" beside it, into buf. */
bool ge2_kernel_candidate_cache_path(const char *gemm_cache, char *buf, size_t size);

/* Another choice about how a launch runs (`what`: "epilogue"), remembered
 * like the candidates' per problem (the GPU, the op and its attrs, the
 * precision, the views) in memory and the candidate cache file, so that
 * every process makes it alike once it is timed. recall fills winner
 * (winner_size >= 48) and returns true when the problem has one. */
bool ge2_kernel_choice_recall(const ge2_launch *l, const char *what, char *winner, size_t winner_size);
void ge2_kernel_choice_remember(const ge2_launch *l, const char *what, const char *winner);

/* *t = *l with every view it has data for moved to zeroed device scratch
 * (bufs[in..., out...], at least GE2_MAX_INPUTS + GE2_MAX_OUTPUTS; NULL
 * where none), and no backend_data: a launch to time kernels on without
 * touching the real buffers. false when memory ran out; free bufs with
 * ge2_scratch_launch_free either way. */
bool ge2_scratch_launch_new(const ge2_launch *l, ge2_launch *t, void **bufs);
void ge2_scratch_launch_free(void **bufs);

/* Forgets the in-memory choices (tests). */
void ge2_kernel_candidates_reset(void);

#ifdef __cplusplus
}
#endif

#endif /* GE2_KERNELS_CUDA_CANDIDATES_H */
