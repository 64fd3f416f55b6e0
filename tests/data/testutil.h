/* Helpers the data, checkpoint and optim suites share: a scratch directory
 * per test (Check forks each test, so each gets its own). Suites run through
 * tests/support/check_main.h's ge2_check_run. */
#ifndef GE2_TESTS_DATA_TESTUTIL_H
#define GE2_TESTS_DATA_TESTUTIL_H

#include <check.h>
#include <stddef.h>

#include "tests/support/check_main.h"

/* Checked fixture: a fresh directory under /tmp, removed with its contents. */
void tu_tmpdir_setup(void);
void tu_tmpdir_teardown(void);
const char *tu_tmpdir(void);
/* "<tmpdir>/<name>" in one of 32 rotating buffers (valid for the next 31 calls). */
const char *tu_path(const char *name);

/* Writes n bytes to path (replacing it). */
void tu_write(const char *path, const void *data, size_t n);


#endif /* GE2_TESTS_DATA_TESTUTIL_H */
