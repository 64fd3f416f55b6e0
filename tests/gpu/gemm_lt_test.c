/* The cuBLASLt GEMMs (kernels/cuda/gemm_lt.cu) against float64 references
 * computed here, through the kernel interface directly: every LINEAR
 * activation with and without bias and pre-activation stash (so every fused
 * epilogue and every fallback path runs), MATMUL in 2-D with all transpose
 * combinations and batched 3-D, including a shared 2-D operand.
 *
 * Outputs are poisoned with NaN before each launch, so an element the GEMM
 * failed to write cannot pass. fp32 with TF32 off: the tolerance is a
 * normwise 2e-5 (K up to 784; cuBLASLt's GELU epilogue uses its own tanh).
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
#include "ops/linear/linear.h"
#include "tests/gpu/capture_suite.h"
#include "tests/gpu/lt_gpu.h"
#include "ops/ops.h"

static uint64_t rng_state = 0x1234abcdull;

static float uniform(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static float *random_host(int64_t n)
{
    float *h = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        h[i] = uniform();
    return h;
}

static void *to_device(const float *h, int64_t n)
{
    void *d = NULL;
    CUDA_OK(cudaMalloc(&d, (size_t)(n > 0 ? n : 1) * sizeof(float)));
    CUDA_OK(cudaMemcpy(d, h, (size_t)n * sizeof(float), cudaMemcpyHostToDevice));
    return d;
}

static void *poisoned(int64_t n)
{
    void *d = NULL;
    CUDA_OK(cudaMalloc(&d, (size_t)n * sizeof(float)));
    CUDA_OK(cudaMemset(d, 0xff, (size_t)n * sizeof(float))); /* all-ones bits: NaN */
    return d;
}

static float *to_host(const void *d, int64_t n)
{
    float *h = malloc((size_t)n * sizeof(float));
    CUDA_OK(cudaMemcpy(h, d, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
}

static ge2_view view(void *data, ge2_shape shape)
{
    ge2_view v = {data, GE2_F32, shape};
    return v;
}

/* ||got - ref||_inf / max(||ref||_inf, 1); NaN anywhere fails. */
static double rel_err(const float *got, const double *ref, int64_t n, int64_t *nan_at)
{
    double diff = 0, scale = 1;
    *nan_at = -1;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(got[i]) && *nan_at < 0)
            *nan_at = i;
        diff = fmax(diff, fabs(got[i] - ref[i]));
        scale = fmax(scale, fabs(ref[i]));
    }
    return diff / scale;
}

/* ------------------------------------------------------------------ LINEAR */

/* PyTorch's definitions, written out here rather than taken from
 * kernels/activation_math.h, so the reference shares no code with the kernel. */
static double act_ref(ge2_activation act, double z, double slope)
{
    switch (act) {
    case GE2_ACT_NONE: return z;
    case GE2_ACT_RELU: return z > 0 ? z : 0;
    case GE2_ACT_LEAKY_RELU: return z > 0 ? z : slope * z;
    case GE2_ACT_GELU_TANH: return 0.5 * z * (1 + tanh(sqrt(2 / M_PI) * (z + 0.044715 * z * z * z)));
    case GE2_ACT_GELU_ERF: return 0.5 * z * (1 + erf(z / sqrt(2.0)));
    case GE2_ACT_SIGMOID: return 1 / (1 + exp(-z));
    case GE2_ACT_TANH: return tanh(z);
    case GE2_ACT_SILU: return z / (1 + exp(-z));
    default: ck_abort_msg("activation %d has no reference", (int)act); return 0;
    }
}

/* One LINEAR against the float64 reference; tf32 loosens the tolerance to
 * TF32's 10-bit mantissa. The kernel's description lands in `what`. */
static void check_linear(const gpu *g, int64_t rows, int64_t in, int64_t out, ge2_activation act, float slope,
                         bool bias, bool stash, bool tf32, char *what_out, size_t what_size)
{
    const double tol = tf32 ? 5e-3 : 2e-5;
    float *hx = random_host(rows * in), *hw = random_host(out * in), *hb = random_host(out);
    void *dx = to_device(hx, rows * in), *dw = to_device(hw, out * in), *db = to_device(hb, out);
    void *dy = poisoned(rows * out), *dz = poisoned(rows * out);

    ge2_node node;
    memset(&node, 0, sizeof node);
    node.id = 3;
    node.op = GE2_OP_LINEAR;
    node.n_inputs = bias ? 3 : 2;
    node.n_outputs = stash ? 2 : 1;
    GE2_ATTRS(ge2_linear_attrs, node.attrs)->act = act;
    GE2_ATTRS(ge2_linear_attrs, node.attrs)->slope = slope;
    ge2_launch l;
    memset(&l, 0, sizeof l);
    l.node = &node;
    l.n_in = node.n_inputs;
    l.n_out = node.n_outputs;
    l.in[0] = view(dx, ge2_shape2(rows, in));
    l.in[1] = view(dw, ge2_shape2(out, in));
    if (bias)
        l.in[2] = view(db, ge2_shape1(out));
    l.out[0] = view(dy, ge2_shape2(rows, out));
    if (stash)
        l.out[1] = view(dz, ge2_shape2(rows, out));
    gpu_fill_launch(&l, g);
    l.tf32 = tf32;

    const ge2_cuda_kernel *k = &ge2_op_def_of(GE2_OP_LINEAR)->cuda;
    gpu_settings.gemm_kernels = GE2_GEMM_KERNELS_CUBLASLT; /* this suite is about cuBLASLt's epilogues (gemm_tiled_test: ours) */
    gpu_settings.time_epilogues = false; /* the fused epilogues themselves, not whichever is faster */
    ck_assert_msg(k->prepare(&l) == GE2_OK, "prepare: %s", ge2_last_error());
    const char *what = k->describe(&l);
    ck_assert_msg(strstr(what, "cublasLt") != NULL, "describe: %s", what);
    snprintf(what_out, what_size, "%s", what);
    ck_assert_msg(k->launch(&l) == GE2_OK, "launch: %s", ge2_last_error());
    CUDA_OK(cudaStreamSynchronize(g->stream));

    double *zref = malloc((size_t)(rows * out) * sizeof(double));
    double *yref = malloc((size_t)(rows * out) * sizeof(double));
    for (int64_t r = 0; r < rows; r++)
        for (int64_t o = 0; o < out; o++) {
            double acc = bias ? hb[o] : 0.0;
            for (int64_t i = 0; i < in; i++)
                acc += (double)hx[r * in + i] * hw[o * in + i];
            zref[r * out + o] = acc;
            yref[r * out + o] = act_ref(act, acc, slope);
        }
    float *y = to_host(dy, rows * out);
    int64_t nan_at;
    double err = rel_err(y, yref, rows * out, &nan_at);
    ck_assert_msg(nan_at < 0 && err <= tol,
                  "linear [%lld,%lld]x[%lld,%lld]^T %s bias=%d z=%d tf32=%d (%s): y rel err %g, first NaN %lld",
                  (long long)rows, (long long)in, (long long)out, (long long)in, ge2_activation_name(act), bias, stash,
                  tf32, what, err, (long long)nan_at);
    if (stash) {
        float *z = to_host(dz, rows * out);
        err = rel_err(z, zref, rows * out, &nan_at);
        ck_assert_msg(nan_at < 0 && err <= tol, "linear %s bias=%d (%s): z rel err %g, first NaN %lld",
                      ge2_activation_name(act), bias, what, err, (long long)nan_at);
        free(z);
    }
    k->release(&l);
    ck_assert_ptr_null(l.backend_data);
    free(y), free(zref), free(yref), free(hx), free(hw), free(hb);
    cudaFree(dx), cudaFree(dw), cudaFree(db), cudaFree(dy), cudaFree(dz);
}

START_TEST(test_linear_every_activation_bias_and_stash)
{
    static const int64_t sizes[][3] = {{64, 784, 256}, {7, 33, 10}, {1, 5, 3}, {32, 128, 24}};
    gpu g;
    gpu_open(&g);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int act = 0; act < GE2_ACT_COUNT; act++)
            for (int bias = 0; bias < 2; bias++)
                for (int stash = 0; stash < 2; stash++)
                {
                    char what[160];
                    check_linear(&g, sizes[s][0], sizes[s][1], sizes[s][2], (ge2_activation)act, 0.1f, bias, stash,
                                 false, what, sizeof what);
                    /* ReLU + bias without a stash is cuBLASLt's own epilogue, never the fallback. */
                    ck_assert_msg(strstr(what, "tf32") == NULL, "fp32 launch described as: %s", what);
                    if (act == GE2_ACT_RELU && bias && !stash)
                        ck_assert_msg(strstr(what, "RELU_BIAS") && !strstr(what, "+ act"), "relu+bias ran as: %s", what);
                    if (s == 0)
                        printf("gemm_lt_test: linear %s bias=%d z=%d: %s\n", ge2_activation_name((ge2_activation)act),
                               bias, stash, what);
                }
    gpu_close(&g);
}
END_TEST

START_TEST(test_linear_tf32)
{
    gpu g;
    gpu_open(&g);
    char what[160];
    check_linear(&g, 64, 784, 256, GE2_ACT_RELU, 0.0f, true, false, true, what, sizeof what);
    ck_assert_msg(strstr(what, "tf32") != NULL, "tf32 launch described as: %s", what);
    check_linear(&g, 7, 33, 10, GE2_ACT_GELU_TANH, 0.0f, true, true, true, what, sizeof what);
    ck_assert_msg(strstr(what, "tf32") != NULL, "tf32 launch described as: %s", what);
    gpu_close(&g);
}
END_TEST

START_TEST(test_linear_rejects_f64)
{
    gpu g;
    gpu_open(&g);
    ge2_node node;
    memset(&node, 0, sizeof node);
    node.op = GE2_OP_LINEAR;
    node.n_inputs = 2;
    node.n_outputs = 1;
    ge2_launch l;
    memset(&l, 0, sizeof l);
    l.node = &node;
    l.n_in = 2;
    l.n_out = 1;
    l.in[0] = view(NULL, ge2_shape2(4, 8));
    l.in[0].dtype = GE2_F64;
    l.in[1] = view(NULL, ge2_shape2(2, 8));
    l.out[0] = view(NULL, ge2_shape2(4, 2));
    gpu_fill_launch(&l, &g);
    ck_assert_int_eq(ge2_op_def_of(GE2_OP_LINEAR)->cuda.prepare(&l), GE2_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(ge2_last_error(), "linear") != NULL, "message: %s", ge2_last_error());
    ck_assert_ptr_null(l.backend_data);
    gpu_close(&g);
}
END_TEST

/* ------------------------------------------------------------------ MATMUL */

/* Element (r, c) of op(m) where m is stored row-major [rows, cols]. */
static double at(const float *m, int64_t cols, bool trans, int64_t r, int64_t c)
{
    return trans ? m[c * cols + r] : m[r * cols + c];
}

static void check_matmul(const gpu *g, int64_t batch_a, int64_t batch_b, int64_t m, int64_t kk, int64_t n, bool ta,
                         bool tb)
{
    const int64_t batch = batch_a > batch_b ? batch_a : batch_b; /* 0: a 2-D product */
    const int64_t nbatch = batch ? batch : 1;
    const int64_t a_rows = ta ? kk : m, a_cols = ta ? m : kk;
    const int64_t b_rows = tb ? n : kk, b_cols = tb ? kk : n;
    const int64_t na = (batch_a ? batch_a : 1) * a_rows * a_cols, nb = (batch_b ? batch_b : 1) * b_rows * b_cols;
    float *ha = random_host(na), *hb = random_host(nb);
    void *da = to_device(ha, na), *db = to_device(hb, nb), *dy = poisoned(nbatch * m * n);

    ge2_node node;
    memset(&node, 0, sizeof node);
    node.id = 9;
    node.op = GE2_OP_MATMUL;
    node.n_inputs = 2;
    node.n_outputs = 1;
    GE2_ATTRS(ge2_matmul_attrs, node.attrs)->trans_a = ta;
    GE2_ATTRS(ge2_matmul_attrs, node.attrs)->trans_b = tb;
    ge2_launch l;
    memset(&l, 0, sizeof l);
    l.node = &node;
    l.n_in = 2;
    l.n_out = 1;
    l.in[0] = view(da, batch_a ? ge2_shape3(batch_a, a_rows, a_cols) : ge2_shape2(a_rows, a_cols));
    l.in[1] = view(db, batch_b ? ge2_shape3(batch_b, b_rows, b_cols) : ge2_shape2(b_rows, b_cols));
    l.out[0] = view(dy, batch > 0 ? ge2_shape3(batch, m, n) : ge2_shape2(m, n));
    gpu_fill_launch(&l, g);
    const ge2_cuda_kernel *k = &ge2_op_def_of(GE2_OP_MATMUL)->cuda;
    ck_assert_msg(k->prepare(&l) == GE2_OK, "prepare: %s", ge2_last_error());
    ck_assert_msg(k->launch(&l) == GE2_OK, "launch: %s", ge2_last_error());
    CUDA_OK(cudaStreamSynchronize(g->stream));

    double *ref = malloc((size_t)(nbatch * m * n) * sizeof(double));
    for (int64_t bi = 0; bi < nbatch; bi++) {
        const float *pa = ha + (batch_a ? bi * a_rows * a_cols : 0);
        const float *pb = hb + (batch_b ? bi * b_rows * b_cols : 0);
        for (int64_t r = 0; r < m; r++)
            for (int64_t c = 0; c < n; c++) {
                double acc = 0;
                for (int64_t i = 0; i < kk; i++)
                    acc += at(pa, a_cols, ta, r, i) * at(pb, b_cols, tb, i, c);
                ref[(bi * m + r) * n + c] = acc;
            }
    }
    float *y = to_host(dy, nbatch * m * n);
    int64_t nan_at;
    double err = rel_err(y, ref, nbatch * m * n, &nan_at);
    ck_assert_msg(nan_at < 0 && err <= 2e-5,
                  "matmul batch %lld/%lld [%lld,%lld,%lld] ta=%d tb=%d (%s): rel err %g, first NaN %lld",
                  (long long)batch_a, (long long)batch_b, (long long)m, (long long)kk, (long long)n, ta, tb,
                  k->describe(&l), err, (long long)nan_at);
    k->release(&l);
    free(y), free(ref), free(ha), free(hb);
    cudaFree(da), cudaFree(db), cudaFree(dy);
}

START_TEST(test_matmul_2d_all_transposes)
{
    gpu g;
    gpu_open(&g);
    for (int t = 0; t < 4; t++) {
        check_matmul(&g, 0, 0, 64, 256, 784, t & 1, t & 2); /* the backward's dX / dW shapes */
        check_matmul(&g, 0, 0, 7, 13, 5, t & 1, t & 2);
    }
    gpu_close(&g);
}
END_TEST

START_TEST(test_matmul_batched)
{
    gpu g;
    gpu_open(&g);
    for (int t = 0; t < 4; t++) {
        check_matmul(&g, 3, 3, 16, 24, 8, t & 1, t & 2);
        check_matmul(&g, 5, 0, 6, 7, 9, t & 1, t & 2); /* b shared by every batch item */
        check_matmul(&g, 0, 4, 6, 7, 9, t & 1, t & 2); /* a shared */
    }
    gpu_close(&g);
}
END_TEST

GE2_GPU_SUITE_MAIN("gemm_lt_test", 300, test_linear_every_activation_bias_and_stash, test_linear_tf32,
                   test_linear_rejects_f64, test_matmul_2d_all_transposes, test_matmul_batched)
