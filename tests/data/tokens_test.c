/* llm.c's token shards (data/tokens.h): shards written here, byte by byte
 * as llm.c's data scripts write them, read back across shard boundaries;
 * every malformed header, size and id refused naming the file and the
 * field; batches against positions computed independently. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/tokens.h"
#include "tests/data/testutil.h"
#include "tests/support/check_main.h"

#define OK(call) ck_assert_msg((call) == GE2_OK, "%s: %s", #call, ge2_last_error())

/* A shard of ids[0, n) with the given header fields, as bytes in *size. */
static uint8_t *shard_bytes(uint32_t magic, uint32_t version, uint32_t count, const uint16_t *ids, size_t n,
                            size_t *size)
{
    *size = 1024 + 2 * n;
    uint8_t *b = calloc(1, *size);
    const uint32_t head[3] = {magic, version, count};
    for (int f = 0; f < 3; f++)
        for (int k = 0; k < 4; k++)
            b[4 * f + k] = (uint8_t)(head[f] >> (8 * k));
    for (size_t i = 0; i < n; i++) {
        b[1024 + 2 * i] = (uint8_t)ids[i];
        b[1024 + 2 * i + 1] = (uint8_t)(ids[i] >> 8);
    }
    return b;
}

static void write_shard(const char *name, const uint16_t *ids, size_t n)
{
    size_t size;
    uint8_t *b = shard_bytes(20240520, 1, (uint32_t)n, ids, n, &size);
    tu_write(tu_path(name), b, size);
    free(b);
}

START_TEST(shards_read_as_one_sequence)
{
    uint16_t a[5] = {0, 1, 2, 50256, 7}, b[3] = {300, 301, 302};
    write_shard("val_000001.bin", b, 3); /* sorted after _000000 whatever the order written */
    write_shard("val_000000.bin", a, 5);
    char pattern[600];
    snprintf(pattern, sizeof pattern, "%s/val_*.bin", tu_tmpdir());
    ge2_tokens *t;
    OK(ge2_tokens_open(pattern, 50257, &t));
    ck_assert_int_eq(ge2_tokens_shard_count(t), 2);
    ck_assert_int_eq(ge2_tokens_count(t), 8);
    const uint16_t want[8] = {0, 1, 2, 50256, 7, 300, 301, 302};
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(ge2_tokens_at(t, i), want[i]);
    /* sequential batches, step 1 of B = 2, T = 3 over N = 8: rows start at
     * (2·3) mod 4 = 2 and (3·3) mod 4 = 1, the first across the boundary */
    int32_t x[2 * 3], y[2 * 3];
    ge2_tokens_batch(t, 2, 3, true, 1, NULL, x, y);
    const int32_t want_x[6] = {2, 50256, 7, 1, 2, 50256}, want_y[6] = {50256, 7, 300, 2, 50256, 7};
    for (int i = 0; i < 6; i++) {
        ck_assert_int_eq(x[i], want_x[i]);
        ck_assert_int_eq(y[i], want_y[i]);
    }
    /* random batches: each row a window of the sequence, y its shift by one */
    uint64_t rng = 7;
    for (int k = 0; k < 50; k++) {
        ge2_tokens_batch(t, 2, 3, false, 0, &rng, x, y);
        for (int r = 0; r < 2; r++) {
            int found = 0;
            for (int p = 0; p + 3 < 8 && !found; p++)
                found = x[r * 3] == want[p] && x[r * 3 + 1] == want[p + 1] && x[r * 3 + 2] == want[p + 2] &&
                        y[r * 3 + 2] == want[p + 3];
            ck_assert(found);
            for (int i = 0; i + 1 < 3; i++)
                ck_assert_int_eq(y[r * 3 + i], x[r * 3 + i + 1]);
        }
    }
    ge2_tokens_free(t);
}
END_TEST

/* Each malformed shard: the error names the file and the field. */
static void expect_refused(const uint8_t *bytes, size_t size, int64_t vocab, const char *want)
{
    ge2_tokens *t = (ge2_tokens *)1;
    ck_assert_int_eq(ge2_tokens_from_memory(bytes, size, "bad.bin", vocab, &t), GE2_ERR_FORMAT);
    ck_assert_ptr_null(t);
    ck_assert_msg(strstr(ge2_last_error(), "bad.bin") && strstr(ge2_last_error(), want), "want '%s' in: %s", want,
                  ge2_last_error());
}

START_TEST(malformed_shards_are_refused)
{
    const uint16_t ids[4] = {1, 2, 3, 4};
    size_t size;
    uint8_t *b = shard_bytes(20240521, 1, 4, ids, 4, &size);
    expect_refused(b, size, 50257, "header magic is 20240521");
    free(b);
    b = shard_bytes(20240520, 2, 4, ids, 4, &size);
    expect_refused(b, size, 50257, "header version is 2");
    free(b);
    b = shard_bytes(20240520, 1, 5, ids, 4, &size); /* says 5, holds 4 */
    expect_refused(b, size, 50257, "the header says 5 tokens (a file of 1034 bytes), the file has 1032 bytes");
    expect_refused(b, size - 1, 50257, "the file has 1031 bytes");
    free(b);
    b = shard_bytes(20240520, 1, 0, ids, 0, &size);
    expect_refused(b, size, 50257, "token count is 0");
    expect_refused(b, 100, 50257, "shorter than the 1024-byte header");
    free(b);
    b = shard_bytes(20240520, 1, 4, ids, 4, &size);
    expect_refused(b, size, 4, "token 3 is 4, outside the vocabulary of 4");
    ge2_tokens *t;
    OK(ge2_tokens_from_memory(b, size, "good.bin", 5, &t));
    ck_assert_int_eq(ge2_tokens_count(t), 4);
    ge2_tokens_free(t);
    free(b);
}
END_TEST

START_TEST(patterns_and_files_that_are_not_shards)
{
    char pattern[600];
    snprintf(pattern, sizeof pattern, "%s/none_*.bin", tu_tmpdir());
    ge2_tokens *t;
    ck_assert_int_eq(ge2_tokens_open(pattern, 50257, &t), GE2_ERR_IO);
    ck_assert_msg(strstr(ge2_last_error(), "no file matches"), "%s", ge2_last_error());
    ck_assert_int_eq(mkdir(tu_path("dir.bin"), 0700), 0);
    snprintf(pattern, sizeof pattern, "%s/dir.bin", tu_tmpdir());
    ck_assert_int_eq(ge2_tokens_open(pattern, 50257, &t), GE2_ERR_IO);
    ck_assert_msg(strstr(ge2_last_error(), "is a folder"), "%s", ge2_last_error());
    tu_write(tu_path("empty.bin"), "", 0);
    snprintf(pattern, sizeof pattern, "%s/empty.bin", tu_tmpdir());
    ck_assert_int_eq(ge2_tokens_open(pattern, 50257, &t), GE2_ERR_FORMAT);
    ck_assert_msg(strstr(ge2_last_error(), "empty.bin: 0 bytes"), "%s", ge2_last_error());
    ck_assert_int_eq(ge2_tokens_open(pattern, 70000, &t), GE2_ERR_INVALID_ARGUMENT);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tokens");
    TCase *tc = tcase_create("tokens");
    tcase_add_checked_fixture(tc, tu_tmpdir_setup, tu_tmpdir_teardown);
    tcase_add_test(tc, shards_read_as_one_sequence);
    tcase_add_test(tc, malformed_shards_are_refused);
    tcase_add_test(tc, patterns_and_files_that_are_not_shards);
    suite_add_tcase(s, tc);
    return ge2_check_run(s);
}
