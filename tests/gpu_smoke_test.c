/* GPU smoke suite: the device answers, a kernel computes, cuBLASLt's FP32
 * SGEMM agrees with CPU cblas_sgemm. All CUDA state is created inside the test
 * functions (Check forks each one); main() only probes, in a child process. */
#include "kernels/cuda/smoke.h"
#include "tests/gpu_probe.h"

#include <cblas.h>
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* Deterministic values in [-1, 1). */
static void fill(float *x, size_t n, uint32_t seed)
{
    uint32_t s = seed * 2654435761u + 1u;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)((s >> 8) * (1.0 / 8388608.0)) - 1.0f;
    }
}

START_TEST(device_query)
{
    char msg[256] = "";
    int count = 0;
    ck_assert_msg(ge2_cuda_smoke_device_count(&count, msg, sizeof msg) == 0, "%s", msg);
    ck_assert_int_ge(count, 1);
    char name[256] = "";
    int major = 0, minor = 0;
    size_t bytes = 0;
    ck_assert_msg(
        ge2_cuda_smoke_device_info(0, name, sizeof name, &major, &minor, &bytes, msg, sizeof msg) ==
            0,
        "%s", msg);
    ck_assert_str_ne(name, "");
    ck_assert_int_ge(major, 9); /* the build targets sm_90 */
    ck_assert_uint_gt(bytes, 0);
}
END_TEST

START_TEST(axpy_kernel)
{
    const int n = 1000003; /* not a multiple of the block size */
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    ck_assert_ptr_nonnull(x);
    ck_assert_ptr_nonnull(y);
    for (int i = 0; i < n; i++) {
        x[i] = (float)(i % 1000);
        y[i] = 1.0f;
    }
    char msg[256] = "";
    ck_assert_msg(ge2_cuda_smoke_axpy(n, 2.0f, x, y, msg, sizeof msg) == 0, "%s", msg);
    for (int i = 0; i < n; i++)
        ck_assert_float_eq(y[i], 2.0f * (float)(i % 1000) + 1.0f);
    free(x);
    free(y);
}
END_TEST

/* Per element |gpu - cpu| <= 1e-5 * sum_k |a_ik b_kj|: a 1e-5 relative bound
 * that stays meaningful where the dot product cancels to near zero. */
static void check_sgemm(int m, int n, int k)
{
    float *a = malloc((size_t)m * k * sizeof *a);
    float *b = malloc((size_t)k * n * sizeof *b);
    float *gpu = malloc((size_t)m * n * sizeof *gpu);
    float *cpu = malloc((size_t)m * n * sizeof *cpu);
    ck_assert(a && b && gpu && cpu);
    fill(a, (size_t)m * k, 1);
    fill(b, (size_t)k * n, 2);
    char msg[256] = "";
    ck_assert_msg(ge2_cuda_smoke_sgemm(m, n, k, a, b, gpu, msg, sizeof msg) == 0, "%s", msg);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f, cpu,
                n);
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < n; j++) {
            double mag = 0.0;
            for (int p = 0; p < k; p++)
                mag += fabs((double)a[(size_t)i * k + p] * b[(size_t)p * n + j]);
            double diff = fabs((double)gpu[(size_t)i * n + j] - cpu[(size_t)i * n + j]);
            ck_assert_msg(diff <= 1e-5 * mag + 1e-30,
                          "sgemm %dx%dx%d: c[%d,%d] gpu %.9g cpu %.9g (|diff| %.3g > 1e-5 * %.3g)",
                          m, n, k, i, j, gpu[(size_t)i * n + j], cpu[(size_t)i * n + j], diff,
                          mag);
        }
    }
    free(a);
    free(b);
    free(gpu);
    free(cpu);
}

START_TEST(cublaslt_sgemm_matches_cblas)
{
    check_sgemm(256, 256, 256);
    check_sgemm(67, 45, 129); /* odd shapes */
    check_sgemm(64, 10, 784); /* the MLP's input layer shape, transposed roles */
}
END_TEST

static Suite *gpu_smoke_suite(void)
{
    Suite *s = suite_create("gpu_smoke");
    TCase *tc = tcase_create("core");
    /* CUDA context + cuBLASLt load can exceed Check's 4 s default. */
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, device_query);
    tcase_add_test(tc, axpy_kernel);
    tcase_add_test(tc, cublaslt_sgemm_matches_cblas);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (!ge2_test_require_gpu("gpu_smoke_test"))
        return EXIT_FAILURE;
    SRunner *sr = srunner_create(gpu_smoke_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
