/* What the tests and benchmarks look at, or put in place, inside a compiled
 * program: each key's plan, resolved launches and staging slots, the shared
 * arena, the options it runs with and the rewrites the fuse pass made, and
 * a backend wrapped around the program's own (a test's failing allocator, a
 * benchmark's launches that do nothing). Read-only views that stay valid
 * until the next step or ge2_program_free; the program's struct stays
 * private to capture/ (program_internal.h). Not for library code:
 * checkpoint/ and dist/ use capture/program_state.h. */
#ifndef GE2_CAPTURE_PROGRAM_INSPECT_H
#define GE2_CAPTURE_PROGRAM_INSPECT_H

#include <stdbool.h>
#include <stddef.h>

#include "capture/backend.h"
#include "capture/options.h"
#include "capture/program_state.h"

/* One graph key as its steps see it. */
typedef struct ge2_key_view {
    const ge2_key *key;
    const ge2_plan *plan;
    const ge2_exec *exec;      /* its launches, arena and step copies */
    void *const *staging;      /* [GE2_STAGING_BUFFERS] host staging slots */
    void *const *fence;        /* [GE2_STAGING_BUFFERS] each slot's fence (NULL without fences) */
    const bool *in_flight;     /* [GE2_STAGING_BUFFERS] the slot's latest step may still run */
    int next_staging;          /* the slot the key's next step uses */
} ge2_key_view;

/* Key `index` (0 .. ge2_program_key_count - 1, in the order they were
 * made); a view of NULLs for any other index. */
ge2_key_view ge2_program_key_view(const ge2_program *program, int index);
/* The index of the key the latest step of `mode` ran; -1 before any. */
int ge2_program_last_key(const ge2_program *program, ge2_mode mode);
/* The shared arena's backing and its bytes (NULL, 0 before the first key,
 * and under separate_arenas). */
void *ge2_program_arena(const ge2_program *program, size_t *bytes);
/* The options the program runs with (the environment's overrides in). */
const ge2_program_options *ge2_program_options_of(const ge2_program *program);
/* The fused nodes fusion row `pattern`'s rewrite made in the program's
 * graph (0 for a group pattern, or an index out of range). */
int ge2_program_rewritten(const ge2_program *program, int pattern);
/* Runs the program through `backend` from now on and returns the backend it
 * had. The backend context stays the one the program opened, so `backend`
 * is a copy of that backend's table with some entries replaced (a test's
 * failing fences, a benchmark's empty launches); it must outlive the
 * program, or be swapped back first. */
const ge2_backend *ge2_program_swap_backend(ge2_program *program, const ge2_backend *backend);

#endif /* GE2_CAPTURE_PROGRAM_INSPECT_H */
