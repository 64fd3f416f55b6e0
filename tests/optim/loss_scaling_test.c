/* Dynamic loss scaling (ge2_optimizer_config.loss_scaling) on the CPU
 * backend, against torch.amp.GradScaler's rules restated here.
 *
 * The reference is the unscaled run: with a power-of-two scale every
 * scaled gradient is the unscaled one times a power of two, exactly (no
 * rounding changes when a float is multiplied by 2^k, barring overflow),
 * and the update divides it out exactly; so a scaled run whose gradients
 * stay finite is bit for bit the unscaled one, through the cross-entropy's
 * gradient and through the backward's seed (LOSS_SCALE, for other losses).
 * A step whose gradients overflow or hold a NaN is skipped: parameters,
 * optimizer state and the step count stay, so the run is bit for bit the
 * unscaled run without that step. The scale's path (backoff, growth after
 * the interval, the skipped count) is computed here by GradScaler's rules,
 * and a checkpoint keeps it.
 * loss_scaling_gpu_test runs the same on the CUDA backend, captured: the
 * scale, the check and the skip all happen on the device. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ge2/ge2.h"
#include "tests/data/testutil.h"
#include "tests/support/check_main.h"

#ifdef LOSS_SCALING_CUDA
#include "tests/gpu_probe.h"
#define DEVICE GE2_DEVICE_CUDA
#else
#define DEVICE GE2_DEVICE_CPU
#endif

#define API(call) ck_assert_msg((call) == GE2_OK, "%s: %s", #call, ge2_last_error())

enum { B = 8, IN = 12, HID = 16, OUT = 4 };

/* x -> relu(linear) -> linear -> the loss: cross-entropy against labels
 * (whose gradient output starts the backward), mse against targets (the
 * backward starts from the seed, LOSS_SCALE), or half the cross-entropy
 * (the cross-entropy's gradient is then scaled by the seed's, not its own) */
typedef enum loss_kind { CROSS_ENTROPY, MSE, HALF_CROSS_ENTROPY, LOSS_KINDS } loss_kind;
static const char *const loss_names[LOSS_KINDS] = {"cross-entropy", "mse", "half the cross-entropy"};

typedef struct net {
    ge2_context *ctx;
    ge2_graph *graph;
    ge2_program *program;
    ge2_tensor *x, *y, *loss, *w1;
    bool mse;
} net;

static void net_open_in(net *n, ge2_precision precision, loss_kind kind, const ge2_loss_scaling *scaling,
                        int accumulation)
{
    memset(n, 0, sizeof *n);
    const bool mse = kind == MSE;
    n->mse = mse;
    API(ge2_context_new(DEVICE, &n->ctx));
    API(ge2_graph_new(&n->graph));
    ge2_graph *g = n->graph;
    API(ge2_graph_set_seed(g, 21));
    API(ge2_input(g, "x", GE2_F32, ge2_shape2(B, IN), &n->x));
    if (mse)
        API(ge2_label(g, "t", GE2_F32, ge2_shape2(B, OUT), &n->y));
    else
        API(ge2_label(g, "y", GE2_I32, ge2_shape1(B), &n->y));
    ge2_tensor *b1, *w2, *b2, *h;
    API(ge2_parameter(g, "w1", GE2_F32, ge2_shape2(HID, IN), (ge2_init){GE2_INIT_LINEAR_DEFAULT, 0, 0, IN}, &n->w1));
    API(ge2_parameter(g, "b1", GE2_F32, ge2_shape1(HID), (ge2_init){GE2_INIT_LINEAR_DEFAULT, 0, 0, IN}, &b1));
    API(ge2_parameter(g, "w2", GE2_F32, ge2_shape2(OUT, HID), (ge2_init){GE2_INIT_LINEAR_DEFAULT, 0, 0, HID}, &w2));
    API(ge2_parameter(g, "b2", GE2_F32, ge2_shape1(OUT), (ge2_init){GE2_INIT_LINEAR_DEFAULT, 0, 0, HID}, &b2));
    API(ge2_linear(g, n->x, n->w1, b1, GE2_ACT_RELU, 0, &h));
    API(ge2_linear(g, h, w2, b2, GE2_ACT_NONE, 0, &h));
    if (mse)
        API(ge2_mse_loss(g, h, n->y, &n->loss));
    else
        API(ge2_cross_entropy(g, h, n->y, 0.0f, &n->loss));
    if (kind == HALF_CROSS_ENTROPY)
        API(ge2_scale(g, n->loss, 0.5, &n->loss));
    API(ge2_mark_output(g, n->loss));
    API(ge2_backward(g, n->loss));
    ge2_optimizer_config adam = ge2_optimizer_defaults(GE2_OPT_ADAM);
    adam.lr = 1e-2;
    adam.accumulation_steps = accumulation;
    if (scaling)
        adam.loss_scaling = *scaling;
    API(ge2_optimizer(g, &adam));
    ge2_compile_options o = ge2_compile_defaults();
    /* the whole-step MLP kernel takes no loss scaling: neither run gets it,
     * so both run the same kernels */
    o.disable_fusions = "mlp_step";
    o.precision = precision;
    API(ge2_compile(n->ctx, g, &o, &n->program));
}

static void net_open(net *n, loss_kind kind, const ge2_loss_scaling *scaling, int accumulation)
{
    net_open_in(n, GE2_PRECISION_FP32, kind, scaling, accumulation);
}

static void net_close(net *n)
{
    ge2_program_free(n->program);
    ge2_graph_free(n->graph);
    ge2_context_free(n->ctx);
}

/* One train step on batch `batch`; targets times `big` (mse: gradients
 * that large overflow under a large scale); a NaN in x when poisoned.
 * Returns the loss. */
static float net_step(net *n, int batch, float big, bool poisoned)
{
    float x[B * IN], t[B * OUT], loss;
    int32_t labels[B];
    for (int i = 0; i < B * IN; i++)
        x[i] = (float)sin(0.37 * (i + 1) * (batch + 1));
    for (int i = 0; i < B * OUT; i++)
        t[i] = big * (float)cos(0.21 * (i + 3) * (batch + 2));
    for (int r = 0; r < B; r++)
        labels[r] = (r + batch) % OUT;
    if (poisoned)
        x[5] = NAN;
    ge2_feed f[2] = {{n->x, x, ge2_tensor_shape(n->x)},
                     {n->y, n->mse ? (void *)t : (void *)labels, ge2_tensor_shape(n->y)}};
    API(ge2_program_step(n->program, GE2_MODE_TRAIN, f, 2));
    API(ge2_program_read_output(n->program, GE2_MODE_TRAIN, n->loss, &loss, sizeof loss));
    return loss;
}

static void expect_same_w1(net *a, net *b, const char *what)
{
    float wa[HID * IN], wb[HID * IN];
    API(ge2_program_get_parameter(a->program, a->w1, wa, sizeof wa));
    API(ge2_program_get_parameter(b->program, b->w1, wb, sizeof wb));
    for (int i = 0; i < HID * IN; i++)
        ck_assert_msg(memcmp(&wa[i], &wb[i], sizeof wa[i]) == 0, "%s: w1[%d] %.9g vs %.9g", what, i, (double)wa[i],
                      (double)wb[i]);
}

static ge2_loss_scaling scaling_of(double init, int64_t interval)
{
    ge2_loss_scaling s = ge2_optimizer_defaults(GE2_OPT_ADAM).loss_scaling;
    s.dynamic = true;
    s.init_scale = init;
    s.growth_interval = interval;
    return s;
}

/* GradScaler's rules, restated: the scale after a step that was skipped
 * (found_inf) or not, and its clean-step count */
static void hand_scale(double *scale, int64_t *good, bool found_inf, int64_t interval)
{
    if (found_inf) {
        *scale *= 0.5;
        *good = 0;
    } else if (++*good == interval) {
        *scale *= 2.0;
        *good = 0;
    }
}

/* No overflow: the scaled run is bitwise the unscaled one, whichever way
 * its backward starts (loss_kind); the scale grows by the rules and nothing
 * is skipped. */
START_TEST(a_finite_scaled_run_is_the_unscaled_run)
{
    for (int kind = 0; kind < LOSS_KINDS; kind++) {
        const ge2_loss_scaling s = scaling_of(1024.0, 3);
        net plain, scaled;
        net_open(&plain, (loss_kind)kind, NULL, 1);
        net_open(&scaled, (loss_kind)kind, &s, 1);
        double scale = s.init_scale;
        int64_t good = 0;
        for (int step = 0; step < 8; step++) {
            const float lp = net_step(&plain, step, 1.0f, false), ls = net_step(&scaled, step, 1.0f, false);
            ck_assert_msg(memcmp(&lp, &ls, sizeof lp) == 0, "%s step %d: loss %.9g, scaled %.9g", loss_names[kind],
                          step, (double)lp, (double)ls);
            hand_scale(&scale, &good, false, s.growth_interval);
        }
        expect_same_w1(&plain, &scaled, loss_names[kind]);
        double got;
        int64_t skipped, steps;
        API(ge2_program_loss_scale(scaled.program, &got, &skipped));
        API(ge2_program_step_count(scaled.program, &steps));
        ck_assert_msg(got == scale && skipped == 0 && steps == 8, "scale %g (by hand %g), %lld skipped, %lld steps",
                      got, scale, (long long)skipped, (long long)steps);
        API(ge2_program_loss_scale(plain.program, &got, &skipped));
        ck_assert_msg(got == 1.0 && skipped == 0, "unscaled: scale %g, %lld skipped", got, (long long)skipped);
        net_close(&plain);
        net_close(&scaled);
    }
}
END_TEST

/* A scale too large for the gradients: the first steps overflow and are
 * skipped, the scale halving each time, until they fit; the run is then
 * the unscaled run without those steps, bit for bit. */
START_TEST(overflowing_steps_are_skipped_and_the_scale_backs_off)
{
    const ge2_loss_scaling s = scaling_of(0x1p126, 1000);
    net plain, scaled;
    net_open(&plain, MSE, NULL, 1);
    net_open(&scaled, MSE, &s, 1);
    enum { STEPS = 24 };
    for (int step = 0; step < STEPS; step++)
        net_step(&scaled, 0, 1000.0f, false);
    double scale;
    int64_t skipped, steps;
    API(ge2_program_loss_scale(scaled.program, &scale, &skipped));
    API(ge2_program_step_count(scaled.program, &steps));
    ck_assert_msg(skipped >= 3 && skipped < STEPS && steps == STEPS - skipped,
                  "%lld skipped, %lld updates of %d steps", (long long)skipped, (long long)steps, STEPS);
    ck_assert_msg(scale == ldexp(1.0, 126 - (int)skipped), "scale %g after %lld skips of 2^126", scale,
                  (long long)skipped);
    for (int step = 0; step < STEPS - skipped; step++)
        net_step(&plain, 0, 1000.0f, false);
    expect_same_w1(&plain, &scaled, "after the skipped steps");
    /* a checkpoint keeps the scale's state (GradScaler's state_dict): a
     * fresh program resumes at the same scale and count, and its next step
     * is the first program's */
    const char *path = tu_path("scaled.safetensors");
    API(ge2_checkpoint_save(scaled.program, path, NULL));
    net resumed;
    net_open(&resumed, MSE, &s, 1);
    API(ge2_checkpoint_load(resumed.program, path, NULL));
    double scale_back;
    int64_t skipped_back;
    API(ge2_program_loss_scale(resumed.program, &scale_back, &skipped_back));
    ck_assert_msg(scale_back == scale && skipped_back == skipped, "resumed at scale %g, %lld skipped; saved %g, %lld",
                  scale_back, (long long)skipped_back, scale, (long long)skipped);
    net_step(&scaled, 1, 1000.0f, false);
    net_step(&resumed, 1, 1000.0f, false);
    expect_same_w1(&scaled, &resumed, "resumed from the checkpoint");
    net_close(&resumed);
    net_close(&plain);
    net_close(&scaled);
}
END_TEST

/* A NaN in one step's input: that step is skipped (also when it ends an
 * accumulation, whose earlier micro-batch is dropped with it), the scale
 * halves, and the run goes on as the unscaled run without it. */
START_TEST(a_nan_step_is_skipped)
{
    for (int accumulation = 1; accumulation <= 2; accumulation++) {
        const ge2_loss_scaling s = scaling_of(256.0, 1000);
        net plain, scaled;
        net_open(&plain, CROSS_ENTROPY, NULL, accumulation);
        net_open(&scaled, CROSS_ENTROPY, &s, accumulation);
        const int poisoned = 2 * accumulation + accumulation - 1; /* the last micro-batch of the third update */
        for (int b = 0; b < 5 * accumulation; b++) {
            net_step(&scaled, b, 1.0f, b == poisoned);
            if (b / accumulation != poisoned / accumulation)
                net_step(&plain, b, 1.0f, false);
        }
        double scale;
        int64_t skipped, steps;
        API(ge2_program_loss_scale(scaled.program, &scale, &skipped));
        API(ge2_program_step_count(scaled.program, &steps));
        ck_assert_msg(skipped == 1 && steps == 4 && scale == 128.0,
                      "accumulation %d: %lld skipped, %lld updates, scale %g", accumulation, (long long)skipped,
                      (long long)steps, scale);
        expect_same_w1(&plain, &scaled, accumulation > 1 ? "accumulating" : "one micro-batch");
        net_close(&plain);
        net_close(&scaled);
    }
}
END_TEST

/* Precision FP16 overflows past 65504: under a scale of 2^30 the output
 * gradients the backward GEMMs round to fp16 become inf, though fp32 holds
 * them; those steps are skipped and the scale backs off until they fit,
 * and then the net trains. */
START_TEST(fp16_overflow_backs_the_scale_off)
{
    const ge2_loss_scaling s = scaling_of(0x1p30, 1000);
    net h;
    net_open_in(&h, GE2_PRECISION_FP16, CROSS_ENTROPY, &s, 1);
    float first = 0, last = 0;
    for (int step = 0; step < 40; step++) {
        last = net_step(&h, step % 4, 1.0f, false);
        first = step == 0 ? last : first;
    }
    double scale;
    int64_t skipped;
    API(ge2_program_loss_scale(h.program, &scale, &skipped));
    ck_assert_msg(skipped >= 3 && skipped < 30 && scale == ldexp(1.0, 30 - (int)skipped), "%lld skipped, scale %g",
                  (long long)skipped, scale);
    ck_assert_msg(isfinite(last) && last < 0.8f * first, "loss %g -> %g", (double)first, (double)last);
    net_close(&h);
}
END_TEST

/* Bad settings are refused naming the field; per-parameter updates, which
 * would update a layer before the others' gradients are checked, too. */
START_TEST(bad_settings_are_refused)
{
    ge2_graph *g;
    ge2_tensor *x, *y, *w, *loss, *h;
    API(ge2_graph_new(&g));
    API(ge2_input(g, "x", GE2_F32, ge2_shape2(B, IN), &x));
    API(ge2_label(g, "y", GE2_I32, ge2_shape1(B), &y));
    API(ge2_parameter(g, "w", GE2_F32, ge2_shape2(OUT, IN), (ge2_init){GE2_INIT_LINEAR_DEFAULT, 0, 0, IN}, &w));
    API(ge2_linear(g, x, w, NULL, GE2_ACT_NONE, 0, &h));
    API(ge2_cross_entropy(g, h, y, 0.0f, &loss));
    API(ge2_backward(g, loss));
    ge2_optimizer_config c = ge2_optimizer_defaults(GE2_OPT_ADAM);
    c.loss_scaling = scaling_of(65536.0, 2000);
    c.loss_scaling.growth_factor = 1.0;
    ck_assert_int_eq(ge2_optimizer(g, &c), GE2_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "growth_factor"));
    c.loss_scaling = scaling_of(0.0, 2000);
    ck_assert_int_eq(ge2_optimizer(g, &c), GE2_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "init_scale"));
    c.loss_scaling = scaling_of(65536.0, 0);
    ck_assert_int_eq(ge2_optimizer(g, &c), GE2_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "growth_interval"));
    c.loss_scaling = scaling_of(65536.0, 2000);
    c.update_mode = GE2_UPDATE_PER_PARAMETER;
    ck_assert_int_ne(ge2_optimizer(g, &c), GE2_OK);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "loss scaling"));
    ge2_graph_free(g);
}
END_TEST

int main(void)
{
#ifdef LOSS_SCALING_CUDA
    if (!ge2_test_require_gpu("loss_scaling_gpu_test"))
        return 0;
#endif
    Suite *s = suite_create("loss_scaling");
    TCase *tc = tcase_create("loss_scaling");
    tcase_add_checked_fixture(tc, tu_tmpdir_setup, tu_tmpdir_teardown);
    tcase_add_test(tc, a_finite_scaled_run_is_the_unscaled_run);
    tcase_add_test(tc, overflowing_steps_are_skipped_and_the_scale_backs_off);
    tcase_add_test(tc, a_nan_step_is_skipped);
    tcase_add_test(tc, fp16_overflow_backs_the_scale_off);
    tcase_add_test(tc, bad_settings_are_refused);
    suite_add_tcase(s, tc);
    return ge2_check_run(s);
}
