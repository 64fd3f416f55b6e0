/* The safetensors container: what ge2 writes, and that every malformed file
 * is rejected with a message saying why (never a crash).
 *
 * Files are assembled byte by byte here, in the form the reference Python
 * implementation writes (length prefix, JSON padded with spaces, data), so
 * the expectations do not come from ge2's own writer. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/safetensors.h"
#include "tests/data/testutil.h"

/* A file image: 8-byte length of `header`, the header, then data_bytes bytes. */
static uint8_t *image(const char *header, uint64_t claimed_len, size_t data_bytes, size_t *size)
{
    size_t hl = strlen(header);
    *size = 8 + hl + data_bytes;
    uint8_t *buf = calloc(1, *size);
    for (int i = 0; i < 8; i++)
        buf[i] = (uint8_t)(claimed_len >> (8 * i));
    memcpy(buf + 8, header, hl);
    for (size_t i = 0; i < data_bytes; i++)
        buf[8 + hl + i] = (uint8_t)i;
    return buf;
}

static void expect_bad(const char *header, size_t data_bytes, const char *needle)
{
    size_t size;
    uint8_t *buf = image(header, strlen(header), data_bytes, &size);
    ge2_st_file f;
    ge2_status st = ge2_st_parse(buf, size, "bad.safetensors", &f);
    ck_assert_msg(st == GE2_ERR_FORMAT, "accepted %s", header);
    ck_assert_msg(strstr(ge2_last_error(), needle) != NULL, "for %s: message \"%s\" lacks \"%s\"", header,
                  ge2_last_error(), needle);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "bad.safetensors"));
    free(buf);
}

START_TEST(parse_reference_layout)
{
    /* as safetensors.torch.save_file writes {"b": tensor([1., 2.]), "a": zeros(1, 1)} with metadata */
    char h[256] = "{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"dtype\":\"F32\",\"shape\":[1,1],"
                  "\"data_offsets\":[0,4]},\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}";
    while (strlen(h) % 8)
        strcat(h, " ");
    size_t size;
    uint8_t *buf = image(h, strlen(h), 12, &size);
    float two[2] = {1.0f, 2.0f};
    memcpy(buf + 8 + strlen(h) + 4, two, 8);
    ge2_st_file f;
    ck_assert_int_eq(ge2_st_parse(buf, size, "ok", &f), GE2_OK);
    ck_assert_int_eq(f.n_entries, 2);
    ck_assert_str_eq(ge2_st_meta(&f, "format"), "pt");
    ck_assert_ptr_null(ge2_st_meta(&f, "absent"));
    const uint8_t *data;
    ck_assert_int_eq(ge2_st_expect_f32(&f, "ok", "b", ge2_shape1(2), &data), GE2_OK);
    float got[2];
    memcpy(got, data, 8);
    ck_assert_float_eq(got[0], 1.0f);
    ck_assert_float_eq(got[1], 2.0f);
    ck_assert_int_eq(ge2_st_expect_f32(&f, "ok", "a", ge2_shape2(1, 2), &data), GE2_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "tensor a has shape [1,1], the model has [1,2]"));
    ck_assert_int_eq(ge2_st_expect_f32(&f, "ok", "c", ge2_shape1(2), &data), GE2_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "missing tensor c"));
    ge2_st_release(&f);
    free(buf);
}
END_TEST

START_TEST(parse_escapes_and_empty)
{
    const char *h = "{ \"a\\\"\\u00e9\\ud83d\\ude00\" : { \"dtype\" : \"F32\" , \"shape\" : [ ] , "
                    "\"data_offsets\" : [ 0 , 4 ] } }\n\t ";
    size_t size;
    uint8_t *buf = image(h, strlen(h), 4, &size);
    ge2_st_file f;
    ck_assert_int_eq(ge2_st_parse(buf, size, "ok", &f), GE2_OK);
    ck_assert_str_eq(f.entries[0].name, "a\"\xc3\xa9\xf0\x9f\x98\x80");
    ck_assert_int_eq(f.entries[0].rank, 0);
    ge2_st_release(&f);
    free(buf);
    buf = image("{}", 2, 0, &size);
    ck_assert_int_eq(ge2_st_parse(buf, size, "ok", &f), GE2_OK);
    ck_assert_int_eq(f.n_entries, 0);
    free(buf);
}
END_TEST

START_TEST(short_and_huge_header)
{
    uint8_t tiny[5] = {1, 2, 3, 4, 5};
    ge2_st_file f;
    ck_assert_int_eq(ge2_st_parse(tiny, sizeof tiny, "t", &f), GE2_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "too short"));
    size_t size;
    uint8_t *buf = image("{}", (uint64_t)1 << 40, 0, &size);
    ck_assert_int_eq(ge2_st_parse(buf, size, "t", &f), GE2_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "exceeds the 104857600-byte limit"));
    free(buf);
    buf = image("{}", 3, 0, &size);
    ck_assert_int_eq(ge2_st_parse(buf, size, "t", &f), GE2_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "header length 3 exceeds the file's 2 bytes"));
    free(buf);
    buf = image("{}", UINT64_MAX, 0, &size);
    ck_assert_int_eq(ge2_st_parse(buf, size, "t", &f), GE2_ERR_FORMAT);
    free(buf);
}
END_TEST

#define ENTRY(name, dtype, shape, b, e) \
    "\"" name "\":{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"data_offsets\":[" #b "," #e "]}"

START_TEST(bad_json)
{
    expect_bad("", 0, "expected '{'");
    expect_bad("[]", 0, "expected '{'");
    expect_bad("{", 0, "expected a string");
    expect_bad("{\"a\":1}", 0, "expected '{'");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}", 4, "expected '}'");
    expect_bad("{" ENTRY("a", "F32", "[1]", 0, 4) "}x", 4, "only space padding");
    expect_bad("{" ENTRY("a", "F32", "[1]", 0, 4) ",}", 4, "expected a string");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, "non-negative integer");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[01],\"data_offsets\":[0,4]}}", 4, "leading zeros");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}", 4, "an integer");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],\"data_offsets\":[0,4]}}", 4, "2^63");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4, "one each of");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "one each of");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "needs dtype, shape and data_offsets");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 4, "shorter array");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, "[begin, end]");
    expect_bad("{\"a\\q\":{}}", 0, "valid escape");
    expect_bad("{\"a\\ud800\":{}}", 0, "low surrogate");
    expect_bad("{\"a\\u0000\":{}}", 0, "no NUL");
    expect_bad("{\"a\tb\":{}}", 0, "control character");
    expect_bad("{\"__metadata__\":{\"k\":1}}", 0, "expected a string");
    expect_bad("{\"__metadata__\":{\"k\":\"v\",\"k\":\"w\"}}", 0, "appears twice");
    expect_bad("{\"__metadata__\":{\"k\":{\"x\":\"y\"}}}", 0, "expected a string");
    expect_bad("{\"__metadata__\":{},\"__metadata__\":{}}", 0, "appears twice");
    expect_bad("{" ENTRY("a", "F32", "[1]", 0, 4) "," ENTRY("a", "F32", "[1]", 4, 8) "}", 8, "tensor a appears twice");
    /* a name longer than any tensor name */
    char long_name[600] = "{\"";
    memset(long_name + 2, 'x', 400);
    strcpy(long_name + 402, "\":{}}");
    expect_bad(long_name, 0, "shorter string");
}
END_TEST

START_TEST(bad_dtype_and_ranges)
{
    expect_bad("{" ENTRY("w", "F31", "[1]", 0, 4) "}", 4, "unknown dtype \"F31\"");
    expect_bad("{" ENTRY("w", "F32", "[2]", 0, 4) "}", 4, "F32 [2] needs 8 bytes, data_offsets give 4");
    expect_bad("{" ENTRY("w", "F32", "[1]", 4, 8) "}", 4, "outside the data section of 4 bytes");
    expect_bad("{" ENTRY("w", "F32", "[1]", 8, 4) "}", 8, "outside the data section");
    expect_bad("{" ENTRY("w", "F32", "[1]", 0, 4) "," ENTRY("v", "F32", "[1]", 2, 6) "}", 8, "overlap");
    expect_bad("{" ENTRY("w", "F32", "[1]", 0, 4) "," ENTRY("v", "F32", "[1]", 0, 4) "}", 8, "overlap");
    expect_bad("{" ENTRY("w", "F32", "[1]", 0, 4) "," ENTRY("v", "F32", "[1]", 8, 12) "}", 12,
               "bytes [4, 8) of the data section belong to no tensor");
    expect_bad("{" ENTRY("w", "F32", "[1]", 0, 4) "}", 6, "bytes [4, 6) of the data section belong to no tensor");
    expect_bad("{" ENTRY("w", "F32", "[4294967296,4294967296,4294967296]", 0, 4) "}", 4, "overflows");
}
END_TEST

START_TEST(dtype_mismatch_for_model)
{
    const char *h = "{" ENTRY("w", "F16", "[2]", 0, 4) "}";
    size_t size;
    uint8_t *buf = image(h, strlen(h), 4, &size);
    ge2_st_file f;
    ck_assert_int_eq(ge2_st_parse(buf, size, "f", &f), GE2_OK);
    const uint8_t *data;
    ck_assert_int_eq(ge2_st_expect_f32(&f, "f", "w", ge2_shape1(2), &data), GE2_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "tensor w has dtype F16, the model needs F32"));
    ge2_st_release(&f);
    free(buf);
}
END_TEST

START_TEST(write_read_round_trip)
{
    const char *path = tu_path("rt.safetensors");
    float w[6] = {1, 2, 3, 4, 5, 6}, b[2] = {-1, 0.5f};
    ge2_st_tensor t[2] = {{"fc1.weight", ge2_shape2(2, 3), w, GE2_F32}, {"fc\"1\".bias", ge2_shape1(2), b, GE2_F32}};
    ge2_st_kv meta[1] = {{"step", "17"}};
    ck_assert_int_eq(ge2_st_write(path, t, 2, meta, 1), GE2_OK);

    /* the bytes themselves: length prefix = padded JSON, exactly the expected text */
    FILE *fp = fopen(path, "rb");
    uint8_t raw[1024];
    size_t n = fread(raw, 1, sizeof raw, fp);
    fclose(fp);
    const char *want = "{\"__metadata__\":{\"step\":\"17\"},\"fc1.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],"
                       "\"data_offsets\":[0,24]},\"fc\\\"1\\\".bias\":{\"dtype\":\"F32\",\"shape\":[2],"
                       "\"data_offsets\":[24,32]}}";
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--)
        hl = hl << 8 | raw[i];
    ck_assert_int_eq(hl % 8, 0);
    ck_assert_int_eq(n, 8 + hl + 32);
    ck_assert_int_eq(memcmp(raw + 8, want, strlen(want)), 0);
    for (size_t i = strlen(want); i < hl; i++)
        ck_assert_int_eq(raw[8 + i], ' ');
    ck_assert_int_eq(memcmp(raw + 8 + hl, w, 24), 0);

    ge2_st_file f;
    ck_assert_int_eq(ge2_st_read(path, UINT64_MAX, &f), GE2_OK);
    const uint8_t *data;
    ck_assert_int_eq(ge2_st_expect_f32(&f, path, "fc\"1\".bias", ge2_shape1(2), &data), GE2_OK);
    ck_assert_int_eq(memcmp(data, b, 8), 0);
    ck_assert_str_eq(ge2_st_meta(&f, "step"), "17");
    ge2_st_release(&f);
}
END_TEST

START_TEST(atomic_save_keeps_target_on_failure)
{
    const char *path = tu_path("keep.safetensors");
    char tmp[600];
    float a[1] = {42};
    ge2_st_tensor t = {"a", ge2_shape1(1), a, GE2_F32};
    ck_assert_int_eq(ge2_st_write(path, &t, 1, NULL, 0), GE2_OK);
    struct stat before;
    ck_assert_int_eq(stat(path, &before), 0);
    /* occupy the temporary's name with a directory: the save cannot even start (works as root too) */
    ck_assert(ge2_st_temp_name(path, (long)getpid(), tmp, sizeof tmp));
    ck_assert_int_eq(mkdir(tmp, 0700), 0);
    float b[2] = {1, 2};
    ge2_st_tensor t2 = {"b", ge2_shape1(2), b, GE2_F32};
    ck_assert_int_eq(ge2_st_write(path, &t2, 1, NULL, 0), GE2_ERR_IO);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "temporary"));
    ge2_st_file f;
    ck_assert_int_eq(ge2_st_read(path, UINT64_MAX, &f), GE2_OK);
    ck_assert_int_eq(f.n_entries, 1);
    ck_assert_str_eq(f.entries[0].name, "a");
    ge2_st_release(&f);
    rmdir(tmp);
    /* and a save into a directory that does not exist fails cleanly */
    ck_assert_int_eq(ge2_st_write(tu_path("none/x.safetensors"), &t2, 1, NULL, 0), GE2_ERR_IO);
    /* no temporary left behind by a successful save */
    ck_assert_int_eq(ge2_st_write(path, &t2, 1, NULL, 0), GE2_OK);
    ck_assert(ge2_st_temp_name(path, (long)getpid(), tmp, sizeof tmp));
    ck_assert_int_ne(access(tmp, F_OK), 0);
}
END_TEST

/* A save through a symbolic link writes the file it names (the link stays
 * a link); a path that is not a regular file is refused, not replaced; a
 * temporary a killed save left is removed by the next save there; a FIFO
 * is refused for reading without blocking. */
START_TEST(save_targets)
{
    float a[1] = {42};
    ge2_st_tensor t = {"a", ge2_shape1(1), a, GE2_F32};
    char real[600], link_path[600];
    snprintf(real, sizeof real, "%s", tu_path("real.safetensors"));
    snprintf(link_path, sizeof link_path, "%s", tu_path("link.safetensors"));
    ck_assert_int_eq(ge2_st_write(real, &t, 1, NULL, 0), GE2_OK);
    ck_assert_int_eq(symlink("real.safetensors", link_path), 0);
    a[0] = 7;
    ck_assert_msg(ge2_st_write(link_path, &t, 1, NULL, 0) == GE2_OK, "%s", ge2_last_error());
    struct stat sb;
    ck_assert_int_eq(lstat(link_path, &sb), 0);
    ck_assert(S_ISLNK(sb.st_mode));
    ge2_st_file f;
    ck_assert_int_eq(ge2_st_read(real, UINT64_MAX, &f), GE2_OK);
    float got;
    memcpy(&got, f.data + f.entries[0].begin, sizeof got);
    ck_assert(got == 7.0f);
    ge2_st_release(&f);

    /* a folder, or a device: refused, left alone */
    const char *folder = tu_path("a_folder");
    ck_assert_int_eq(mkdir(folder, 0700), 0);
    ck_assert_int_eq(ge2_st_write(folder, &t, 1, NULL, 0), GE2_ERR_IO);
    ck_assert_msg(strstr(ge2_last_error(), "not a regular file"), "%s", ge2_last_error());
    ck_assert_int_eq(stat(folder, &sb), 0);
    ck_assert(S_ISDIR(sb.st_mode));
    ck_assert_int_eq(ge2_st_write("/dev/null", &t, 1, NULL, 0), GE2_ERR_IO);

    /* a dead process's temporary goes; a live one's (here the parent's)
     * stays, and so does another machine's */
    char stale[700], live[700];
    char other_host[700];
    ck_assert(ge2_st_temp_name(real, 999999999, stale, sizeof stale));
    ck_assert(ge2_st_temp_name(real, (long)getppid(), live, sizeof live));
    snprintf(other_host, sizeof other_host, "%s.tmp.another_machine.%d", real, 999999999);
    FILE *o = fopen(other_host, "w");
    fclose(o);
    FILE *w = fopen(stale, "w");
    fclose(w);
    w = fopen(live, "w");
    fclose(w);
    ck_assert_int_eq(ge2_st_write(link_path, &t, 1, NULL, 0), GE2_OK);
    ck_assert_int_ne(access(stale, F_OK), 0);
    ck_assert_int_eq(access(live, F_OK), 0);
    ck_assert_int_eq(access(other_host, F_OK), 0); /* its PID means nothing here */
    unlink(live);
    unlink(other_host);

    /* reading a FIFO: refused by name at once */
    const char *fifo = tu_path("fifo.safetensors");
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    ck_assert_int_eq(ge2_st_read(fifo, UINT64_MAX, &f), GE2_ERR_IO);
    ck_assert_msg(strstr(ge2_last_error(), "is a FIFO"), "%s", ge2_last_error());
}
END_TEST

START_TEST(read_oversized_file)
{
    /* a sparse 1 GB file: rejected from its size alone, nothing read or allocated */
    const char *path = tu_path("huge.safetensors");
    FILE *f = fopen(path, "wb");
    ck_assert_int_eq(ftruncate(fileno(f), (off_t)1 << 30), 0);
    fclose(f);
    ge2_st_file st;
    ck_assert_int_eq(ge2_st_read(path, 1 << 20, &st), GE2_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "1073741824 bytes: larger than any checkpoint of this model"));
}
END_TEST

START_TEST(read_missing_file)
{
    ge2_st_file f;
    ck_assert_int_eq(ge2_st_read("/nonexistent/ck.safetensors", UINT64_MAX, &f), GE2_ERR_IO);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "/nonexistent/ck.safetensors"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("safetensors");
    TCase *parse = tcase_create("parse");
    tcase_add_test(parse, parse_reference_layout);
    tcase_add_test(parse, parse_escapes_and_empty);
    tcase_add_test(parse, short_and_huge_header);
    tcase_add_test(parse, bad_json);
    tcase_add_test(parse, bad_dtype_and_ranges);
    tcase_add_test(parse, dtype_mismatch_for_model);
    tcase_add_test(parse, read_missing_file);
    suite_add_tcase(s, parse);
    TCase *file = tcase_create("file");
    tcase_add_checked_fixture(file, tu_tmpdir_setup, tu_tmpdir_teardown);
    tcase_add_test(file, write_read_round_trip);
    tcase_add_test(file, atomic_save_keeps_target_on_failure);
    tcase_add_test(file, read_oversized_file);
    tcase_add_test(file, save_targets);
    suite_add_tcase(s, file);
    return ge2_check_run(s);
}
