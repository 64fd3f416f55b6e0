/* graph/alloc: counters are exact, blocks behave, the allocator is the one
 * the build says (jemalloc normally, libc under --config=asan). */
#include "graph/alloc.h"

#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef GE2_NO_JEMALLOC
#include <jemalloc/jemalloc.h>
#endif

static ge2_alloc_stats snap(void)
{
    ge2_alloc_stats s;
    ge2_alloc_stats_get(&s);
    return s;
}

START_TEST(malloc_free_counts)
{
    ge2_alloc_stats a = snap();
    char *p = ge2_malloc(100);
    ck_assert_ptr_nonnull(p);
    memset(p, 0xab, 100);
    ge2_alloc_stats b = snap();
    ck_assert_uint_eq(b.allocations, a.allocations + 1);
    ck_assert_uint_eq(b.frees, a.frees);
    ck_assert_uint_ge(b.bytes_allocated - a.bytes_allocated, 100);
    ck_assert_uint_eq(b.bytes_live - a.bytes_live, b.bytes_allocated - a.bytes_allocated);
    ge2_free(p);
    ge2_alloc_stats c = snap();
    ck_assert_uint_eq(c.frees, a.frees + 1);
    ck_assert_uint_eq(c.bytes_live, a.bytes_live);
    ck_assert_uint_eq(c.bytes_allocated, b.bytes_allocated);
}
END_TEST

START_TEST(zero_and_null)
{
    ge2_alloc_stats a = snap();
    void *p = ge2_malloc(0);
    ck_assert_ptr_nonnull(p);
    ge2_free(p);
    ge2_free(NULL);
    ck_assert_ptr_null(ge2_strdup(NULL));
    ge2_alloc_stats b = snap();
    ck_assert_uint_eq(b.allocations, a.allocations + 1);
    ck_assert_uint_eq(b.frees, a.frees + 1);
    ck_assert_uint_eq(b.bytes_live, a.bytes_live);
}
END_TEST

START_TEST(calloc_zeroes_and_rejects_overflow)
{
    size_t n = 1000;
    int *p = ge2_calloc(n, sizeof(int));
    ck_assert_ptr_nonnull(p);
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(p[i], 0);
    ge2_free(p);

    ge2_alloc_stats a = snap();
    ck_assert_ptr_null(ge2_calloc(SIZE_MAX / 2, 4));
    ge2_alloc_stats b = snap();
    ck_assert_uint_eq(b.allocations, a.allocations);
    ck_assert_uint_eq(b.bytes_live, a.bytes_live);
}
END_TEST

START_TEST(realloc_keeps_contents_and_counts)
{
    ge2_alloc_stats a = snap();
    char *p = ge2_realloc(NULL, 16); /* like malloc */
    ck_assert_ptr_nonnull(p);
    memcpy(p, "0123456789abcde", 16);
    p = ge2_realloc(p, 1 << 20); /* grow: moves in practice */
    ck_assert_ptr_nonnull(p);
    ck_assert_str_eq(p, "0123456789abcde");
    ge2_alloc_stats b = snap();
    ck_assert_uint_eq(b.allocations, a.allocations + 2);
    ck_assert_uint_eq(b.frees, a.frees + 1);
    ck_assert_uint_ge(b.bytes_live - a.bytes_live, 1 << 20);
    ck_assert_ptr_null(ge2_realloc(p, 0)); /* frees */
    ge2_alloc_stats c = snap();
    ck_assert_uint_eq(c.frees, a.frees + 2);
    ck_assert_uint_eq(c.bytes_live, a.bytes_live);
}
END_TEST

START_TEST(strdup_copies)
{
    const char *s = "ge2_matmul: inner dims differ";
    char *d = ge2_strdup(s);
    ck_assert_ptr_nonnull(d);
    ck_assert_ptr_ne(d, s);
    ck_assert_str_eq(d, s);
    ge2_free(d);
}
END_TEST

/* A region that touches no ge2 allocation shows zero deltas: the pattern
 * tests use to prove a training step allocates nothing. */
START_TEST(quiet_region_counts_nothing)
{
    void *held = ge2_malloc(4096);
    ge2_alloc_stats a = snap();
    memset(held, 0, 4096);
    ge2_alloc_stats b = snap();
    ck_assert_uint_eq(b.allocations - a.allocations, 0);
    ck_assert_uint_eq(b.bytes_allocated - a.bytes_allocated, 0);
    ge2_free(held);
}
END_TEST

enum { THREADS = 4, ROUNDS = 20000 };

static void *churn(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        void *p = ge2_malloc((size_t)(i % 512) + 1);
        ck_assert_ptr_nonnull(p);
        ge2_free(p);
    }
    return NULL;
}

START_TEST(threads_count_exactly)
{
    ge2_alloc_stats a = snap();
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, churn, NULL), 0);
    for (int i = 0; i < THREADS; i++)
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
    ge2_alloc_stats b = snap();
    ck_assert_uint_eq(b.allocations - a.allocations, (uint64_t)THREADS * ROUNDS);
    ck_assert_uint_eq(b.frees - a.frees, (uint64_t)THREADS * ROUNDS);
    ck_assert_uint_eq(b.bytes_live, a.bytes_live);
}
END_TEST

START_TEST(backend_is_the_linked_allocator)
{
#ifdef GE2_NO_JEMALLOC
    ck_assert_str_eq(ge2_alloc_backend(), "libc");
#else
    ck_assert_str_eq(ge2_alloc_backend(), "jemalloc");
    /* mallctl exists only in jemalloc: proves it is linked in and live. */
    const char *version = NULL;
    size_t len = sizeof(version);
    ck_assert_int_eq(mallctl("version", &version, &len, NULL, 0), 0);
    ck_assert_ptr_nonnull(version);
    /* Plain malloc is jemalloc's too (static link overrides libc). */
    void *p = malloc(64);
    ck_assert_uint_ge(sallocx(p, 0), 64);
    free(p);
#endif
}
END_TEST

static Suite *alloc_suite(void)
{
    Suite *s = suite_create("alloc");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, malloc_free_counts);
    tcase_add_test(tc, zero_and_null);
    tcase_add_test(tc, calloc_zeroes_and_rejects_overflow);
    tcase_add_test(tc, realloc_keeps_contents_and_counts);
    tcase_add_test(tc, strdup_copies);
    tcase_add_test(tc, quiet_region_counts_nothing);
    tcase_add_test(tc, threads_count_exactly);
    tcase_add_test(tc, backend_is_the_linked_allocator);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(alloc_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
