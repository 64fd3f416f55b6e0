/* The planner suites' main(): one test case holding the given tests; and
 * the check that a call failed with the status and message it should. */
#ifndef GE2_TESTS_PLANNER_SUITE_H
#define GE2_TESTS_PLANNER_SUITE_H

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "ge2/ge2.h"

/* got is want, and ge2_last_error() contains a (and b unless NULL). */
static inline void expect_error(ge2_status got, ge2_status want, const char *a, const char *b)
{
    ck_assert_msg(got == want, "got %s, want %s (%s)", ge2_status_name(got), ge2_status_name(want), ge2_last_error());
    ck_assert_msg(strstr(ge2_last_error(), a), "'%s' lacks '%s'", ge2_last_error(), a);
    if (b)
        ck_assert_msg(strstr(ge2_last_error(), b), "'%s' lacks '%s'", ge2_last_error(), b);
}

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
