/* The .rdb reader (data/rdb.h) on records the test serializes itself, byte
 * by byte as R's XDR format lays them out, so the expected text and the
 * expected failures are known independently of the reader. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "data/rdb.h"
#include "graph/error.h"
#include "tests/support/check_main.h"

/* A growing byte buffer. */
typedef struct bytes {
    uint8_t b[1 << 16];
    size_t n;
} bytes;

static void put(bytes *o, const void *p, size_t n)
{
    ck_assert_uint_le(o->n + n, sizeof o->b);
    memcpy(o->b + o->n, p, n);
    o->n += n;
}

static void put32(bytes *o, uint32_t v)
{
    uint8_t w[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    put(o, w, 4);
}

/* One serialized object: format `version`, a character vector of n strings
 * (NULL: NA) with `type` in its flags word (16 for a character vector). */
static void serialize(bytes *o, int version, uint32_t type, const char *const *s, int n)
{
    put(o, "X\n", 2);
    put32(o, (uint32_t)version);
    put32(o, 0x00040201u); /* R 4.2.1 wrote it */
    put32(o, 0x00030500u); /* R 3.5.0 reads it */
    if (version == 3) {
        put32(o, 5);
        put(o, "UTF-8", 5);
    }
    put32(o, type);
    put32(o, (uint32_t)n);
    for (int i = 0; i < n; i++) {
        put32(o, 0x00040009u); /* a CHARSXP */
        put32(o, s[i] ? (uint32_t)strlen(s[i]) : 0xffffffffu);
        if (s[i])
            put(o, s[i], strlen(s[i]));
    }
}

/* A record: the inflated length, then the zlib stream of obj. */
static void record(bytes *rdb, const bytes *obj)
{
    uLongf n = compressBound(obj->n);
    uint8_t *z = malloc(n);
    ck_assert_int_eq(compress(z, &n, obj->b, obj->n), Z_OK);
    put32(rdb, (uint32_t)obj->n);
    put(rdb, z, n);
    free(z);
}

static bytes rdb, obj;
static size_t first_record_end; /* a file cut there is a valid one-record file */

static void two_books(void)
{
    static const char *const a[] = {"EMMA", "", "Emma Woodhouse, handsome, clever, and rich,", NULL, "\xc2\xa3" "5"};
    static const char *const b[] = {"PERSUASION", "Sir Walter Elliot"};
    rdb.n = 0;
    obj.n = 0;
    serialize(&obj, 3, 16, a, 5);
    record(&rdb, &obj);
    first_record_end = rdb.n;
    obj.n = 0;
    serialize(&obj, 2, 16 | (1u << 9), b, 2); /* format 2, with attributes after */
    put32(&obj, 0x00000402u);
    record(&rdb, &obj);
}

START_TEST(reads_every_string_of_every_record)
{
    two_books();
    ge2_rdb_text t;
    ck_assert_msg(ge2_rdb_read_text(rdb.b, rdb.n, "books.rdb", &t) == GE2_OK, "%s", ge2_last_error());
    const char *want = "EMMA\n\nEmma Woodhouse, handsome, clever, and rich,\n\xc2\xa3" "5\nPERSUASION\nSir Walter Elliot\n";
    ck_assert_uint_eq(t.len, strlen(want));
    ck_assert(memcmp(t.text, want, t.len) == 0);
    ck_assert_int_eq(t.records, 2);
    ck_assert_int_eq(t.lines, 6); /* the NA is left out */
    ge2_rdb_text_release(&t);
    ck_assert_ptr_null(t.text);
}
END_TEST

/* Every cut of a valid file, but between its records, fails with a
 * message naming the file. */
START_TEST(every_truncation_is_an_error)
{
    two_books();
    for (size_t n = 0; n < rdb.n; n++) {
        if (n == first_record_end)
            continue;
        ge2_rdb_text t;
        ck_assert_msg(ge2_rdb_read_text(rdb.b, n, "cut.rdb", &t) == GE2_ERR_IO, "cut at %zu of %zu accepted", n, rdb.n);
        ck_assert_ptr_null(t.text);
        ck_assert_ptr_nonnull(strstr(ge2_last_error(), "cut.rdb"));
    }
}
END_TEST

static void expect_refused(const char *why)
{
    ge2_rdb_text t;
    ck_assert_msg(ge2_rdb_read_text(rdb.b, rdb.n, "bad.rdb", &t) == GE2_ERR_IO, "accepted; expected '%s'", why);
    ck_assert_msg(strstr(ge2_last_error(), why), "'%s' does not say '%s'", ge2_last_error(), why);
}

START_TEST(refuses_what_it_does_not_read)
{
    static const char *const one[] = {"x"}, *const newline[] = {"two\nlines"};
    rdb.n = obj.n = 0;
    serialize(&obj, 3, 14, one, 1); /* a numeric vector's type */
    record(&rdb, &obj);
    expect_refused("not a character vector");

    rdb.n = obj.n = 0;
    serialize(&obj, 4, 16, one, 1);
    record(&rdb, &obj);
    expect_refused("neither 2 nor 3");

    rdb.n = obj.n = 0;
    serialize(&obj, 3, 16, newline, 1);
    record(&rdb, &obj);
    expect_refused("newline");

    rdb.n = obj.n = 0;
    serialize(&obj, 3, 16, one, 1);
    obj.b[obj.n - 6] = 0x7f; /* the type byte of the element's flags: not a string */
    record(&rdb, &obj);
    expect_refused("not a string");

    rdb.n = obj.n = 0;
    serialize(&obj, 3, 16, one, 1);
    record(&rdb, &obj);
    rdb.b[3] ^= 1; /* the stated length is one off */
    expect_refused("record 0");

    rdb.n = obj.n = 0;
    serialize(&obj, 3, 16, one, 1);
    obj.b[obj.n - 13] = 0x10; /* a vector length far past the data */
    record(&rdb, &obj);
    expect_refused("vector length out of range");

    rdb.n = 0;
    put32(&rdb, 0x40000000u); /* 1 GiB from 4 bytes */
    put32(&rdb, 0);
    expect_refused("out of range");

    ge2_rdb_text t;
    ck_assert_int_eq(ge2_rdb_read_text(rdb.b, 0, "empty.rdb", &t), GE2_ERR_IO);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "no records"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rdb");
    TCase *tc = tcase_create("rdb");
    tcase_add_test(tc, reads_every_string_of_every_record);
    tcase_add_test(tc, every_truncation_is_an_error);
    tcase_add_test(tc, refuses_what_it_does_not_read);
    suite_add_tcase(s, tc);
    return ge2_check_run(s);
}
