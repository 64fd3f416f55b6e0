/* Counted host allocation: see alloc.h for why. */
#include "graph/alloc.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef GE2_NO_JEMALLOC
#include <malloc.h>
/* libc (and ASan, which intercepts it) report a block's usable size. */
static size_t usable_size(void *p) { return malloc_usable_size(p); }
#else
#include <jemalloc/jemalloc.h>
/* sallocx is jemalloc-only: if jemalloc were not the linked allocator this
 * would fail to link rather than silently ask the wrong allocator. GCC 12
 * assumes a `const void *` argument is read and flags fresh (uninitialized)
 * blocks; sallocx reads only jemalloc's metadata, never the block. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
static size_t usable_size(void *p) { return sallocx(p, 0); }
#pragma GCC diagnostic pop
#endif

static _Atomic uint64_t n_allocations;
static _Atomic uint64_t n_frees;
static _Atomic uint64_t n_bytes_allocated;
static _Atomic uint64_t n_bytes_live;

static void count_alloc(void *p)
{
    uint64_t bytes = usable_size(p);
    atomic_fetch_add_explicit(&n_allocations, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&n_bytes_allocated, bytes, memory_order_relaxed);
    atomic_fetch_add_explicit(&n_bytes_live, bytes, memory_order_relaxed);
}

static void count_free(uint64_t bytes)
{
    atomic_fetch_add_explicit(&n_frees, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&n_bytes_live, bytes, memory_order_relaxed);
}

void *ge2_malloc(size_t size)
{
    /* malloc(0) may return NULL on some allocators; a 1-byte block keeps
     * "NULL means out of memory" true everywhere. */
    void *p = malloc(size ? size : 1);
    if (p)
        count_alloc(p);
    return p;
}

void *ge2_calloc(size_t n, size_t size)
{
    if (n == 0 || size == 0)
        return ge2_malloc(0);
    /* Checked here, not left to calloc: ASan aborts on calloc overflow
     * instead of returning NULL. */
    if (n > SIZE_MAX / size)
        return NULL;
    void *p = calloc(n, size);
    if (p)
        count_alloc(p);
    return p;
}

void *ge2_realloc(void *ptr, size_t size)
{
    if (!ptr)
        return ge2_malloc(size);
    if (size == 0) {
        ge2_free(ptr);
        return NULL;
    }
    uint64_t old_bytes = usable_size(ptr);
    void *p = realloc(ptr, size);
    if (!p)
        return NULL;
    count_free(old_bytes);
    count_alloc(p);
    return p;
}

bool ge2_reserve(void **items, int *cap, int n, size_t size, int first)
{
    if (n < *cap)
        return true;
    int grown = *cap ? 2 * *cap : first;
    void *p = ge2_realloc(*items, (size_t)grown * size);
    if (!p)
        return false;
    *items = p;
    *cap = grown;
    return true;
}

void ge2_free(void *ptr)
{
    if (!ptr)
        return;
    count_free(usable_size(ptr));
    free(ptr);
}

char *ge2_strdup(const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *p = ge2_malloc(n);
    if (p)
        memcpy(p, s, n);
    return p;
}

void ge2_alloc_stats_get(ge2_alloc_stats *out)
{
    if (!out)
        return;
    out->allocations = atomic_load_explicit(&n_allocations, memory_order_relaxed);
    out->frees = atomic_load_explicit(&n_frees, memory_order_relaxed);
    out->bytes_allocated = atomic_load_explicit(&n_bytes_allocated, memory_order_relaxed);
    out->bytes_live = atomic_load_explicit(&n_bytes_live, memory_order_relaxed);
}

const char *ge2_alloc_backend(void)
{
#ifdef GE2_NO_JEMALLOC
    return "libc";
#else
    return "jemalloc";
#endif
}
