/* The tiled GEMM (kernels/cuda/gemm_tiled.cu) called directly, against
 * float64 references computed here: every tile and split count, every
 * operand layout (which stride is 1), ragged m, n and k, and each epilogue:
 * PLAIN with and without row sums, BIAS_ACT (relu with its bit-mask, GELU
 * with z, tanh, no activation), DACT (from the relu mask, from z, from y).
 *
 * Outputs start as NaN (masks as 0xff), so an element or a padding byte the
 * kernel failed to write cannot pass. Tolerance per element:
 * |got - want| <= 1e-6 · sqrt(k) · sum_l |A(i,l) B(l,j)| (+ the same of the
 * bias), a bound on fp32 rounding of a k-term sum in any order; a wrong or
 * missing term (about sum/k) is far above it for the k used here.
 *
 * Also: bitwise identical results when the same configuration runs twice
 * (the split-K sum is ordered), the work model's candidates, and the
 * refusals of ge2_tiled_supports.
 *
 * CUDA is touched only inside test functions (Check forks each test).
 */
#include <check.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/error.h"
#include "ops/linear/stash.h"
#include "kernels/cuda/gemm_tiled.h"
#include "tests/gpu_probe.h"
#include "tests/support/check_main.h"

#define CUDA_OK(call) ck_assert_msg((call) == cudaSuccess, "%s failed", #call)

static uint64_t rng_state = 0x5eed1234abcdull;
static float uniform(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static void *device_copy(const void *h, size_t bytes)
{
    void *d = NULL;
    CUDA_OK(cudaMalloc(&d, bytes ? bytes : 1));
    if (bytes)
        CUDA_OK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    return d;
}

static void *device_filled(size_t bytes, int byte)
{
    void *d = NULL;
    CUDA_OK(cudaMalloc(&d, bytes ? bytes : 1));
    CUDA_OK(cudaMemset(d, byte, bytes));
    return d;
}

static void *host_copy(const void *d, size_t bytes)
{
    void *h = malloc(bytes ? bytes : 1);
    ck_assert(h);
    CUDA_OK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
    return h;
}

/* One problem shape and layout. */
typedef struct shape_case {
    int64_t m, n, k;
    bool a_k_fast, b_n_fast; /* which stride of A / B is 1 */
} shape_case;

static const shape_case shapes[] = {
    {1, 1, 1, true, true},      {7, 33, 17, true, false},    {33, 65, 130, false, true},
    {64, 256, 784, true, false}, /* LINEAR 784 -> 256 at batch 64 */
    {64, 128, 256, true, true},  /* LINEAR_GRAD_INPUT */
    {256, 785, 64, false, true}, /* LINEAR_GRAD_WEIGHT with the row-sum column past n */
    {70, 10, 300, false, false},
};
#define N_SHAPES ((int)(sizeof shapes / sizeof shapes[0]))

/* Host operands of one problem and their device copies. */
typedef struct operands {
    shape_case s;
    float *a, *b, *bias, *saved; /* host: A [m, k] and B [k, n] stored per the layout flags, bias [n], saved [m, n] */
    uint8_t *saved_mask;         /* host [m, row_bytes] */
    void *da, *db, *dbias, *dsaved, *dsaved_mask;
    int64_t a_m, a_k, b_k, b_n, row_bytes;
} operands;

static void operands_make(operands *o, shape_case s)
{
    memset(o, 0, sizeof *o);
    o->s = s;
    o->a_m = s.a_k_fast ? s.k : 1;
    o->a_k = s.a_k_fast ? 1 : s.m;
    o->b_k = s.b_n_fast ? s.n : 1;
    o->b_n = s.b_n_fast ? 1 : s.k;
    o->row_bytes = ge2_relu_mask_row_bytes(s.n);
    o->a = malloc(sizeof(float) * (size_t)(s.m * s.k));
    o->b = malloc(sizeof(float) * (size_t)(s.k * s.n));
    o->bias = malloc(sizeof(float) * (size_t)s.n);
    o->saved = malloc(sizeof(float) * (size_t)(s.m * s.n));
    o->saved_mask = malloc((size_t)(s.m * o->row_bytes));
    ck_assert(o->a && o->b && o->bias && o->saved && o->saved_mask);
    for (int64_t i = 0; i < s.m * s.k; i++)
        o->a[i] = uniform();
    for (int64_t i = 0; i < s.k * s.n; i++)
        o->b[i] = uniform();
    for (int64_t i = 0; i < s.n; i++)
        o->bias[i] = uniform();
    for (int64_t i = 0; i < s.m * s.n; i++)
        o->saved[i] = 2.0f * uniform();
    for (int64_t i = 0; i < s.m * o->row_bytes; i++)
        o->saved_mask[i] = (uint8_t)(uniform() * 127.0f + 128.0f);
    o->da = device_copy(o->a, sizeof(float) * (size_t)(s.m * s.k));
    o->db = device_copy(o->b, sizeof(float) * (size_t)(s.k * s.n));
    o->dbias = device_copy(o->bias, sizeof(float) * (size_t)s.n);
    o->dsaved = device_copy(o->saved, sizeof(float) * (size_t)(s.m * s.n));
    o->dsaved_mask = device_copy(o->saved_mask, (size_t)(s.m * o->row_bytes));
}

static void operands_free(operands *o)
{
    free(o->a);
    free(o->b);
    free(o->bias);
    free(o->saved);
    free(o->saved_mask);
    cudaFree(o->da);
    cudaFree(o->db);
    cudaFree(o->dbias);
    cudaFree(o->dsaved);
    cudaFree(o->dsaved_mask);
}

/* What one epilogue asks for. */
typedef struct epilogue_case {
    const char *name;
    ge2_tiled_epilogue epilogue;
    ge2_activation act;
    bool row_sums, bias, z, mask;      /* outputs / operands used */
    bool saved, saved_mask, from_output;
} epilogue_case;

static const epilogue_case epilogues[] = {
    {"plain", GE2_TILED_PLAIN, GE2_ACT_NONE, false, false, false, false, false, false, false},
    {"plain + row sums", GE2_TILED_PLAIN, GE2_ACT_NONE, true, false, false, false, false, false, false},
    {"bias relu + mask", GE2_TILED_BIAS_ACT, GE2_ACT_RELU, false, true, false, true, false, false, false},
    {"bias gelu + z", GE2_TILED_BIAS_ACT, GE2_ACT_GELU_TANH, false, true, true, false, false, false, false},
    {"tanh, no bias", GE2_TILED_BIAS_ACT, GE2_ACT_TANH, false, false, false, false, false, false, false},
    {"bias, no act", GE2_TILED_BIAS_ACT, GE2_ACT_NONE, false, true, false, false, false, false, false},
    {"dact relu mask", GE2_TILED_DACT, GE2_ACT_RELU, false, false, false, false, false, true, false},
    {"dact gelu from z", GE2_TILED_DACT, GE2_ACT_GELU_TANH, false, false, false, false, true, false, false},
    {"dact tanh from y", GE2_TILED_DACT, GE2_ACT_TANH, false, false, false, false, true, false, true},
};
#define N_EPILOGUES ((int)(sizeof epilogues / sizeof epilogues[0]))

/* float64 references: acc, the per-element error scale, and the epilogue's outputs. */
typedef struct reference {
    double *acc, *scale, *c, *z, *row_sums, *row_scale;
} reference;

static void reference_make(reference *r, const operands *o, const epilogue_case *e)
{
    const shape_case s = o->s;
    r->acc = calloc((size_t)(s.m * s.n), sizeof(double));
    r->scale = calloc((size_t)(s.m * s.n), sizeof(double));
    r->c = calloc((size_t)(s.m * s.n), sizeof(double));
    r->z = calloc((size_t)(s.m * s.n), sizeof(double));
    r->row_sums = calloc((size_t)s.m, sizeof(double));
    r->row_scale = calloc((size_t)s.m, sizeof(double));
    ck_assert(r->acc && r->scale && r->c && r->z && r->row_sums && r->row_scale);
    const double bound = 1e-6 * sqrt((double)s.k);
    for (int64_t i = 0; i < s.m; i++) {
        for (int64_t l = 0; l < s.k; l++) {
            double a = o->a[i * o->a_m + l * o->a_k];
            r->row_sums[i] += a;
            r->row_scale[i] += fabs(a);
        }
        r->row_scale[i] *= bound;
        for (int64_t j = 0; j < s.n; j++) {
            double acc = 0, mag = 0;
            for (int64_t l = 0; l < s.k; l++) {
                double p = (double)o->a[i * o->a_m + l * o->a_k] * o->b[l * o->b_k + j * o->b_n];
                acc += p;
                mag += fabs(p);
            }
            int64_t at = i * s.n + j;
            double z = acc + (e->bias ? o->bias[j] : 0.0);
            r->acc[at] = acc;
            r->z[at] = z;
            r->scale[at] = bound * (mag + (e->bias ? fabs(o->bias[j]) : 0.0)) + 1e-30;
            if (e->epilogue == GE2_TILED_PLAIN)
                r->c[at] = acc;
            else if (e->epilogue == GE2_TILED_BIAS_ACT)
                r->c[at] = ge2_act_f64(e->act, z, 0.0f);
            else if (e->saved_mask)
                r->c[at] = acc * (double)ge2_relu_mask_bit(o->saved_mask + i * o->row_bytes, j);
            else
                r->c[at] = acc * ge2_act_grad_f64(e->act, (double)o->saved[at], e->from_output, 0.0f);
        }
    }
}

static void reference_free(reference *r)
{
    free(r->acc);
    free(r->scale);
    free(r->c);
    free(r->z);
    free(r->row_sums);
    free(r->row_scale);
}

/* Device outputs of one run. */
typedef struct outputs {
    void *c, *z, *row_sums, *mask;
} outputs;

static void outputs_make(outputs *d, const operands *o, const epilogue_case *e)
{
    const shape_case s = o->s;
    memset(d, 0, sizeof *d);
    d->c = device_filled(sizeof(float) * (size_t)(s.m * s.n), 0xff); /* NaN */
    if (e->z)
        d->z = device_filled(sizeof(float) * (size_t)(s.m * s.n), 0xff);
    if (e->row_sums)
        d->row_sums = device_filled(sizeof(float) * (size_t)s.m, 0xff);
    if (e->mask)
        d->mask = device_filled((size_t)(s.m * o->row_bytes), 0xff); /* every padding bit set */
}

static void outputs_free(outputs *d)
{
    cudaFree(d->c);
    cudaFree(d->z);
    cudaFree(d->row_sums);
    cudaFree(d->mask);
}

static ge2_tiled_gemm problem(const operands *o, const epilogue_case *e, const outputs *d)
{
    ge2_tiled_gemm g;
    memset(&g, 0, sizeof g);
    g.m = o->s.m;
    g.n = o->s.n;
    g.k = o->s.k;
    g.a = o->da;
    g.a_m = o->a_m;
    g.a_k = o->a_k;
    g.b = o->db;
    g.b_k = o->b_k;
    g.b_n = o->b_n;
    g.c = d->c;
    g.epilogue = e->epilogue;
    g.act = e->act;
    g.from_output = e->from_output;
    g.row_sums = d->row_sums;
    g.bias = e->bias ? o->dbias : NULL;
    g.z = d->z;
    g.mask = d->mask;
    g.saved = e->saved ? o->dsaved : NULL;
    g.saved_mask = e->saved_mask ? o->dsaved_mask : NULL;
    return g;
}

static void expect_close(const char *what, const char *label, int64_t i, int64_t j, float got, double want,
                         double tol)
{
    ck_assert_msg(fabs((double)got - want) <= tol, "%s: %s [%lld, %lld]: got %.9g, want %.9g (tol %.3g)", label,
                  what, (long long)i, (long long)j, (double)got, want, tol);
}

/* Compares every output of one run with the reference. */
static void check_outputs(const char *label, const operands *o, const epilogue_case *e, const reference *r,
                          const outputs *d)
{
    const shape_case s = o->s;
    float *c = host_copy(d->c, sizeof(float) * (size_t)(s.m * s.n));
    for (int64_t i = 0; i < s.m; i++)
        for (int64_t j = 0; j < s.n; j++) {
            int64_t at = i * s.n + j;
            /* act and act' are Lipschitz with constant <= 1.2 where used here (relu, gelu, tanh) */
            double tol = 1.2 * r->scale[at] * (e->epilogue == GE2_TILED_DACT ? 1.2 : 1.0) + 1e-6 * fabs(r->c[at]);
            expect_close("c", label, i, j, c[at], r->c[at], tol);
        }
    free(c);
    if (d->z) {
        float *z = host_copy(d->z, sizeof(float) * (size_t)(s.m * s.n));
        for (int64_t i = 0; i < s.m * s.n; i++)
            expect_close("z", label, i / s.n, i % s.n, z[i], r->z[i], r->scale[i]);
        free(z);
    }
    if (d->row_sums) {
        float *rs = host_copy(d->row_sums, sizeof(float) * (size_t)s.m);
        for (int64_t i = 0; i < s.m; i++)
            expect_close("row sum", label, i, 0, rs[i], r->row_sums[i], r->row_scale[i] + 1e-30);
        free(rs);
    }
    if (d->mask) {
        uint8_t *mask = host_copy(d->mask, (size_t)(s.m * o->row_bytes));
        for (int64_t i = 0; i < s.m; i++)
            for (int64_t j = 0; j < o->row_bytes * 8; j++) {
                int bit = (mask[i * o->row_bytes + j / 8] >> (j % 8)) & 1;
                if (j >= s.n)
                    ck_assert_msg(bit == 0, "%s: mask padding bit [%lld, %lld] is set", label, (long long)i,
                                  (long long)j);
                else if (fabs(r->z[i * s.n + j]) > r->scale[i * s.n + j])
                    ck_assert_msg(bit == (r->z[i * s.n + j] > 0), "%s: mask bit [%lld, %lld] is %d, z %.9g", label,
                                  (long long)i, (long long)j, bit, r->z[i * s.n + j]);
            }
        free(mask);
    }
}

/* Every configuration of every epilogue on shape _i. */
START_TEST(test_tiled_matches_float64)
{
    CUDA_OK(cudaSetDevice(0));
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreate(&stream));
    operands o;
    operands_make(&o, shapes[_i]);
    for (int ei = 0; ei < N_EPILOGUES; ei++) {
        const epilogue_case *e = &epilogues[ei];
        reference r;
        reference_make(&r, &o, e);
        for (int t = 0; t < GE2_TILED_TILE_COUNT; t++)
            for (int splits = 1; splits <= GE2_TILED_MAX_SPLITS; splits *= 2) {
                ge2_tiled_config cfg = {(ge2_tiled_tile)t, splits};
                char label[160];
                snprintf(label, sizeof label, "[%lld, %lld, %lld] %c%c, %s, %s split %d", (long long)o.s.m,
                         (long long)o.s.n, (long long)o.s.k, o.s.a_k_fast ? 'K' : 'M', o.s.b_n_fast ? 'N' : 'K',
                         e->name, ge2_tiled_tile_name(cfg.tile), splits);
                outputs d;
                outputs_make(&d, &o, e);
                ge2_tiled_gemm g = problem(&o, e, &d);
                ck_assert_msg(ge2_tiled_gemm_run(&g, cfg, stream, "test") == GE2_OK, "%s: %s", label,
                              ge2_last_error());
                CUDA_OK(cudaStreamSynchronize(stream));
                check_outputs(label, &o, e, &r, &d);
                outputs_free(&d);
            }
        reference_free(&r);
    }
    operands_free(&o);
    CUDA_OK(cudaStreamDestroy(stream));
}
END_TEST

/* The same configuration twice gives the same bits: the cluster sums its
 * partials in rank order, whichever CTA finishes first. */
START_TEST(test_tiled_is_deterministic)
{
    CUDA_OK(cudaSetDevice(0));
    operands o;
    operands_make(&o, shapes[3]);
    const epilogue_case *e = &epilogues[1]; /* plain + row sums */
    const size_t bytes = sizeof(float) * (size_t)(o.s.m * o.s.n);
    ge2_tiled_config cfg = {GE2_TILED_32X32, 8};
    float *first = NULL;
    for (int run = 0; run < 20; run++) {
        outputs d;
        outputs_make(&d, &o, e);
        ge2_tiled_gemm g = problem(&o, e, &d);
        ck_assert_msg(ge2_tiled_gemm_run(&g, cfg, NULL, "test") == GE2_OK, "%s", ge2_last_error());
        CUDA_OK(cudaDeviceSynchronize());
        float *c = host_copy(d.c, bytes);
        if (!first)
            first = c;
        else {
            ck_assert_msg(memcmp(c, first, bytes) == 0, "run %d differs from run 0", run);
            free(c);
        }
        outputs_free(&d);
    }
    free(first);
    operands_free(&o);
}
END_TEST

/* The candidates and the refusals need no GPU, but live with the kernel. */
START_TEST(test_tiled_candidates_and_refusals)
{
    ge2_tiled_gemm g;
    memset(&g, 0, sizeof g);
    float dummy[4];
    g.m = 64;
    g.n = 256;
    g.k = 784;
    g.a = g.b = dummy;
    g.a_m = 784;
    g.a_k = 1;
    g.b_k = 1;
    g.b_n = 784;
    g.c = dummy;
    g.epilogue = GE2_TILED_BIAS_ACT;
    g.act = GE2_ACT_RELU;
    char why[96];
    ck_assert_msg(ge2_tiled_supports(&g, why, sizeof why), "%s", why);
    ge2_tiled_config c[GE2_TILED_MAX_CANDIDATES];
    int n = ge2_tiled_candidates(&g, 132, c, GE2_TILED_MAX_CANDIDATES);
    ck_assert_int_ge(n, 6);
    /* 64 x 256 is 16 blocks of 32x32; k = 784 is 49 slices: the model splits k to fill 132 SMs */
    ck_assert_int_eq(c[0].tile, GE2_TILED_32X32);
    ck_assert_int_eq(c[0].splits, 8);
    for (int i = 0; i < n; i++)
        ck_assert(ge2_tiled_config_valid(c[i]));

    /* one slice of k: no split */
    g.k = 16;
    n = ge2_tiled_candidates(&g, 132, c, GE2_TILED_MAX_CANDIDATES);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(c[i].splits, 1);

    g.k = 0;
    ck_assert(!ge2_tiled_supports(&g, why, sizeof why));
    ck_assert_str_eq(why, "an empty dimension");
    g.k = 784;
    g.mask = (uint8_t *)dummy + 1;
    ck_assert(!ge2_tiled_supports(&g, why, sizeof why));
    g.mask = (uint8_t *)dummy;
    g.act = GE2_ACT_TANH;
    ck_assert(!ge2_tiled_supports(&g, why, sizeof why)); /* a mask is relu's */
    g.mask = NULL;
    g.row_sums = dummy;
    ck_assert(!ge2_tiled_supports(&g, why, sizeof why)); /* row sums only with PLAIN */
    g.row_sums = NULL;
    g.epilogue = GE2_TILED_DACT;
    g.act = GE2_ACT_TANH;
    ck_assert(!ge2_tiled_supports(&g, why, sizeof why)); /* act' without saved */
    ck_assert(ge2_tiled_gemm_run(&g, c[0], NULL, "test") == GE2_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "ge2_test: tiled GEMM [64, 784] x [784, 256]"));

    /* configuration text round trip */
    char text[32];
    ge2_tiled_config r;
    ge2_tiled_config_format((ge2_tiled_config){GE2_TILED_64X32, 4}, text, sizeof text);
    ck_assert_str_eq(text, "64x32:4");
    ck_assert(ge2_tiled_config_parse(text, &r) && r.tile == GE2_TILED_64X32 && r.splits == 4);
    ck_assert(!ge2_tiled_config_parse("64x32:3", &r));
    ck_assert(!ge2_tiled_config_parse("64x32:16", &r));
    ck_assert(!ge2_tiled_config_parse("48x32:2", &r));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gemm_tiled");
    TCase *pure = tcase_create("model");
    tcase_add_test(pure, test_tiled_candidates_and_refusals);
    suite_add_tcase(s, pure);
    if (ge2_test_require_gpu("gemm_tiled")) {
        TCase *tc = tcase_create("gpu");
        tcase_set_timeout(tc, 300);
        tcase_add_loop_test(tc, test_tiled_matches_float64, 0, N_SHAPES);
        tcase_add_test(tc, test_tiled_is_deterministic);
        suite_add_tcase(s, tc);
    }
    return ge2_check_run(s);
}
