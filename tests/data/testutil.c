#include "tests/data/testutil.h"

#include <stdio.h>
#include <stdlib.h>

static char tmpdir[256];

void tu_tmpdir_setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ge2_test.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

void tu_tmpdir_teardown(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

const char *tu_tmpdir(void)
{
    return tmpdir;
}

const char *tu_path(const char *name)
{
    static char path[32][512];
    static int which;
    which = (which + 1) % 32;
    snprintf(path[which], sizeof path[which], "%s/%s", tmpdir, name);
    return path[which];
}

void tu_write(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}
