/* The main() of a Check suite: run it, report, exit non-zero on failure. */
#ifndef GE2_TESTS_SUPPORT_CHECK_MAIN_H
#define GE2_TESTS_SUPPORT_CHECK_MAIN_H

#include <check.h>
#include <stdlib.h>

/* Runs every test case of s (forking, as Check does by default). */
static inline int ge2_check_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif /* GE2_TESTS_SUPPORT_CHECK_MAIN_H */
