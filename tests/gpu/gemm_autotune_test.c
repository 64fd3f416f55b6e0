/* The GEMM kernel registry on a GPU (kernels/cuda/gemm_registry.*), through
 * the kernel interface and through a whole program:
 *   - a tuned GEMM computes what the heuristic's first computes (fp32
 *     tolerance: another algorithm may sum in another order) and what a
 *     float64 reference written here computes;
 *   - tuning leaves the node's outputs as they were (they are timed into and
 *     restored), checked bit for bit against a sentinel;
 *   - the choice is written to the cache file and read back by a later
 *     prepare without timing again (counted), a garbage file is survived;
 *   - autotune off times nothing and runs the heuristic's first;
 *   - the kernel report of the MLP names a tuned kernel per GEMM (a cuBLASLt
 *     algorithm or a ge2 tiled configuration).
 * Each test points GE2_KERNEL_CACHE at its own scratch file.
 */
#include <check.h>
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/error.h"
#include "graph/ir.h"
#include "kernels/cuda/gemm_registry.h"
#include "ops/linear/linear.h"
#include "tests/gpu/capture_mlp.h"
#include "tests/gpu/capture_suite.h"
#include "tests/gpu/lt_gpu.h"
#include "ops/ops.h"

/* A fresh cache file per test, and a registry that has forgotten everything. */
static void fresh_cache(char *path, size_t size)
{
    const char *tmp = getenv("TEST_TMPDIR");
    char dir[400];
    snprintf(dir, sizeof dir, "%s/ge2_autotune_XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, size, "%s/kernels.txt", dir);
    /* launches made here, and (through the environment) programs */
    gpu_settings.kernel_cache = strdup(path);
    gpu_settings.autotune = true;
    setenv("GE2_KERNEL_CACHE", path, 1);
    setenv("GE2_AUTOTUNE", "1", 1);
    /* the GEMMs' own kernels, not the whole-step kernel that would take the small MLP */
    setenv("GE2_MLP_STEP", "0", 1);
    ge2_gemm_registry_reset();
}

static uint64_t rng_state = 0x5eed5eedull;

static float uniform(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static void *random_device(int64_t n, float **host)
{
    float *h = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        h[i] = uniform();
    void *d = NULL;
    CUDA_OK(cudaMalloc(&d, (size_t)n * sizeof(float)));
    CUDA_OK(cudaMemcpy(d, h, (size_t)n * sizeof(float), cudaMemcpyHostToDevice));
    *host = h;
    return d;
}

static float *to_host(const void *d, int64_t n)
{
    float *h = malloc((size_t)n * sizeof(float));
    CUDA_OK(cudaMemcpy(h, d, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
}

/* y = relu(x·Wᵀ + b) (act NONE: no relu), x [rows, in], W [out, in]. */
typedef struct linear_case {
    int64_t rows, in, out;
    ge2_activation act;
    float *hx, *hw, *hb;
    void *x, *w, *b, *y;
    ge2_node node;
    ge2_launch launch;
} linear_case;

static void linear_open(linear_case *c, const gpu *g, int64_t rows, int64_t in, int64_t out, ge2_activation act)
{
    memset(c, 0, sizeof *c);
    c->rows = rows, c->in = in, c->out = out, c->act = act;
    c->x = random_device(rows * in, &c->hx);
    c->w = random_device(out * in, &c->hw);
    c->b = random_device(out, &c->hb);
    CUDA_OK(cudaMalloc(&c->y, (size_t)(rows * out) * sizeof(float)));
    c->node.id = 7;
    c->node.op = GE2_OP_LINEAR;
    c->node.n_inputs = 3;
    c->node.n_outputs = 1;
    GE2_ATTRS(ge2_linear_attrs, c->node.attrs)->act = act;
    ge2_launch *l = &c->launch;
    l->node = &c->node;
    l->n_in = 3;
    l->n_out = 1;
    l->in[0] = (ge2_view){c->x, GE2_F32, ge2_shape2(rows, in)};
    l->in[1] = (ge2_view){c->w, GE2_F32, ge2_shape2(out, in)};
    l->in[2] = (ge2_view){c->b, GE2_F32, ge2_shape1(out)};
    l->out[0] = (ge2_view){c->y, GE2_F32, ge2_shape2(rows, out)};
    gpu_fill_launch(l, g);
}

static void linear_close(linear_case *c)
{
    free(c->hx), free(c->hw), free(c->hb);
    cudaFree(c->x), cudaFree(c->w), cudaFree(c->b), cudaFree(c->y);
}

/* Prepares (the registry chooses here), describes, runs; y on the host (caller frees). */
static float *linear_run(linear_case *c, const gpu *g, char *what, size_t what_size)
{
    const ge2_cuda_kernel *k = &ge2_op_def_of(GE2_OP_LINEAR)->cuda;
    ck_assert_msg(k->prepare(&c->launch) == GE2_OK, "prepare: %s", ge2_last_error());
    snprintf(what, what_size, "%s", k->describe(&c->launch));
    ck_assert_msg(k->launch(&c->launch) == GE2_OK, "launch: %s", ge2_last_error());
    CUDA_OK(cudaStreamSynchronize(g->stream));
    k->release(&c->launch);
    return to_host(c->y, c->rows * c->out);
}

/* max |a - b| / max(max |b|, 1). */
static double rel_diff(const float *a, const float *b, int64_t n)
{
    double diff = 0, scale = 1;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(a[i]) || !isfinite(b[i]))
            return INFINITY;
        diff = fmax(diff, fabs((double)a[i] - b[i]));
        scale = fmax(scale, fabs((double)b[i]));
    }
    return diff / scale;
}

/* Against float64 math written here; returns the same normwise error. */
static double rel_err_f64(const linear_case *c, const float *y)
{
    double diff = 0, scale = 1;
    for (int64_t r = 0; r < c->rows; r++)
        for (int64_t o = 0; o < c->out; o++) {
            double acc = c->hb[o];
            for (int64_t i = 0; i < c->in; i++)
                acc += (double)c->hx[r * c->in + i] * c->hw[o * c->in + i];
            if (c->act == GE2_ACT_RELU && acc < 0)
                acc = 0;
            diff = fmax(diff, fabs(y[r * c->out + o] - acc));
            scale = fmax(scale, fabs(acc));
        }
    return diff / scale;
}

static ge2_gemm_registry_stats stats(void)
{
    ge2_gemm_registry_stats s;
    ge2_gemm_registry_stats_get(&s);
    return s;
}

/* "cublasLt RELU_BIAS algo 23 tile 128x64 (tuned ...)" -> "cublasLt RELU_BIAS algo 23 tile 128x64". */
static void algorithm_part(const char *what, char *buf, size_t size)
{
    const char *paren = strstr(what, " (");
    size_t n = paren ? (size_t)(paren - what) : strlen(what);
    snprintf(buf, size, "%.*s", (int)n, what);
}

/* A GPU, a fresh cache, and the small MLP's first layer. */
static void first_layer_setup(gpu *g, linear_case *c)
{
    char path[512];
    gpu_open(g);
    fresh_cache(path, sizeof path);
    linear_open(c, g, 64, 784, 256, GE2_ACT_RELU);
}

/* ------------------------------------------------------------------ tests */

START_TEST(test_tuned_matches_heuristic_and_reference)
{
    static const struct {
        int64_t rows, in, out;
        ge2_activation act;
    } cases[] = {
        {64, 784, 256, GE2_ACT_RELU},    /* the small MLP's first layer */
        {256, 1024, 1024, GE2_ACT_RELU}, /* the medium MLP's hidden layer */
        {256, 1024, 10, GE2_ACT_NONE},   /* a skinny output layer */
        {256, 4096, 4096, GE2_ACT_RELU}, /* the large MLP's hidden layer: no f64 reference (too slow) */
    };
    gpu g;
    gpu_open(&g);
    char path[512];
    fresh_cache(path, sizeof path);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        linear_case c;
        linear_open(&c, &g, cases[i].rows, cases[i].in, cases[i].out, cases[i].act);
        const int64_t n = c.rows * c.out;
        char heur_what[256], tuned_what[256];

        gpu_settings.autotune = false;
        float *y_heur = linear_run(&c, &g, heur_what, sizeof heur_what);
        ck_assert_msg(strstr(heur_what, "(heuristic"), "autotune off described as: %s", heur_what);

        /* Tuning must leave the output as it found it: a sentinel, bit for bit. */
        gpu_settings.autotune = true;
        CUDA_OK(cudaMemset(c.y, 0x5a, (size_t)n * sizeof(float)));
        ge2_gemm_registry_stats before = stats();
        const ge2_cuda_kernel *k = &ge2_op_def_of(GE2_OP_LINEAR)->cuda;
        ck_assert_msg(k->prepare(&c.launch) == GE2_OK, "prepare: %s", ge2_last_error());
        snprintf(tuned_what, sizeof tuned_what, "%s", k->describe(&c.launch));
        CUDA_OK(cudaStreamSynchronize(g.stream));
        unsigned char *raw = malloc((size_t)n * sizeof(float));
        CUDA_OK(cudaMemcpy(raw, c.y, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost));
        for (int64_t b = 0; b < n * (int64_t)sizeof(float); b++)
            ck_assert_msg(raw[b] == 0x5a, "%s: tuning changed output byte %lld", tuned_what, (long long)b);
        free(raw);
        ge2_gemm_registry_stats after = stats();
        if (!strstr(tuned_what, "(heuristic, 1 candidate)")) { /* one candidate: nothing to choose */
            ck_assert_msg(strstr(tuned_what, "(tuned"), "expected a tuned GEMM, got: %s", tuned_what);
            /* a fused activation epilogue is timed against the plain GEMM + act
             * kernel, whose GEMM is tuned too ("timed: ..."; also on scratch,
             * which the sentinel above checks) */
            ck_assert_int_eq(after.tuned - before.tuned, strstr(tuned_what, "; timed: ") ? 2 : 1);
            ck_assert_msg(after.timings - before.timings >= 2, "timed %lld candidates",
                          (long long)(after.timings - before.timings));
        }
        ck_assert_msg(k->launch(&c.launch) == GE2_OK, "launch: %s", ge2_last_error());
        CUDA_OK(cudaStreamSynchronize(g.stream));
        k->release(&c.launch);
        float *y_tuned = to_host(c.y, n);

        /* fp32 sums of up to 4096 terms of O(1) products in another order. */
        const double tol = 2e-6 * sqrt((double)c.in) + 1e-6;
        double d = rel_diff(y_tuned, y_heur, n);
        ck_assert_msg(d <= tol, "[%lld,%lld]x[%lld,%lld]^T: tuned (%s) vs heuristic (%s) differ by %g (tol %g)",
                      (long long)c.rows, (long long)c.in, (long long)c.out, (long long)c.in, tuned_what, heur_what, d,
                      tol);
        if (c.in * c.out * c.rows <= 256LL * 1024 * 1024) {
            double e = rel_err_f64(&c, y_tuned);
            ck_assert_msg(e <= tol, "%s vs float64: %g (tol %g)", tuned_what, e, tol);
        }
        printf("gemm_autotune_test: linear [%lld,%lld]x[%lld,%lld]^T %s\n  heuristic: %s\n  registry:  %s\n",
               (long long)c.rows, (long long)c.in, (long long)c.out, (long long)c.in,
               ge2_activation_name(c.act), heur_what, tuned_what);
        free(y_heur), free(y_tuned);
        linear_close(&c);
    }
    gpu_close(&g);
}
END_TEST

/* The cache file made to hold `text` alone, the registry's memory
 * forgotten, and c prepared and run again: the stats of that run. */
static ge2_gemm_registry_stats run_from_cache_file(linear_case *c, const gpu *g, const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    ge2_gemm_registry_reset();
    char what[256];
    free(linear_run(c, g, what, sizeof what));
    return stats();
}

START_TEST(test_cache_written_and_reread)
{
    gpu g;
    linear_case c;
    first_layer_setup(&g, &c);
    char path[512];
    snprintf(path, sizeof path, "%s", gpu_settings.kernel_cache);
    char first[256], again[256], reread[256], a[256], b[256];
    free(linear_run(&c, &g, first, sizeof first));
    ge2_gemm_registry_stats s = stats();
    ck_assert_msg(s.tuned == 1 && s.hits == 0 && s.timings >= 2, "first prepare: tuned %lld hits %lld timings %lld",
                  (long long)s.tuned, (long long)s.hits, (long long)s.timings);

    /* The file holds one entry for this problem. */
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "no cache file at %s", path);
    char line[1024];
    int entries = 0;
    while (fgets(line, sizeof line, f))
        entries += line[0] != '#' && strncmp(line, "linear:RELU", 11) == 0;
    fclose(f);
    ck_assert_int_eq(entries, 1);

    /* Same process: memory answers. */
    free(linear_run(&c, &g, again, sizeof again));
    s = stats();
    ck_assert_msg(s.tuned == 1 && s.hits == 1, "second prepare: tuned %lld hits %lld", (long long)s.tuned,
                  (long long)s.hits);
    ck_assert_msg(strstr(again, "(cached"), "second prepare described as: %s", again);

    /* Memory forgotten: the file answers, and nothing is timed. */
    ge2_gemm_registry_reset();
    free(linear_run(&c, &g, reread, sizeof reread));
    s = stats();
    ck_assert_msg(s.tuned == 0 && s.hits == 1 && s.timings == 0, "after reset: tuned %lld hits %lld timings %lld",
                  (long long)s.tuned, (long long)s.hits, (long long)s.timings);
    algorithm_part(first, a, sizeof a);
    algorithm_part(reread, b, sizeof b);
    ck_assert_msg(strcmp(a, b) == 0, "tuned '%s', re-read '%s'", first, reread);

    /* The entry's candidate count (its last field) no longer what is
     * offered, as after a new kernel: tuned afresh. */
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char entry[1024] = "";
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "linear:RELU", 11) == 0)
            snprintf(entry, sizeof entry, "%s", line);
    fclose(f);
    char *count = strrchr(entry, ' ');
    ck_assert_ptr_nonnull(count);
    snprintf(count, sizeof entry - (size_t)(count - entry), " %d\n", atoi(count + 1) + 1);
    s = run_from_cache_file(&c, &g, path, entry);
    ck_assert_msg(s.tuned == 1 && s.hits == 0, "stale candidate count: tuned %lld hits %lld", (long long)s.tuned,
                  (long long)s.hits);

    /* A garbage file: tuned afresh, no crash. */
    s = run_from_cache_file(&c, &g, path, "linear:RELU_BIAS zz 1 1\n\x01\x02\x03 not a line\n");
    ck_assert_msg(s.tuned == 1 && s.bad_lines == 2, "garbage file: tuned %lld bad lines %lld", (long long)s.tuned,
                  (long long)s.bad_lines);
    linear_close(&c);
    gpu_close(&g);
}
END_TEST

START_TEST(test_autotune_off)
{
    gpu g;
    linear_case c;
    first_layer_setup(&g, &c);
    char tuned[256], off[256], off2[256], a[256], b[256];
    free(linear_run(&c, &g, tuned, sizeof tuned)); /* a cache entry exists now */

    gpu_settings.autotune = false;
    ge2_gemm_registry_reset();
    free(linear_run(&c, &g, off, sizeof off));
    free(linear_run(&c, &g, off2, sizeof off2));
    ge2_gemm_registry_stats s = stats();
    ck_assert_msg(s.heuristic == 2 && s.tuned == 0 && s.hits == 0 && s.timings == 0,
                  "autotune off: heuristic %lld tuned %lld hits %lld timings %lld", (long long)s.heuristic,
                  (long long)s.tuned, (long long)s.hits, (long long)s.timings);
    ck_assert_msg(strstr(off, "(heuristic"), "autotune off described as: %s", off);
    algorithm_part(off, a, sizeof a);
    algorithm_part(off2, b, sizeof b);
    ck_assert_str_eq(a, b); /* the heuristic's first, every time */
    linear_close(&c);
    gpu_close(&g);
}
END_TEST

/* The small MLP through the public API: every GEMM node of the train step
 * names the kernel the registry chose (cuBLASLt's or ge2's tiled GEMM),
 * but for the classifier head's, which run in the head kernels
 * (fusion/head/head.h). */
START_TEST(test_mlp_kernel_report)
{
    char path[512];
    fresh_cache(path, sizeof path);
    mlp m;
    mlp_open(&m, GE2_DEVICE_CUDA, 64, 1, 1e-3, false);
    ck_assert_int_eq(ge2_program_kernel_report(m.program, GE2_MODE_TRAIN, stdout), GE2_ERR_STATE);
    mlp_step(&m, 1, 0, 64, true);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_msg(ge2_program_kernel_report(m.program, GE2_MODE_TRAIN, f) == GE2_OK, "%s", ge2_last_error());
    fclose(f);
    printf("gemm_autotune_test: kernel report of the small MLP (784-256-128-10, batch 64):\n%s", text);
    int gemms = 0;
    for (char *save = NULL, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        if (!strstr(l, " linear") || strstr(l, "in the ge2 head kernel"))
            continue;
        gemms++;
        ck_assert_msg((strstr(l, "cublasLt") || strstr(l, "ge2 tiled")) && (strstr(l, "(tuned") || strstr(l, "(cached") ||
                                                strstr(l, "(heuristic, 1 candidate)")),
                      "GEMM line without a registry choice: %s", l);
    }
    ck_assert_msg(gemms >= 3, "%d GEMM lines in the report", gemms);
    free(text);
    mlp_close(&m);
}
END_TEST

GE2_GPU_SUITE_MAIN("gemm_autotune_test", 300, test_tuned_matches_heuristic_and_reference, test_cache_written_and_reread,
                   test_autotune_off, test_mlp_kernel_report)
