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

GE2_GPU_SUITE_MAIN("capture_cpu_agreement_test", 600, test_one_step_matches_cpu,
                   test_lr_change_takes_effect_without_recapture, test_second_batch_size_is_second_key,
                   test_per_parameter_updates_agree)
