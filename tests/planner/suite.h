/* The planner suites' main(): one test case holding the given tests. */
#ifndef GE2_TESTS_PLANNER_SUITE_H
#define GE2_TESTS_PLANNER_SUITE_H

#include <check.h>
#include <stdlib.h>

/* Runs tests[0..n) (Check forks each) with a per-test timeout; main's exit status. */
static inline int planner_run_tests(const char *name, const TTest **tests, int n, double timeout_s)
{
    Suite *s = suite_create(name);
    TCase *tc = tcase_create(name);
    tcase_set_timeout(tc, timeout_s);
    for (int i = 0; i < n; i++)
        tcase_add_test(tc, tests[i]);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif /* GE2_TESTS_PLANNER_SUITE_H */
