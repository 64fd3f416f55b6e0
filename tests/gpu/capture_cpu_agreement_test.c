/* Capture stability, part 2: the replayed CUDA step agrees with the CPU
 * backend (the reference: same compiled program, plain C kernels, cblas).
 * fp32 on both sides, TF32 off.
 *
 *   (3) one training step: loss and every parameter within 1e-5 relative.
 *   (6) a new learning rate between replays takes effect (the parameter
 *       delta matches a CPU step at the new LR) without a new capture.
 *   (7) a second batch size is a second graph key; both keep replaying and
 *       agree with the CPU; exactly 2 captures.
 *   Per-parameter optimizer updates (one update node per layer, gradients
 *   in the arena): replayed on CUDA, bitwise the flat update on CUDA (the
 *   same GEMMs and element math, only where the gradients live differs) and
 *   within rounding of the CPU's per-parameter run.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/gpu/capture_mlp.h"
#include "tests/gpu/capture_suite.h"

#define BATCH 64
#define SEED 4321
#define DATA_SEED 7
#define LR 1e-3

#define API(call) ck_assert_msg((call) == GE2_OK, "%s: %s", #call, ge2_last_error())

/* ||(a1 - a0) - (b1 - b0)||_2 / ||b1 - b0||_2 over all parameters: the update
 * itself, compared normwise (see mlp_rel_diff). *b_max: the largest |b1 - b0|. */
static double delta_rel_diff(const float *a0, const float *a1, const float *b0, const float *b1, double *b_max)
{
    double diff = 0.0, norm = 0.0, big = 0.0;
    for (int64_t i = 0; i < mlp_total_numel(); i++) {
        double da = (double)a1[i] - a0[i], db = (double)b1[i] - b0[i];
        diff += (da - db) * (da - db);
        norm += db * db;
        big = fmax(big, fabs(db));
    }
    *b_max = big;
    return norm > 0 ? sqrt(diff / norm) : sqrt(diff);
}

START_TEST(test_one_step_matches_cpu)
{
    mlp gpu, cpu;
    mlp_open(&gpu, GE2_DEVICE_CUDA, BATCH, SEED, LR, false);
    mlp_open(&cpu, GE2_DEVICE_CPU, BATCH, SEED, LR, false);
    float *g0 = mlp_get_params(&gpu), *c0 = mlp_get_params(&cpu);
    ck_assert_msg(mlp_rel_diff(g0, c0) == 0.0, "initial parameters differ between backends");
    float lg = mlp_step(&gpu, DATA_SEED, 0, BATCH, true);
    float lc = mlp_step(&cpu, DATA_SEED, 0, BATCH, true);
    ck_assert_msg(fabs(lg - lc) <= 1e-5 * fabs(lc), "loss: cuda %.9g, cpu %.9g", lg, lc);
    /* Cross-entropy of 10 near-uniform classes: about ln 10 before any training. */
    ck_assert_msg(fabs(lc - log(10.0)) < 0.5, "cpu loss %g is not near ln(10)", lc);
    float *g1 = mlp_get_params(&gpu), *c1 = mlp_get_params(&cpu);
    double rel = mlp_rel_diff(g1, c1);
    char where[160];
    ck_assert_msg(rel <= 1e-5, "parameters after one step: rel diff %g > 1e-5; %s", rel,
                  mlp_worst_element(g1, c1, c0, where, sizeof where));
    double scale;
    double drel = delta_rel_diff(g0, g1, c0, c1, &scale);
    ck_assert_msg(scale > 0.5 * LR, "the CPU step did not update (max |delta| %g)", scale);
    ck_assert_msg(drel <= 1e-3, "parameter deltas: rel diff %g > 1e-3; %s", drel,
                  mlp_worst_element(g1, c1, c0, where, sizeof where));
    free(g0), free(c0), free(g1), free(c1);
    mlp_close(&gpu);
    mlp_close(&cpu);
}
END_TEST

START_TEST(test_lr_change_takes_effect_without_recapture)
{
    const double new_lr = 1e-2;
    mlp gpu, cpu;
    mlp_open(&gpu, GE2_DEVICE_CUDA, BATCH, SEED, LR, false);
    mlp_open(&cpu, GE2_DEVICE_CPU, BATCH, SEED, LR, false);
    for (int i = 0; i < 3; i++) {
        mlp_step(&gpu, DATA_SEED, i, BATCH, false);
        mlp_step(&cpu, DATA_SEED, i, BATCH, false);
    }
    ck_assert_int_eq(ge2_program_capture_count(gpu.program), 1);
    float *g0 = mlp_get_params(&gpu), *c0 = mlp_get_params(&cpu);
    ck_assert_int_eq(ge2_set_lr(gpu.program, new_lr), GE2_OK);
    ck_assert_int_eq(ge2_set_lr(cpu.program, new_lr), GE2_OK);
    double got_lr = 0;
    ck_assert_int_eq(ge2_get_lr(gpu.program, &got_lr), GE2_OK);
    ck_assert_double_eq_tol(got_lr, new_lr, 1e-9); /* the control block holds it as f32 */
    mlp_step(&gpu, DATA_SEED, 3, BATCH, false);
    mlp_step(&cpu, DATA_SEED, 3, BATCH, false);
    ck_assert_int_eq(ge2_program_capture_count(gpu.program), 1); /* replayed, not re-captured */
    float *g1 = mlp_get_params(&gpu), *c1 = mlp_get_params(&cpu);
    double scale;
    double drel = delta_rel_diff(g0, g1, c0, c1, &scale);
    /* Adam's step is about lr per element early on: the new LR shows as a
     * largest delta far above the old LR. */
    ck_assert_msg(scale > 5 * LR, "cpu delta %g does not reflect lr %g", scale, new_lr);
    char where[160];
    ck_assert_msg(drel <= 1e-3, "delta at the new LR: cuda vs cpu rel diff %g > 1e-3; %s", drel,
                  mlp_worst_element(g1, c1, c0, where, sizeof where));
    int64_t steps = -1;
    ck_assert_int_eq(ge2_program_step_count(gpu.program, &steps), GE2_OK);
    ck_assert_int_eq(steps, 4);
    free(g0), free(c0), free(g1), free(c1);
    mlp_close(&gpu);
    mlp_close(&cpu);
}
END_TEST

START_TEST(test_second_batch_size_is_second_key)
{
    /* The larger key first: a smaller key fits the shared arena, so nothing
     * is re-resolved and each key is captured exactly once. */
    static const int batches[] = {64, 32, 64, 32, 64, 32, 64, 32};
    const int n = (int)(sizeof batches / sizeof batches[0]);
    mlp gpu, cpu;
    mlp_open(&gpu, GE2_DEVICE_CUDA, BATCH, SEED, LR, false);
    mlp_open(&cpu, GE2_DEVICE_CPU, BATCH, SEED, LR, false);
    for (int i = 0; i < n; i++) {
        float lg = mlp_step(&gpu, DATA_SEED, i, batches[i], true);
        float lc = mlp_step(&cpu, DATA_SEED, i, batches[i], true);
        ck_assert_msg(fabs(lg - lc) <= 1e-4 * fabs(lc), "step %d (batch %d): loss cuda %.9g, cpu %.9g", i,
                      batches[i], lg, lc);
    }
    ck_assert_int_eq(ge2_program_capture_count(gpu.program), 2);
    ck_assert_int_eq(ge2_program_key_count(gpu.program), 2);
    float *g = mlp_get_params(&gpu), *c = mlp_get_params(&cpu);
    double rel = mlp_rel_diff(g, c);
    char where[160];
    ck_assert_msg(rel <= 1e-4, "parameters after %d steps over two keys: rel diff %g; %s", n, rel,
                  mlp_worst_element(g, c, NULL, where, sizeof where));
    free(g), free(c);
    mlp_close(&gpu);
    mlp_close(&cpu);
}
END_TEST

START_TEST(test_per_parameter_updates_agree)
{
    enum { STEPS = 20 };
    mlp per, flat, cpu;
    /* bitwise: the same GEMM kernels on both sides, not the whole-step
     * kernel that would take the flat program (this process only: Check forks) */
    setenv("GE2_MLP_STEP", "0", 1);
    mlp_open_mode(&per, GE2_DEVICE_CUDA, BATCH, SEED, LR, false, GE2_UPDATE_PER_PARAMETER);
    mlp_open_mode(&flat, GE2_DEVICE_CUDA, BATCH, SEED, LR, false, GE2_UPDATE_FLAT);
    mlp_open_mode(&cpu, GE2_DEVICE_CPU, BATCH, SEED, LR, false, GE2_UPDATE_PER_PARAMETER);
    ge2_plan_stats st;
    ck_assert_int_eq(ge2_program_plan_stats(per.program, GE2_MODE_TRAIN, &st), GE2_OK);
    ck_assert_int_eq(st.update_mode, GE2_UPDATE_PER_PARAMETER);
    ck_assert_int_eq(st.update_nodes, 3);
    ck_assert_uint_eq(st.gradient_bytes, 0);
    for (int i = 0; i < STEPS; i++) {
        /* a batch of 32 in the middle: a second key, its own update nodes */
        int b = i == 10 ? BATCH / 2 : BATCH;
        float lp = mlp_step(&per, DATA_SEED, i, b, true);
        float lf = mlp_step(&flat, DATA_SEED, i, b, true);
        float lc = mlp_step(&cpu, DATA_SEED, i, b, true);
        ck_assert_msg(memcmp(&lp, &lf, sizeof lp) == 0, "step %d: loss per-parameter %.9g, flat %.9g (cuda)", i, lp,
                      lf);
        ck_assert_msg(fabs(lp - lc) <= 1e-4 * fabs(lc), "step %d: loss cuda %.9g, cpu %.9g", i, lp, lc);
    }
    ck_assert_int_eq(ge2_program_capture_count(per.program), 2);
    ck_assert_int_eq(ge2_program_launch_count(per.program, GE2_MODE_TRAIN),
                     ge2_program_launch_count(flat.program, GE2_MODE_TRAIN) + 2);
    int64_t steps = -1;
    ck_assert_int_eq(ge2_program_step_count(per.program, &steps), GE2_OK);
    ck_assert_int_eq(steps, STEPS); /* once per step, not once per update node */
    float *p = mlp_get_params(&per), *f = mlp_get_params(&flat), *c = mlp_get_params(&cpu);
    char where[160];
    ck_assert_msg(memcmp(p, f, (size_t)mlp_total_numel() * sizeof(float)) == 0,
                  "per-parameter and flat parameters differ on CUDA; %s", mlp_worst_element(p, f, NULL, where,
                                                                                          sizeof where));
    double rel = mlp_rel_diff(p, c);
    ck_assert_msg(rel <= 1e-4, "per-parameter parameters after %d steps: cuda vs cpu rel diff %g; %s", STEPS, rel,
                  mlp_worst_element(p, c, NULL, where, sizeof where));
    free(p), free(f), free(c);
    mlp_close(&per);
    mlp_close(&flat);
    mlp_close(&cpu);
}
END_TEST

/* A vocabulary-wide head whose cross-entropy writes the logits' gradient
 * over the logits (ge2_op_def.over_output: the planner gives both one
 * buffer on either backend): one SGD step on CUDA against the CPU, at 4,104
 * columns (the kernel's eight-a-thread form), 3,001 (one a thread) and, in
 * bf16 with the storage pass, 4,104 (bf16 logits and gradient). */
static void head_step(ge2_device device, int64_t cols, ge2_precision precision, float *loss, float *weight)
{
    enum { B = 64, IN = 40 };
    ge2_graph *g;
    ge2_tensor *x, *labels, *w, *logits, *l;
    API(ge2_graph_new(&g));
    API(ge2_input(g, "x", GE2_F32, ge2_shape2(B, IN), &x));
    API(ge2_label(g, "labels", GE2_I32, ge2_shape1(B), &labels));
    API(ge2_parameter(g, "head.weight", GE2_F32, ge2_shape2(cols, IN), (ge2_init){GE2_INIT_UNIFORM, -0.5, 0.5, 0},
                      &w));
    API(ge2_linear(g, x, w, NULL, GE2_ACT_NONE, 0, &logits));
    API(ge2_cross_entropy_padded(g, logits, labels, 0.1f, cols - 7, &l));
    API(ge2_backward(g, l));
    ge2_optimizer_config sgd = ge2_optimizer_defaults(GE2_OPT_SGD);
    sgd.lr = 0.5;
    API(ge2_optimizer(g, &sgd));
    ge2_context *ctx;
    ge2_program *prog;
    API(ge2_context_new(device, &ctx));
    ge2_compile_options o = ge2_compile_defaults();
    o.precision = precision;
    API(ge2_compile(ctx, g, &o, &prog));
    float xd[B * IN];
    int32_t yd[B];
    uint64_t rng = 99;
    for (int i = 0; i < B * IN; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        xd[i] = (float)((double)(rng >> 11) / 9007199254740992.0 * 4.0 - 2.0);
    }
    for (int i = 0; i < B; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        yd[i] = i == 0 ? (int32_t)(cols - 8) : (int32_t)((rng >> 33) % (uint64_t)(cols - 7));
    }
    ge2_feed f[2] = {{x, xd, ge2_shape2(B, IN)}, {labels, yd, ge2_shape1(B)}};
    API(ge2_program_step(prog, GE2_MODE_TRAIN, f, 2));
    API(ge2_program_read_output(prog, GE2_MODE_TRAIN, l, loss, sizeof *loss));
    API(ge2_program_get_parameter(prog, w, weight, sizeof(float) * (size_t)(cols * IN)));
    ge2_program_free(prog);
    ge2_context_free(ctx);
    ge2_graph_free(g);
}

START_TEST(test_vocabulary_head_over_logits_matches_cpu)
{
    static const struct {
        int64_t cols;
        ge2_precision precision;
        double tolerance;
    } cases[] = {{4104, GE2_PRECISION_FP32, 1e-5}, {3001, GE2_PRECISION_FP32, 1e-5}, {4104, GE2_PRECISION_BF16, 1e-2}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int64_t n = cases[c].cols * 40;
        float lg, lc, *wg = malloc(sizeof(float) * (size_t)n), *wc = malloc(sizeof(float) * (size_t)n);
        ck_assert(wg && wc);
        head_step(GE2_DEVICE_CUDA, cases[c].cols, cases[c].precision, &lg, wg);
        head_step(GE2_DEVICE_CPU, cases[c].cols, cases[c].precision, &lc, wc);
        ck_assert_msg(fabs(lg - lc) <= cases[c].tolerance * fabs(lc), "%lld columns: loss cuda %.9g, cpu %.9g",
                      (long long)cases[c].cols, lg, lc);
        double diff = 0, norm = 0;
        for (int64_t i = 0; i < n; i++) {
            diff += ((double)wg[i] - wc[i]) * ((double)wg[i] - wc[i]);
            norm += (double)wc[i] * wc[i];
        }
        ck_assert_msg(sqrt(diff / norm) <= cases[c].tolerance, "%lld columns: the head after a step differs by %g",
                      (long long)cases[c].cols, sqrt(diff / norm));
        free(wg);
        free(wc);
    }
}
END_TEST

GE2_GPU_SUITE_MAIN("capture_cpu_agreement_test", 600, test_one_step_matches_cpu,
                   test_lr_change_takes_effect_without_recapture, test_second_batch_size_is_second_key,
                   test_per_parameter_updates_agree, test_vocabulary_head_over_logits_matches_cpu)
