/* The classifier head's kernels (fusion/head/head.h) against float64 math
 * done here. A two-layer net x -> relu(linear) -> linear -> cross-entropy
 * (no optimizer: the gradients stay readable in the gradient pool) takes one
 * CUDA step; its loss, logits and all four parameter gradients must match
 * the reference, and the kernel report must say which head kernels ran:
 * both, only the gradients' (a hidden width that is no multiple of 4), none
 * (33 classes, or GE2_HEAD_KERNEL=0). One label is out of range, which the
 * loss must skip as CROSS_ENTROPY does; one case smooths its labels; one
 * hidden layer is an exact GELU, whose saved z the gradients' act' reads
 * (relu's is a bit-mask).
 * GE2_MLP_STEP=0: the whole-step kernel would take this net whole.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ge2/ge2.h"
#include "tests/gpu/capture_suite.h"

#define API(call)                                                                                    \
    do {                                                                                             \
        ge2_status st_ = (call);                                                                     \
        ck_assert_msg(st_ == GE2_OK, "%s: %s (%s)", #call, ge2_status_name(st_), ge2_last_error()); \
    } while (0)

typedef struct head_case {
    int batch, in, hidden, classes;
    ge2_activation hidden_act; /* GE2_ACT_RELU or GE2_ACT_GELU_ERF */
    float smoothing;
    bool loss_kernel, gradients_kernel; /* expected in the kernel report */
} head_case;

static uint64_t rng = 1;
static double uniform(void) /* [-0.5, 0.5) */
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) / 9007199254740992.0 - 0.5;
}

static float *random_floats(int64_t n, double scale)
{
    float *v = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)(scale * uniform());
    return v;
}

/* ||got - want|| / ||want||, want in float64. */
static double rel_diff(const float *got, const double *want, int64_t n)
{
    double d = 0.0, w = 0.0;
    for (int64_t i = 0; i < n; i++) {
        d += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
        w += want[i] * want[i];
    }
    return w > 0 ? sqrt(d / w) : sqrt(d);
}

/* The hidden activation and its derivative, in float64. */
static double act_of(ge2_activation act, double z)
{
    return act == GE2_ACT_RELU ? fmax(z, 0.0) : 0.5 * z * (1.0 + erf(z / sqrt(2.0)));
}

static double act_grad(ge2_activation act, double z)
{
    if (act == GE2_ACT_RELU)
        return z > 0.0 ? 1.0 : 0.0;
    return 0.5 * (1.0 + erf(z / sqrt(2.0))) + z * exp(-0.5 * z * z) / sqrt(2.0 * M_PI);
}

typedef struct reference {
    double loss, *logits, *dw1, *db1, *dw2, *db2;
} reference;

/* The step in float64: forward, CROSS_ENTROPY's smoothed mean loss (a
 * label outside [0, C) adds nothing but still counts in the mean), back. */
static void reference_step(const head_case *hc, const float *x, const int32_t *y, const float *w1, const float *b1,
                           const float *w2, const float *b2, reference *r)
{
    const int B = hc->batch, K = hc->in, H = hc->hidden, C = hc->classes;
    double *z1 = calloc((size_t)B * H, sizeof(double)), *dlogits = calloc((size_t)B * C, sizeof(double));
    r->logits = calloc((size_t)B * C, sizeof(double));
    r->dw1 = calloc((size_t)H * K, sizeof(double)), r->db1 = calloc((size_t)H, sizeof(double));
    r->dw2 = calloc((size_t)C * H, sizeof(double)), r->db2 = calloc((size_t)C, sizeof(double));
    r->loss = 0.0;
    for (int b = 0; b < B; b++) {
        for (int j = 0; j < H; j++) {
            double s = b1[j];
            for (int k = 0; k < K; k++)
                s += (double)x[b * K + k] * w1[j * K + k];
            z1[b * H + j] = s;
        }
        double m = -INFINITY, sum_logits = 0.0, se = 0.0;
        for (int c = 0; c < C; c++) {
            double s = b2[c];
            for (int j = 0; j < H; j++)
                s += act_of(hc->hidden_act, z1[b * H + j]) * w2[c * H + j];
            r->logits[b * C + c] = s;
            m = fmax(m, s);
            sum_logits += s;
        }
        for (int c = 0; c < C; c++)
            se += exp(r->logits[b * C + c] - m);
        const double lse = m + log(se), eps = hc->smoothing, off = eps / C;
        if (y[b] < 0 || y[b] >= C)
            continue;
        r->loss += (1.0 - eps) * (lse - r->logits[b * C + y[b]]) + off * (C * lse - sum_logits);
        for (int c = 0; c < C; c++)
            dlogits[b * C + c] = (exp(r->logits[b * C + c] - lse) - (c == y[b] ? 1.0 - eps + off : off)) / B;
    }
    r->loss /= B;
    for (int b = 0; b < B; b++)
        for (int j = 0; j < H; j++) {
            const double h1 = act_of(hc->hidden_act, z1[b * H + j]);
            double dh = 0.0;
            for (int c = 0; c < C; c++) {
                r->dw2[c * H + j] += dlogits[b * C + c] * h1;
                dh += dlogits[b * C + c] * w2[c * H + j];
            }
            const double dz = dh * act_grad(hc->hidden_act, z1[b * H + j]);
            r->db1[j] += dz;
            for (int k = 0; k < K; k++)
                r->dw1[j * K + k] += dz * x[b * K + k];
        }
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++)
            r->db2[c] += dlogits[b * C + c];
    free(z1);
    free(dlogits);
}

static void free_reference(reference *r)
{
    free(r->logits), free(r->dw1), free(r->db1), free(r->dw2), free(r->db2);
}

static char *kernel_report(ge2_program *program)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(f);
    API(ge2_program_kernel_report(program, GE2_MODE_TRAIN, f));
    fclose(f);
    return text;
}

static void read_f32(ge2_program *p, const ge2_tensor *t, float *dst, int64_t n)
{
    API(ge2_program_read_output(p, GE2_MODE_TRAIN, t, dst, sizeof(float) * (size_t)n));
}

static void run_case(const head_case *hc)
{
    const int B = hc->batch, K = hc->in, H = hc->hidden, C = hc->classes;
    setenv("GE2_MLP_STEP", "0", 1);
    ge2_graph *g;
    ge2_tensor *x, *y, *w1, *b1, *w2, *b2, *h, *logits, *loss;
    const ge2_init zeros = {GE2_INIT_ZEROS, 0, 0, 0};
    API(ge2_graph_new(&g));
    API(ge2_input(g, "x", GE2_F32, ge2_shape2(B, K), &x));
    API(ge2_label(g, "y", GE2_I32, ge2_shape1(B), &y));
    API(ge2_parameter(g, "fc1.weight", GE2_F32, ge2_shape2(H, K), zeros, &w1));
    API(ge2_parameter(g, "fc1.bias", GE2_F32, ge2_shape1(H), zeros, &b1));
    API(ge2_parameter(g, "fc2.weight", GE2_F32, ge2_shape2(C, H), zeros, &w2));
    API(ge2_parameter(g, "fc2.bias", GE2_F32, ge2_shape1(C), zeros, &b2));
    API(ge2_linear(g, x, w1, b1, hc->hidden_act, 0, &h));
    API(ge2_linear(g, h, w2, b2, GE2_ACT_NONE, 0, &logits));
    API(ge2_mark_output(g, logits));
    API(ge2_cross_entropy(g, logits, y, hc->smoothing, &loss));
    API(ge2_backward(g, loss));
    ge2_context *ctx;
    ge2_program *p;
    API(ge2_context_new(GE2_DEVICE_CUDA, &ctx));
    API(ge2_compile(ctx, g, NULL, &p));

    float *hx = random_floats((int64_t)B * K, 2.0), *hw1 = random_floats((int64_t)H * K, 1.0);
    float *hb1 = random_floats(H, 0.5), *hw2 = random_floats((int64_t)C * H, 1.0), *hb2 = random_floats(C, 0.5);
    int32_t *hy = malloc(sizeof(int32_t) * (size_t)B);
    for (int b = 0; b < B; b++)
        hy[b] = (int32_t)((uniform() + 0.5) * C) % C;
    hy[B / 2] = C; /* out of range: no loss, no gradient */
    API(ge2_program_set_parameter(p, w1, hw1, sizeof(float) * (size_t)H * K));
    API(ge2_program_set_parameter(p, b1, hb1, sizeof(float) * (size_t)H));
    API(ge2_program_set_parameter(p, w2, hw2, sizeof(float) * (size_t)C * H));
    API(ge2_program_set_parameter(p, b2, hb2, sizeof(float) * (size_t)C));
    const ge2_feed feeds[2] = {{x, hx, ge2_shape2(B, K)}, {y, hy, ge2_shape1(B)}};
    API(ge2_program_step(p, GE2_MODE_TRAIN, feeds, 2));

    reference r;
    reference_step(hc, hx, hy, hw1, hb1, hw2, hb2, &r);
    float got_loss;
    API(ge2_program_read_output(p, GE2_MODE_TRAIN, loss, &got_loss, sizeof got_loss));
    ck_assert_msg(fabs(got_loss - r.loss) <= 1e-5 * fabs(r.loss), "loss %.9g, float64 %.9g", got_loss, r.loss);
    struct {
        const char *name;
        const ge2_tensor *t;
        const double *want;
        int64_t n;
    } checks[] = {{"logits", logits, r.logits, (int64_t)B * C}, {"dW1", ge2_grad(w1), r.dw1, (int64_t)H * K},
                  {"db1", ge2_grad(b1), r.db1, H},                 {"dW2", ge2_grad(w2), r.dw2, (int64_t)C * H},
                  {"db2", ge2_grad(b2), r.db2, C}};
    for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++) {
        float *got = malloc(sizeof(float) * (size_t)checks[i].n);
        read_f32(p, checks[i].t, got, checks[i].n);
        double rel = rel_diff(got, checks[i].want, checks[i].n);
        ck_assert_msg(rel <= 1e-5, "B %d K %d H %d C %d: %s rel diff %g", B, K, H, C, checks[i].name, rel);
        free(got);
    }
    char *report = kernel_report(p);
    ck_assert_msg(!strstr(report, "head kernel (linear + cross-entropy)") == !hc->loss_kernel,
                  "loss head kernel %s expected in:\n%s", hc->loss_kernel ? "" : "not", report);
    ck_assert_msg(!strstr(report, "head kernel (input and weight gradients)") == !hc->gradients_kernel,
                  "gradients head kernel %s expected in:\n%s", hc->gradients_kernel ? "" : "not", report);
    free(report);
    free_reference(&r);
    free(hx), free(hw1), free(hb1), free(hw2), free(hb2), free(hy);
    ge2_program_free(p);
    ge2_context_free(ctx);
    ge2_graph_free(g);
}

START_TEST(test_both_head_kernels)
{
    const head_case hc = {64, 24, 96, 10, GE2_ACT_RELU, 0.0f, true, true};
    run_case(&hc);
}
END_TEST

START_TEST(test_gelu_hidden_layer)
{
    const head_case hc = {48, 16, 64, 10, GE2_ACT_GELU_ERF, 0.0f, true, true};
    run_case(&hc);
}
END_TEST

/* 17 classes take the 32-class kernels; 50 hidden units are no float4 rows:
 * the loss pair stays two launches, the gradients' kernel has a ragged
 * last block. Labels smoothed. */
START_TEST(test_ragged_shapes_and_smoothing)
{
    const head_case hc = {37, 20, 50, 17, GE2_ACT_RELU, 0.1f, false, true};
    run_case(&hc);
}
END_TEST

/* The medium MLP's head shape, at the 32-class limit. */
START_TEST(test_wide_hidden_layer_32_classes)
{
    const head_case hc = {256, 64, 1024, 32, GE2_ACT_RELU, 0.0f, true, true};
    run_case(&hc);
}
END_TEST

START_TEST(test_more_classes_than_a_warp)
{
    const head_case hc = {16, 8, 40, 33, GE2_ACT_RELU, 0.0f, false, false};
    run_case(&hc);
}
END_TEST

/* The reference agrees with the unfused launches too. */
START_TEST(test_switched_off)
{
    setenv("GE2_HEAD_KERNEL", "0", 1);
    const head_case hc = {64, 24, 96, 10, GE2_ACT_RELU, 0.0f, false, false};
    run_case(&hc);
}
END_TEST

GE2_GPU_SUITE_MAIN("head_test", 300, test_both_head_kernels, test_gelu_hidden_layer, test_ragged_shapes_and_smoothing,
                   test_wide_hidden_layer_32_classes, test_more_classes_than_a_warp, test_switched_off)
