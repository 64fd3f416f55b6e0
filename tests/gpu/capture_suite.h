/* main() of the cuda-gemm GPU suites: one test case, one timeout, a skip
 * line (exit 0) on a machine without a device. The device question is asked
 * from a child process (tests/gpu_probe.h), so main() itself makes no CUDA
 * call and Check can fork every test.
 */
#ifndef GE2_TESTS_GPU_CAPTURE_SUITE_H
#define GE2_TESTS_GPU_CAPTURE_SUITE_H

#include <check.h>
#include <stdbool.h>
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

/* tests: n tests made by START_TEST. Returns main()'s exit status. */
static inline int ge2_gpu_suite_main(const char *name, int timeout_s, const TTest *const *tests, int n)
{
    if (!ge2_test_require_gpu(name))
        return EXIT_SUCCESS;
    Suite *s = suite_create(name);
    TCase *tc = tcase_create(name);
    tcase_set_timeout(tc, timeout_s);
    for (int i = 0; i < n; i++)
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
