/* The GEMM registry's host side, where there is no GPU (CI): the key text,
 * the cache file's round trip, malformed and random input (skipped, never a
 * crash), the file through the process-wide registry, and the environment
 * switches. Expected texts are written out by hand here. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capture/options.h"
#include "graph/rng.h"
#include "kernels/cuda/gemm_registry.h"
#include "tests/support/check_main.h"

static ge2_gemm_key sample_key(void)
{
    ge2_gemm_key k;
    memset(&k, 0, sizeof k);
    k.op = "linear";
    k.epilogue = "RELU_BIAS";
    k.trans_a = true;
    k.m = 256;
    k.n = 64;
    k.k = 784;
    k.batch = 1;
    k.dtype = "f32";
    k.align_a = k.align_b = k.align_d = 256;
    k.workspace_bytes = 33554432;
    k.gpu = "NVIDIA H200";
    k.sm_count = 132;
    k.lt_version = 130100;
    return k;
}

static ge2_gemm_choice sample_choice(unsigned seed)
{
    ge2_gemm_choice c;
    memset(&c, 0, sizeof c);
    for (int i = 0; i < GE2_GEMM_ALGO_BYTES; i++)
        c.algo[i] = (uint8_t)(seed * 31u + (unsigned)i * 7u);
    c.us = 3.125 + seed / 3.0; /* not a short decimal: the text must carry every bit */
    c.n_candidates = 1 + (int)(seed % 8);
    return c;
}

/* A per-test scratch folder (Check forks each test). */
static void scratch_dir(char *buf, size_t size)
{
    const char *tmp = getenv("TEST_TMPDIR");
    snprintf(buf, size, "%s/ge2_gemm_registry_XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(buf));
}

/* ------------------------------------------------------------------- keys */

START_TEST(test_key_text)
{
    ge2_gemm_key k = sample_key();
    char buf[GE2_GEMM_KEY_MAX];
    ck_assert_int_eq(ge2_gemm_key_format(&k, buf, sizeof buf), GE2_OK);
    ck_assert_str_eq(buf, "linear:RELU_BIAS:TN:m256:n64:k784:b1:f32:fp32:a256.256.256:ws33554432:NVIDIA_H200:sm132:"
                          "lt130100:lt");
    /* Every field that changes the best algorithm changes the key. */
    k.tf32 = true;
    k.trans_b = true;
    k.m = 64;
    k.n = 256;
    k.align_d = 16;
    k.gpu = "Bad: name\twith spaces/slash";
    k.kernels = "lt+tiled";
    ck_assert_int_eq(ge2_gemm_key_format(&k, buf, sizeof buf), GE2_OK);
    ck_assert_str_eq(buf, "linear:RELU_BIAS:TT:m64:n256:k784:b1:f32:tf32:a256.256.16:ws33554432:"
                          "Bad__name_with_spaces_slash:sm132:lt130100:lt+tiled");
    /* the families are a closed set: anything else could collide with another key */
    k.kernels = "lt:tiled";
    ck_assert_int_eq(ge2_gemm_key_format(&k, buf, sizeof buf), GE2_ERR_INVALID_ARGUMENT);
}
END_TEST

START_TEST(test_key_too_long_refused)
{
    ge2_gemm_key k = sample_key();
    char small[16];
    ck_assert_int_eq(ge2_gemm_key_format(&k, small, sizeof small), GE2_ERR_INVALID_ARGUMENT);
    ck_assert_str_eq(small, "");
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "linear"));
    char big[1024];
    char name[600];
    memset(name, 'x', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    k.op = name; /* fits big, not a cache line */
    ck_assert_int_eq(ge2_gemm_key_format(&k, big, sizeof big), GE2_ERR_INVALID_ARGUMENT);
}
END_TEST

START_TEST(test_selection_text)
{
    char buf[96];
    ge2_gemm_selection s;
    memset(&s, 0, sizeof s);
    s.source = GE2_GEMM_TUNED;
    s.us = 3.14;
    s.n_candidates = 8;
    ge2_gemm_selection_str(&s, buf, sizeof buf);
    ck_assert_str_eq(buf, " (tuned 3.1 us of 8 candidates)");
    s.source = GE2_GEMM_CACHED;
    ge2_gemm_selection_str(&s, buf, sizeof buf);
    ck_assert_str_eq(buf, " (cached 3.1 us of 8 candidates)");
    s.source = GE2_GEMM_HEURISTIC;
    s.n_candidates = 1;
    ge2_gemm_selection_str(&s, buf, sizeof buf);
    ck_assert_str_eq(buf, " (heuristic, 1 candidate)");
}
END_TEST

/* ------------------------------------------------------------------ cache */

static void assert_same_choice(const ge2_gemm_choice *a, const ge2_gemm_choice *b)
{
    ck_assert_int_eq(a->tiled, b->tiled);
    if (a->tiled)
        ck_assert(a->config.tile == b->config.tile && a->config.splits == b->config.splits);
    else
        ck_assert_mem_eq(a->algo, b->algo, GE2_GEMM_ALGO_BYTES);
    ck_assert(a->us == b->us);
    ck_assert_int_eq(a->n_candidates, b->n_candidates);
}

START_TEST(test_line_round_trip)
{
    ge2_gemm_choice c = sample_choice(5);
    char line[600];
    ck_assert_int_eq(ge2_gemm_cache_format_line("linear:DEFAULT:TN:m1", &c, line, sizeof line), GE2_OK);
    /* key, 128 hex digits (byte 0 is 5*31 = 155 = 0x9b, byte 1 0xa2), time, count. */
    ck_assert(strncmp(line, "linear:DEFAULT:TN:m1 9ba2", 25) == 0);
    ck_assert_int_eq(line[strlen(line) - 1], '\n');
    ge2_gemm_cache cache = {0};
    int bad = -1;
    ck_assert_int_eq(ge2_gemm_cache_parse(&cache, line, strlen(line), &bad), GE2_OK);
    ck_assert_int_eq(bad, 0);
    ck_assert_int_eq(cache.n, 1);
    const ge2_gemm_choice *got = ge2_gemm_cache_find(&cache, "linear:DEFAULT:TN:m1");
    ck_assert_ptr_nonnull(got);
    assert_same_choice(got, &c);
    ck_assert_ptr_null(ge2_gemm_cache_find(&cache, "linear:DEFAULT:TN:m2"));
    ge2_gemm_cache_clear(&cache);
}
END_TEST

/* A tiled choice is its configuration in the kernel column. */
START_TEST(test_tiled_line_round_trip)
{
    ge2_gemm_choice c;
    memset(&c, 0, sizeof c);
    c.tiled = true;
    c.config = (ge2_tiled_config){GE2_TILED_64X64, 2};
    c.us = 2.25;
    c.n_candidates = 20;
    char line[600];
    ck_assert_int_eq(ge2_gemm_cache_format_line("linear_grad_weight:PLAIN:NT:m1", &c, line, sizeof line), GE2_OK);
    ck_assert_str_eq(line, "linear_grad_weight:PLAIN:NT:m1 tiled:64x64:2 2.25 20\n");
    ge2_gemm_cache cache = {0};
    int bad = -1;
    const char text[] = "linear_grad_weight:PLAIN:NT:m1 tiled:64x64:2 2.25 20\n"
                        "bad:tile tiled:48x48:2 1 1\n"     /* no such tile */
                        "bad:splits tiled:32x32:3 1 1\n"   /* not a power of two */
                        "bad:empty tiled: 1 1\n"           /* nothing after the prefix */
                        "bad:prefix tiledx:32x32:2 1 1\n"; /* neither hex nor tiled */
    ck_assert_int_eq(ge2_gemm_cache_parse(&cache, text, strlen(text), &bad), GE2_OK);
    ck_assert_int_eq(bad, 4);
    ck_assert_int_eq(cache.n, 1);
    const ge2_gemm_choice *got = ge2_gemm_cache_find(&cache, "linear_grad_weight:PLAIN:NT:m1");
    ck_assert_ptr_nonnull(got);
    assert_same_choice(got, &c);
    ge2_gemm_cache_clear(&cache);
}
END_TEST

START_TEST(test_file_round_trip)
{
    char dir[400], path[512];
    scratch_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/nested/deeper/kernels.txt", dir); /* parents made on save */
    ge2_gemm_cache out = {0};
    char key[64];
    for (unsigned i = 0; i < 40; i++) { /* past the first growth */
        snprintf(key, sizeof key, "matmul:DEFAULT:NN:m%u", i);
        ge2_gemm_choice c = sample_choice(i);
        ck_assert_int_eq(ge2_gemm_cache_put(&out, key, &c), GE2_OK);
    }
    ge2_gemm_choice replaced = sample_choice(99);
    ck_assert_int_eq(ge2_gemm_cache_put(&out, "matmul:DEFAULT:NN:m7", &replaced), GE2_OK);
    ck_assert_int_eq(out.n, 40);
    ck_assert_int_eq(ge2_gemm_cache_save(&out, path), GE2_OK);

    ge2_gemm_cache in = {0};
    int bad = -1;
    ck_assert_int_eq(ge2_gemm_cache_load(&in, path, &bad), GE2_OK);
    ck_assert_int_eq(bad, 0);
    ck_assert_int_eq(in.n, 40);
    for (unsigned i = 0; i < 40; i++) {
        snprintf(key, sizeof key, "matmul:DEFAULT:NN:m%u", i);
        ge2_gemm_choice want = sample_choice(i == 7 ? 99 : i);
        const ge2_gemm_choice *got = ge2_gemm_cache_find(&in, key);
        ck_assert_msg(got != NULL, "%s lost", key);
        assert_same_choice(got, &want);
    }
    ge2_gemm_cache_clear(&in);
    ge2_gemm_cache_clear(&out);

    ge2_gemm_cache none = {0};
    snprintf(path, sizeof path, "%s/missing.txt", dir);
    ck_assert_int_eq(ge2_gemm_cache_load(&none, path, &bad), GE2_OK); /* no file: empty */
    ck_assert_int_eq(none.n, 0);
}
END_TEST

START_TEST(test_malformed_lines_skipped)
{
    char hex[129];
    for (int i = 0; i < 128; i++)
        hex[i] = "0123456789abcdef"[i % 16];
    hex[128] = '\0';
    char text[8192];
    char longline[700];
    memset(longline, 'a', sizeof longline - 1);
    longline[sizeof longline - 1] = '\0';
    int n = snprintf(text, sizeof text,
                     "# a comment\n"
                     "\n"
                     "   \t\n"
                     "good:one %s 2.5 8\n"                /* kept */
                     "good:two %s 1e-3 1\n"               /* kept */
                     "bad:short %.126s 2.5 8\n"           /* 126 hex digits */
                     "bad:nothex %.127sg 2.5 8\n"         /* a non-hex digit */
                     "bad:negative %s -1 8\n"             /* time < 0 */
                     "bad:nan %s nan 8\n"                 /* not finite */
                     "bad:inf %s inf 8\n"                 /* not finite */
                     "bad:huge %s 1e300 8\n"              /* out of range */
                     "bad:zero %s 2.5 0\n"                /* no candidates */
                     "bad:many %s 2.5 100000\n"           /* too many */
                     "bad:trail %s 2.5 8x\n"              /* junk after the number */
                     "bad:extra %s 2.5 8 9\n"             /* a fifth token */
                     "bad:missing %s 2.5\n"               /* three tokens */
                     "bad/slash %s 2.5 8\n"               /* not a key character */
                     "%s %s 2.5 8\n"                      /* overlong line */
                     "good:one %s 7.5 4\n"                /* a later line replaces */
                     "good:three %s 1 2",                 /* no final newline */
                     hex, hex, hex, hex, hex, hex, hex, hex, hex, hex, hex, hex, hex, hex, longline, hex, hex, hex);
    ck_assert(n > 0 && (size_t)n < sizeof text);
    /* An embedded NUL makes a line bad, not the end of the text. */
    char with_nul[] = "bad:nul 00\0 1 1\n";
    memcpy(text + n, "\n", 1);
    memcpy(text + n + 1, with_nul, sizeof with_nul - 1);
    size_t len = (size_t)n + sizeof with_nul;

    ge2_gemm_cache cache = {0};
    int bad = -1;
    ck_assert_int_eq(ge2_gemm_cache_parse(&cache, text, len, &bad), GE2_OK);
    ck_assert_int_eq(bad, 14);
    ck_assert_int_eq(cache.n, 3);
    const ge2_gemm_choice *one = ge2_gemm_cache_find(&cache, "good:one");
    ck_assert_ptr_nonnull(one);
    ck_assert(one->us == 7.5);
    ck_assert_int_eq(one->n_candidates, 4);
    ck_assert_int_eq(one->algo[0], 0x01);
    ck_assert_int_eq(one->algo[7], 0xef);
    ck_assert_ptr_nonnull(ge2_gemm_cache_find(&cache, "good:two"));
    ck_assert_ptr_nonnull(ge2_gemm_cache_find(&cache, "good:three"));
    ge2_gemm_cache_clear(&cache);
}
END_TEST

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t next_random(void) { return (uint32_t)(ge2_splitmix64_next(&rng) >> 16); }

/* Random bytes, and valid files with random bytes flipped: every parse ends
 * with GE2_OK and only well-formed entries (run under ASan to see overreads). */
START_TEST(test_random_bytes_never_crash)
{
    ge2_gemm_cache valid = {0};
    char key[64];
    for (unsigned i = 0; i < 6; i++) {
        snprintf(key, sizeof key, "linear:BIAS:TN:m%u", i);
        ge2_gemm_choice c = sample_choice(i);
        ck_assert_int_eq(ge2_gemm_cache_put(&valid, key, &c), GE2_OK);
    }
    char base[4096];
    size_t base_len = 0;
    for (int i = 0; i < valid.n; i++) {
        ck_assert_int_eq(ge2_gemm_cache_format_line(valid.entries[i].key, &valid.entries[i].choice, base + base_len,
                                                    sizeof base - base_len),
                         GE2_OK);
        base_len += strlen(base + base_len);
    }
    char buf[4096];
    for (int iter = 0; iter < 4000; iter++) {
        size_t len;
        if (iter % 2) {
            len = next_random() % sizeof buf;
            for (size_t i = 0; i < len; i++)
                buf[i] = iter % 4 == 1 ? (char)next_random() : " \n:0a9f.e-#"[next_random() % 11];
        } else {
            len = base_len;
            memcpy(buf, base, len);
            for (int f = 1 + (int)(next_random() % 4); f > 0; f--)
                buf[next_random() % len] = (char)next_random();
        }
        ge2_gemm_cache cache = {0};
        int bad = 0;
        ck_assert_int_eq(ge2_gemm_cache_parse(&cache, buf, len, &bad), GE2_OK);
        ck_assert(bad >= 0);
        for (int i = 0; i < cache.n; i++) {
            const ge2_gemm_choice *c = &cache.entries[i].choice;
            ck_assert(strlen(cache.entries[i].key) > 0 && strlen(cache.entries[i].key) < GE2_GEMM_KEY_MAX);
            ck_assert(isfinite(c->us) && c->us >= 0 && c->us <= 1e9);
            ck_assert(c->n_candidates >= 1 && c->n_candidates <= 1024);
        }
        ge2_gemm_cache_clear(&cache);
    }
    ge2_gemm_cache_clear(&valid);
}
END_TEST

START_TEST(test_oversized_file_refused)
{
    char dir[400], path[512];
    scratch_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/big.txt", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    for (size_t i = 0; i <= GE2_GEMM_CACHE_MAX_FILE_BYTES / 32; i++)
        fputs("# padding padding padding padding padding padding padding pad\n", f);
    fclose(f);
    ge2_gemm_cache cache = {0};
    ck_assert_int_eq(ge2_gemm_cache_load(&cache, path, NULL), GE2_ERR_IO);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "big.txt"));
    ck_assert_int_eq(cache.n, 0);
}
END_TEST

/* --------------------------------------------------- process-wide registry */

START_TEST(test_registry_persists_through_file)
{
    char dir[400], path[512];
    scratch_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/ge2/kernels.txt", dir);
    ge2_gemm_registry_reset();
    ge2_gemm_choice got, c = sample_choice(3);
    ck_assert(!ge2_gemm_registry_lookup(path, "linear:X", &got));
    ck_assert_int_eq(ge2_gemm_registry_store(path, "linear:X", &c), GE2_OK);
    /* A line another process wrote meanwhile survives our rewrite. */
    FILE *f = fopen(path, "a");
    ck_assert_ptr_nonnull(f);
    char line[600];
    ge2_gemm_choice other = sample_choice(4);
    ck_assert_int_eq(ge2_gemm_cache_format_line("matmul:Y", &other, line, sizeof line), GE2_OK);
    fputs(line, f);
    fputs("garbage line\n", f);
    fclose(f);
    ge2_gemm_choice c2 = sample_choice(6);
    ck_assert_int_eq(ge2_gemm_registry_store(path, "linear:Z", &c2), GE2_OK);

    ge2_gemm_registry_reset(); /* forget memory: what follows comes from the file */
    ck_assert(ge2_gemm_registry_lookup(path, "linear:X", &got));
    assert_same_choice(&got, &c);
    ck_assert(ge2_gemm_registry_lookup(path, "matmul:Y", &got));
    assert_same_choice(&got, &other);
    ck_assert(ge2_gemm_registry_lookup(path, "linear:Z", &got));
    assert_same_choice(&got, &c2);
    ge2_gemm_registry_stats s;
    ge2_gemm_registry_stats_get(&s);
    ck_assert_int_eq(s.bad_lines, 0); /* the merge dropped the garbage line */
}
END_TEST

START_TEST(test_registry_without_file)
{
    ge2_gemm_registry_reset();
    ge2_gemm_choice got, c = sample_choice(1);
    ck_assert_int_eq(ge2_gemm_registry_store(NULL, "linear:X", &c), GE2_OK);
    ck_assert(ge2_gemm_registry_lookup(NULL, "linear:X", &got)); /* memory only */
    ge2_gemm_registry_reset();
    ck_assert(!ge2_gemm_registry_lookup(NULL, "linear:X", &got));
}
END_TEST

START_TEST(test_unwritable_cache_is_a_warning)
{
    const char *path = "/proc/ge2-cannot-write-here/kernels.txt";
    ge2_gemm_registry_reset();
    ge2_gemm_choice got, c = sample_choice(2);
    ck_assert_int_eq(ge2_gemm_registry_store(path, "linear:X", &c), GE2_OK);
    ck_assert(ge2_gemm_registry_lookup(path, "linear:X", &got));
}
END_TEST

/* The kernel settings a program's launches get: the options, then the
 * environment's overrides (capture/options.c, the one file that reads it). */
static ge2_kernel_settings settings_of(const ge2_compile_options *o, ge2_status *st)
{
    static ge2_program_options po;
    *st = ge2_options_resolve(o, &po);
    return po.settings;
}

START_TEST(test_cache_path_option)
{
    ge2_status st;
    unsetenv("GE2_KERNEL_CACHE");
    setenv("HOME", "/home/someone", 1);
    ge2_kernel_settings k = settings_of(NULL, &st);
    ck_assert_int_eq(st, GE2_OK);
    ck_assert_str_eq(k.kernel_cache, "/home/someone/.cache/ge2/kernels.txt");
    ge2_compile_options o = ge2_compile_defaults();
    o.kernel_cache = "";
    ck_assert_ptr_null(settings_of(&o, &st).kernel_cache); /* memory only */
    o.kernel_cache = "/tmp/mine.txt";
    ck_assert_str_eq(settings_of(&o, &st).kernel_cache, "/tmp/mine.txt");
    setenv("GE2_KERNEL_CACHE", "", 1); /* the environment wins */
    ck_assert_ptr_null(settings_of(&o, &st).kernel_cache);
    unsetenv("GE2_KERNEL_CACHE");
    unsetenv("HOME");
    ck_assert_ptr_null(settings_of(NULL, &st).kernel_cache);
}
END_TEST

START_TEST(test_autotune_switch)
{
    ge2_status st;
    unsetenv("GE2_AUTOTUNE");
    ck_assert(settings_of(NULL, &st).autotune);
    ge2_compile_options o = ge2_compile_defaults();
    o.autotune = false;
    ck_assert(!settings_of(&o, &st).autotune);
    setenv("GE2_AUTOTUNE", "1", 1);
    ck_assert(settings_of(&o, &st).autotune);
    setenv("GE2_AUTOTUNE", "0", 1);
    ck_assert(!settings_of(NULL, &st).autotune);
    unsetenv("GE2_AUTOTUNE");
}
END_TEST

/* kernel_candidates: on by default, off by the option or GE2_KERNEL_CANDIDATES=0 */
START_TEST(test_candidates_switch)
{
    ge2_status st;
    unsetenv("GE2_KERNEL_CANDIDATES");
    ck_assert(settings_of(NULL, &st).kernel_candidates);
    ge2_compile_options o = ge2_compile_defaults();
    o.kernel_candidates = false;
    ck_assert(!settings_of(&o, &st).kernel_candidates);
    setenv("GE2_KERNEL_CANDIDATES", "1", 1);
    ck_assert(settings_of(&o, &st).kernel_candidates);
    setenv("GE2_KERNEL_CANDIDATES", "0", 1);
    ck_assert(!settings_of(NULL, &st).kernel_candidates);
    unsetenv("GE2_KERNEL_CANDIDATES");
}
END_TEST

/* GE2_KERNEL_SETTINGS_DEFAULTS (launches made without a program) chooses
 * kernels as a program compiled with ge2_compile_defaults() does */
START_TEST(test_settings_initializer_is_the_defaults)
{
    static const char *const env[] = {"GE2_AUTOTUNE", "GE2_AUTOTUNE_LOG", "GE2_GEMM_KERNEL", "GE2_PDL",
                                      "GE2_TIME_EPILOGUES", "GE2_KERNEL_CANDIDATES", "GE2_MLP_STEP_PROFILE"};
    for (size_t i = 0; i < sizeof env / sizeof env[0]; i++)
        unsetenv(env[i]);
    ge2_status st;
    const ge2_kernel_settings want = settings_of(NULL, &st), got = GE2_KERNEL_SETTINGS_DEFAULTS;
    ck_assert_int_eq(st, GE2_OK);
    ck_assert_int_eq(got.autotune, want.autotune);
    ck_assert_int_eq(got.autotune_log, want.autotune_log);
    ck_assert_int_eq(got.gemm_kernels, want.gemm_kernels);
    ck_assert_int_eq(got.pdl, want.pdl);
    ck_assert_int_eq(got.profile, want.profile);
    ck_assert_int_eq(got.time_epilogues, want.time_epilogues);
    ck_assert_int_eq(got.kernel_candidates, want.kernel_candidates);
}
END_TEST

START_TEST(test_family_switch)
{
    ge2_status st;
    unsetenv("GE2_GEMM_KERNEL");
    ck_assert_int_eq(settings_of(NULL, &st).gemm_kernels, GE2_GEMM_KERNELS_ANY);
    ge2_compile_options o = ge2_compile_defaults();
    o.gemm_kernels = GE2_GEMM_KERNELS_TILED;
    ck_assert_int_eq(settings_of(&o, &st).gemm_kernels, GE2_GEMM_KERNELS_TILED);
    setenv("GE2_GEMM_KERNEL", "auto", 1);
    ck_assert_int_eq(settings_of(&o, &st).gemm_kernels, GE2_GEMM_KERNELS_ANY);
    setenv("GE2_GEMM_KERNEL", "cublaslt", 1);
    ck_assert_int_eq(settings_of(NULL, &st).gemm_kernels, GE2_GEMM_KERNELS_CUBLASLT);
    setenv("GE2_GEMM_KERNEL", "tiled", 1);
    ck_assert_int_eq(settings_of(NULL, &st).gemm_kernels, GE2_GEMM_KERNELS_TILED);
    setenv("GE2_GEMM_KERNEL", "cutlass", 1); /* unknown: an error naming the choices */
    settings_of(NULL, &st);
    ck_assert_int_eq(st, GE2_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "auto, cublaslt or tiled"));
    unsetenv("GE2_GEMM_KERNEL");
    o.gemm_kernels = (ge2_gemm_kernels)7;
    settings_of(&o, &st);
    ck_assert_int_eq(st, GE2_ERR_INVALID_ARGUMENT);
}
END_TEST

START_TEST(test_fusion_switches)
{
    ge2_status st;
    static ge2_program_options po;
    unsetenv("GE2_DISABLE_FUSIONS");
    unsetenv("GE2_HEAD_KERNEL");
    ge2_compile_options o = ge2_compile_defaults();
    o.disable_fusions = "mlp_step";
    ck_assert_int_eq(ge2_options_resolve(&o, &po), GE2_OK);
    ck_assert_str_eq(po.o.disable_fusions, "mlp_step");
    setenv("GE2_HEAD_KERNEL", "0", 1);
    ck_assert_int_eq(ge2_options_resolve(&o, &po), GE2_OK);
    ck_assert_str_eq(po.o.disable_fusions, "mlp_step,head");
    unsetenv("GE2_HEAD_KERNEL");
    o.disable_fusions = "mlp_step,no_such_pattern";
    st = ge2_options_resolve(&o, &po);
    ck_assert_int_eq(st, GE2_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(ge2_last_error(), "no_such_pattern") && strstr(ge2_last_error(), "tail_copies"), "%s",
                  ge2_last_error());
}
END_TEST

START_TEST(test_stats_count)
{
    ge2_gemm_registry_reset();
    ge2_gemm_registry_count(GE2_GEMM_TUNED, 8);
    ge2_gemm_registry_count(GE2_GEMM_TUNED, 4);
    ge2_gemm_registry_count(GE2_GEMM_CACHED, 0);
    ge2_gemm_registry_count(GE2_GEMM_HEURISTIC, 0);
    ge2_gemm_registry_stats s;
    ge2_gemm_registry_stats_get(&s);
    ck_assert_int_eq(s.tuned, 2);
    ck_assert_int_eq(s.timings, 12);
    ck_assert_int_eq(s.hits, 1);
    ck_assert_int_eq(s.heuristic, 1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gemm_registry");
    TCase *tc = tcase_create("host");
    tcase_add_test(tc, test_key_text);
    tcase_add_test(tc, test_key_too_long_refused);
    tcase_add_test(tc, test_selection_text);
    tcase_add_test(tc, test_line_round_trip);
    tcase_add_test(tc, test_tiled_line_round_trip);
    tcase_add_test(tc, test_file_round_trip);
    tcase_add_test(tc, test_malformed_lines_skipped);
    tcase_add_test(tc, test_random_bytes_never_crash);
    tcase_add_test(tc, test_oversized_file_refused);
    tcase_add_test(tc, test_registry_persists_through_file);
    tcase_add_test(tc, test_registry_without_file);
    tcase_add_test(tc, test_unwritable_cache_is_a_warning);
    tcase_add_test(tc, test_cache_path_option);
    tcase_add_test(tc, test_autotune_switch);
    tcase_add_test(tc, test_settings_initializer_is_the_defaults);
    tcase_add_test(tc, test_candidates_switch);
    tcase_add_test(tc, test_family_switch);
    tcase_add_test(tc, test_fusion_switches);
    tcase_add_test(tc, test_stats_count);
    suite_add_tcase(s, tc);
    return ge2_check_run(s);
}
