/* main() of the cuda-gemm GPU suites: one test case, one timeout, a skip
 * line (exit 0) on a machine without a device. The device question is asked
 * from a child process (tests/gpu_probe.h), so main() itself makes no CUDA
 * call and Check can fork every test.
 */
#ifndef GE2_TESTS_GPU_CAPTURE_SUITE_H
#define GE2_TESTS_GPU_CAPTURE_SUITE_H

#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/gpu_probe.h"
#include "tests/support/check_main.h"

/* GE2_TEST_SHORT set and not "0" (the sanitizer's runs): suites cut their
 * step counts. */
static inline bool ge2_gpu_suite_short(void)
{
    const char *s = getenv("GE2_TEST_SHORT");
    return s && s[0] && strcmp(s, "0") != 0;
}

/* The comma-separated list at *p: its next name in [*name, + return value),
 * *p moved past it; -1 at the list's end */
static inline int ge2_gpu_suite_next_name(const char **p, const char **name)
{
    if (!*p || !**p)
        return -1;
    const char *end = strchr(*p, ',');
    const int len = (int)(end ? (size_t)(end - *p) : strlen(*p));
    *name = *p;
    *p = end ? end + 1 : NULL;
    return len;
}

/* Whether test `name` is in the comma-separated list */
static inline bool ge2_gpu_suite_lists(const char *list, const char *name)
{
    const char *p = list, *item;
    for (int len; (len = ge2_gpu_suite_next_name(&p, &item)) >= 0;)
        if ((size_t)len == strlen(name) && strncmp(item, name, (size_t)len) == 0)
            return true;
    return false;
}

/* tests: n tests made by START_TEST. Returns main()'s exit status.
 * GE2_TEST_LIST set: prints the tests' names, one a line, and runs nothing;
 * GE2_TEST_ONLY=a,b: runs only those (an unknown name fails). A sanitizer
 * too slow for a whole suite in one process runs its tests one a process,
 * side by side (gpu_stage/run.sh --sanitize). */
static inline int ge2_gpu_suite_main(const char *name, int timeout_s, const TTest *const *tests, int n)
{
    if (getenv("GE2_TEST_LIST")) {
        for (int i = 0; i < n; i++)
            printf("%s\n", tests[i]->name);
        return EXIT_SUCCESS;
    }
    const char *only = getenv("GE2_TEST_ONLY");
    const char *p = only, *item;
    for (int len; (len = ge2_gpu_suite_next_name(&p, &item)) >= 0;) { /* every name given is one of the suite's */
        bool known = false;
        for (int i = 0; i < n && !known; i++)
            known = (int)strlen(tests[i]->name) == len && strncmp(tests[i]->name, item, (size_t)len) == 0;
        if (!known) {
            fprintf(stderr, "%s: GE2_TEST_ONLY names '%.*s', not one of its tests (GE2_TEST_LIST=1 lists them)\n",
                    name, len, item);
            return EXIT_FAILURE;
        }
    }
    if (!ge2_test_require_gpu(name))
        return EXIT_SUCCESS;
    Suite *s = suite_create(name);
    TCase *tc = tcase_create(name);
    tcase_set_timeout(tc, timeout_s);
    for (int i = 0; i < n; i++)
        if (!only || ge2_gpu_suite_lists(only, tests[i]->name))
            tcase_add_test(tc, tests[i]);
    suite_add_tcase(s, tc);
    return ge2_check_run(s);
}

/* GE2_GPU_SUITE_MAIN("name_test", 600, test_a, test_b, ...) defines main(). */
#define GE2_GPU_SUITE_MAIN(name, timeout_s, ...)                                      \
    int main(void)                                                                  \
    {                                                                               \
        const TTest *const tests_[] = {__VA_ARGS__};                                \
        const int n_ = (int)(sizeof tests_ / sizeof tests_[0]);                     \
        return ge2_gpu_suite_main((name), (timeout_s), tests_, n_);                 \
    }

#endif /* GE2_TESTS_GPU_CAPTURE_SUITE_H */
