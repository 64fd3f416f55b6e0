/* Host allocation for all of ge2, counted.
 *
 * Every host allocation in ge2 goes through these wrappers so that tests can
 * prove the steady-state training step allocates nothing: read
 * ge2_alloc_stats_get() before and after a step and compare `allocations`.
 * The process allocator is jemalloc (linked statically through
 * //third_party:jemalloc); under --config=asan it is libc's (so ASan sees every
 * block), signalled by GE2_NO_JEMALLOC. Byte counts are usable sizes (what the
 * allocator really handed out), not requested sizes.
 *
 * All functions are thread-safe; the counters are relaxed atomics, so a
 * snapshot taken while other threads allocate is approximate, never torn.
 * Failure returns NULL (callers report GE2_ERR_OUT_OF_MEMORY); nothing aborts.
 */
#ifndef GE2_GRAPH_ALLOC_H
#define GE2_GRAPH_ALLOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ge2_alloc_stats {
    uint64_t allocations;     /* successful ge2_malloc/calloc/strdup/realloc calls */
    uint64_t frees;           /* blocks released (ge2_free, and realloc's old block) */
    uint64_t bytes_allocated; /* usable bytes handed out, cumulative */
    uint64_t bytes_live;      /* usable bytes currently held */
} ge2_alloc_stats;

/* size 0 still returns a unique, freeable block (counted like any other). */
void *ge2_malloc(size_t size);
/* Zeroed n * size bytes; NULL if n * size overflows. */
void *ge2_calloc(size_t n, size_t size);
/* ptr NULL: like ge2_malloc. size 0: frees ptr and returns NULL. Otherwise
 * counts one allocation and one free (the old block); on failure ptr is
 * untouched and still owned by the caller. */
void *ge2_realloc(void *ptr, size_t size);
/* NULL is a no-op (not counted). */
void ge2_free(void *ptr);
/* NULL in, NULL out. */
char *ge2_strdup(const char *s);
/* Room for element n of the array *items (capacity *cap elements of size
 * bytes): when n has reached the capacity, doubles it (from first when
 * empty). false when out of memory, *items and *cap untouched: the caller
 * says what it was growing. */
bool ge2_reserve(void **items, int *cap, int n, size_t size, int first);

void ge2_alloc_stats_get(ge2_alloc_stats *out);
/* "jemalloc" or "libc": which allocator the counted blocks come from. */
const char *ge2_alloc_backend(void);

#ifdef __cplusplus
}
#endif

#endif /* GE2_GRAPH_ALLOC_H */
