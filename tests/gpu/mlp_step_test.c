/* The whole-step MLP kernel (fusion/mlp_step/mlp_step.h) on the GPU.
 *
 * Reference: the CPU backend running the same compiled program (plain C
 * kernels, cblas GEMMs) from the same initial parameters and batches.
 *   - every case trains a few steps as one kernel (the captured graph has
 *     exactly one kernel node) and agrees with the CPU: the first step's
 *     gradients (rounding only), every step's loss and accuracy count, and
 *     the parameters after the last step;
 *   - two runs are bit-identical (every sum in a fixed order);
 *   - GE2_MLP_STEP=0 gives the launch-by-launch step, which agrees too.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/gpu/capture_suite.h"
#include "tests/gpu/mlp_spec.h"

#define STEPS 6
#define SEED 99
#define DATA_SEED 3
/* fp32 on both sides, summed in different orders: gradients agree to
 * rounding. Parameters after a few Adam steps less so: an element whose
 * gradient is near eps (cancellation in dzᵀx) moves by lr·g/(|g| + eps), so
 * its last-bit differences become differences of its update (measured on
 * 784-1024-1024-10: 2e-4 normwise after 6 steps, with 1e-5 losses). A wrong
 * kernel is off by O(1). */
#define GRAD_TOL 1e-5
#define PARAM_TOL 1e-3
#define LOSS_TOL 1e-5

static double rel_diff(const float *a, const float *b, int64_t n)
{
    double d = 0.0, s = 0.0;
    for (int64_t i = 0; i < n; i++) {
        ck_assert_msg(isfinite(a[i]), "element %lld is not finite", (long long)i);
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        s += (double)b[i] * b[i];
    }
    return s > 0 ? sqrt(d / s) : sqrt(d);
}

static mlp_spec case_spec(int which)
{
    static const struct {
        const char *name;
        int n_layers;
        int64_t dims[SPEC_MAX_LAYERS + 1];
        int batch;
        ge2_optimizer_kind kind;
    } cases[] = {
        {"bench small 784-256-128-10", 3, {784, 256, 128, 10}, 64, GE2_OPT_ADAM},
        {"odd 33-70-5, smoothing, AdamW", 2, {33, 70, 5}, 37, GE2_OPT_ADAMW},
        {"one layer 20-17, SGD momentum", 1, {20, 17}, 3, GE2_OPT_SGD},
        {"deep 64-48-40-36-24, a linear hidden layer, SGD", 4, {64, 48, 40, 36, 24}, 130, GE2_OPT_SGD},
        {"k in chunks 1024-32-10", 2, {1024, 32, 10}, 32, GE2_OPT_ADAM},
    };
    mlp_spec s = mlp_spec_of(cases[which].name, cases[which].n_layers, cases[which].dims, cases[which].batch,
                             cases[which].kind);
    s.accuracy = true;
    if (which == 1) {
        s.label_smoothing = 0.1f;
        s.optimizer.weight_decay = 0.05;
    }
    if (which == 2) {
        s.optimizer.momentum = 0.9;
        s.optimizer.nesterov = true;
    }
    if (which == 3)
        s.act[1] = GE2_ACT_NONE;
    return s;
}
#define N_CASES 5

/* Normwise difference of every parameter's gradient after the latest step. */
static void assert_grads_agree(spec_model *gpu, spec_model *cpu)
{
    for (int p = 0; p < 2 * gpu->spec.n_layers; p++) {
        const ge2_tensor *g = ge2_grad(gpu->params[p]), *c = ge2_grad(cpu->params[p]);
        const int64_t *d = &gpu->spec.dims[p / 2];
        int64_t n = p % 2 ? d[1] : d[1] * d[0]; /* w [out, in], b [out] */
        float *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
        ck_assert(g && c && a && b);
        ck_assert_int_eq(ge2_program_read_output(gpu->program, GE2_MODE_TRAIN, g, a, (size_t)n * sizeof *a), GE2_OK);
        ck_assert_int_eq(ge2_program_read_output(cpu->program, GE2_MODE_TRAIN, c, b, (size_t)n * sizeof *b), GE2_OK);
        double rel = rel_diff(a, b, n);
        ck_assert_msg(rel <= GRAD_TOL, "%s: gradient of parameter %d differs by %g (> %g)", gpu->spec.name, p, rel,
                      GRAD_TOL);
        free(a);
        free(b);
    }
}

/* The last batch's features, as read_output gives them: the whole-step
 * kernel reads them where the copy engine staged them and never writes the
 * feed region, so this checks that read_output finds them there. */
static void assert_inputs_agree(spec_model *gpu, spec_model *cpu)
{
    const int64_t n = gpu->spec.batch * gpu->spec.dims[0];
    float *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    ck_assert(a && b);
    ck_assert_int_eq(ge2_program_read_output(gpu->program, GE2_MODE_TRAIN, gpu->x, a, (size_t)n * sizeof *a), GE2_OK);
    ck_assert_int_eq(ge2_program_read_output(cpu->program, GE2_MODE_TRAIN, cpu->x, b, (size_t)n * sizeof *b), GE2_OK);
    ck_assert_msg(memcmp(a, b, (size_t)n * sizeof *a) == 0, "%s: the last batch read back differs", gpu->spec.name);
    free(a);
    free(b);
}

static float read_correct(spec_model *m)
{
    float c = 0.0f;
    ck_assert_int_eq(ge2_program_read_output(m->program, GE2_MODE_TRAIN, m->correct, &c, sizeof c), GE2_OK);
    return c;
}

START_TEST(test_matches_cpu)
{
    for (int which = 0; which < N_CASES; which++) {
        mlp_spec spec = case_spec(which);
        spec_model gpu, cpu;
        spec_open(&gpu, &spec, GE2_DEVICE_CUDA, SEED);
        spec_open(&cpu, &spec, GE2_DEVICE_CPU, SEED);
        for (int i = 0; i < STEPS; i++) {
            float lg = spec_step(&gpu, DATA_SEED, i), lc = spec_step(&cpu, DATA_SEED, i);
            ck_assert_msg(fabsf(lg - lc) <= LOSS_TOL * fabsf(lc), "%s step %d: loss cuda %.9g, cpu %.9g", spec.name,
                          i, lg, lc);
            if (i == 0)
                assert_grads_agree(&gpu, &cpu);
            float cg = read_correct(&gpu), cc = read_correct(&cpu);
            ck_assert_msg(fabsf(cg - cc) <= 1.0f, "%s step %d: correct cuda %g, cpu %g", spec.name, i, cg, cc);
            assert_inputs_agree(&gpu, &cpu);
        }
        int kernels = ge2_program_graph_kernel_count(gpu.program, GE2_MODE_TRAIN);
        ck_assert_msg(kernels == 1, "%s: the captured step has %d kernels, expected the one whole-step kernel",
                      spec.name, kernels);
        int64_t n, n2;
        float *pg = spec_params(&gpu, &n), *pc = spec_params(&cpu, &n2);
        double rel = rel_diff(pg, pc, n);
        ck_assert_msg(rel <= PARAM_TOL, "%s: parameters after %d steps differ by %g (> %g)", spec.name, STEPS, rel,
                      PARAM_TOL);
        free(pg);
        free(pc);
        spec_close(&gpu);
        spec_close(&cpu);
    }
}
END_TEST

START_TEST(test_runs_are_bit_identical)
{
    mlp_spec spec = case_spec(0);
    spec_model a, b;
    spec_open(&a, &spec, GE2_DEVICE_CUDA, SEED);
    spec_open(&b, &spec, GE2_DEVICE_CUDA, SEED);
    for (int i = 0; i < 3 * STEPS; i++) {
        float la = spec_step(&a, DATA_SEED, i), lb = spec_step(&b, DATA_SEED, i);
        ck_assert_msg(memcmp(&la, &lb, sizeof la) == 0, "step %d: loss %.9g vs %.9g", i, la, lb);
    }
    int64_t n, n2;
    float *pa = spec_params(&a, &n), *pb = spec_params(&b, &n2);
    ck_assert_msg(memcmp(pa, pb, (size_t)n * sizeof *pa) == 0, "parameters differ between two runs");
    free(pa);
    free(pb);
    spec_close(&a);
    spec_close(&b);
}
END_TEST

START_TEST(test_switched_off_agrees)
{
    mlp_spec spec = case_spec(0);
    spec_model fused, split;
    spec_open(&fused, &spec, GE2_DEVICE_CUDA, SEED);
    setenv("GE2_MLP_STEP", "0", 1); /* read by ge2_compile: this test's process only (Check forks) */
    spec_open(&split, &spec, GE2_DEVICE_CUDA, SEED);
    for (int i = 0; i < STEPS; i++) {
        float lf = spec_step(&fused, DATA_SEED, i), ls = spec_step(&split, DATA_SEED, i);
        ck_assert_msg(fabsf(lf - ls) <= LOSS_TOL * fabsf(ls), "step %d: loss fused %.9g, launches %.9g", i, lf, ls);
    }
    ck_assert_int_eq(ge2_program_graph_kernel_count(fused.program, GE2_MODE_TRAIN), 1);
    ck_assert_int_gt(ge2_program_graph_kernel_count(split.program, GE2_MODE_TRAIN), 1);
    int64_t n, n2;
    float *pf = spec_params(&fused, &n), *ps = spec_params(&split, &n2);
    double rel = rel_diff(pf, ps, n);
    ck_assert_msg(rel <= PARAM_TOL, "fused vs launch-by-launch: %g", rel);
    free(pf);
    free(ps);
    spec_close(&fused);
    spec_close(&split);
}
END_TEST

GE2_GPU_SUITE_MAIN("mlp_step_test", 600, test_matches_cpu, test_runs_are_bit_identical, test_switched_off_agrees)
