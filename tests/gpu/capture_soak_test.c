/* Capture stability, part 3: a long run of replays leaks nothing.
 *
 *   (5) 10,000 replayed training steps after warm-up: no host allocation
 *       (ge2_alloc_stats_get), device free memory unchanged (cudaMemGetInfo),
 *       no CUDA error, still one captured graph, finite loss.
 *   (6) The same for the CNN with the eval key and the train key
 *       alternating (an eval step after every ninth train step): two
 *       captured graphs, nothing allocated, running statistics finite.
 *   (7) 10,000 steps in device loops of 100 over a kept data set: nothing
 *       allocated, and the parameters equal an eager program's bitwise.
 *
 * GE2_TEST_SHORT=1 (the sanitizer run) replays 10 steps instead: enough to
 * run every key's graph, while racecheck slows each replay of the GPT's
 * shared-memory attention by orders of magnitude.
 */
#include <check.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/alloc.h"
#include "tests/gpu/capture_cnn.h"
#include "tests/gpu/capture_gpt.h"
#include "tests/gpu/capture_mlp.h"
#include "tests/gpu/capture_suite.h"

#define BATCH 64
#define SEED 77
#define DATA_SEED 5
#define LR 1e-3
/* Batches cycled through: the data stream is not what is under test. */
#define N_BATCHES 16

/* Replays each soak runs after its warm-up. */
static int soak_replays(void)
{
    return ge2_gpu_suite_short() ? 10 : 10000;
}

START_TEST(test_ten_thousand_replays_leak_nothing)
{
    const int n = soak_replays();
    mlp m;
    mlp_open(&m, GE2_DEVICE_CUDA, BATCH, SEED, LR, false);
    ge2_metrics metrics;
    /* Warm-up: the eager first step and capture, then a few replays and one
     * metrics read-back, so every lazily made host or device object exists. */
    for (int i = 0; i < 4; i++)
        mlp_step(&m, DATA_SEED, i % N_BATCHES, BATCH, i == 3);
    ck_assert_int_eq(ge2_program_sync(m.program), GE2_OK);
    ck_assert_int_eq(ge2_program_take_metrics(m.program, GE2_MODE_TRAIN, &metrics), GE2_OK);
    ck_assert_int_eq(ge2_program_capture_count(m.program), 1);

    ge2_alloc_stats before, after;
    size_t free_before = 0, free_after = 0, total = 0;
    ck_assert_int_eq(cudaMemGetInfo(&free_before, &total), cudaSuccess);
    ge2_alloc_stats_get(&before);
    int64_t steps_seen = 0;
    double loss_sum = 0;
    for (int i = 0; i < n; i++) {
        mlp_step(&m, DATA_SEED, (4 + i) % N_BATCHES, BATCH, false);
        if (i % 100 == 99) {
            /* What a trainer does: collect whatever losses have arrived. */
            ck_assert_int_eq(ge2_program_take_metrics(m.program, GE2_MODE_TRAIN, &metrics), GE2_OK);
            steps_seen += metrics.steps;
            loss_sum += metrics.loss_sum;
        }
    }
    ck_assert_int_eq(ge2_program_sync(m.program), GE2_OK);
    ck_assert_int_eq(ge2_program_take_metrics(m.program, GE2_MODE_TRAIN, &metrics), GE2_OK);
    steps_seen += metrics.steps;
    loss_sum += metrics.loss_sum;
    ge2_alloc_stats_get(&after);
    ck_assert_int_eq(cudaMemGetInfo(&free_after, &total), cudaSuccess);

    ck_assert_msg(after.allocations == before.allocations, "%llu host allocations during %d replayed steps",
                  (unsigned long long)(after.allocations - before.allocations), n);
    ck_assert_msg(free_after == free_before, "device free memory changed: %zu -> %zu bytes", free_before,
                  free_after);
    cudaError_t e = cudaGetLastError();
    ck_assert_msg(e == cudaSuccess, "CUDA error after the run: %s", cudaGetErrorString(e));
    ck_assert_int_eq(ge2_program_capture_count(m.program), 1);
    ck_assert_int_eq(ge2_program_key_count(m.program), 1);
    int64_t updates = -1;
    ck_assert_int_eq(ge2_program_step_count(m.program, &updates), GE2_OK);
    ck_assert_int_eq(updates, 4 + n);
    ck_assert_msg(steps_seen == n, "%lld of %d steps summed by take_metrics", (long long)steps_seen, n);
    ck_assert_msg(isfinite(loss_sum / (double)steps_seen), "mean loss %g", loss_sum / (double)steps_seen);
    float last = 0;
    ck_assert_int_eq(ge2_program_read_output(m.program, GE2_MODE_TRAIN, m.loss, &last, sizeof last), GE2_OK);
    ck_assert_msg(isfinite(last) && last > 0.0f, "last loss %g", last);
    mlp_close(&m);
}
END_TEST

/* n steps of step(ctx, i), both modes' metrics taken every 100 as a
 * trainer would: no host allocation, no device memory taken, no CUDA error. */
static void expect_steady(ge2_program *p, int n, void (*step)(void *ctx, int i), void *ctx)
{
    ge2_metrics metrics;
    ge2_alloc_stats before, after;
    size_t free_before = 0, free_after = 0, total = 0;
    ck_assert_int_eq(cudaMemGetInfo(&free_before, &total), cudaSuccess);
    ge2_alloc_stats_get(&before);
    for (int i = 0; i < n; i++) {
        step(ctx, i);
        if (i % 100 == 99) {
            ck_assert_int_eq(ge2_program_take_metrics(p, GE2_MODE_TRAIN, &metrics), GE2_OK);
            ck_assert_int_eq(ge2_program_take_metrics(p, GE2_MODE_EVAL, &metrics), GE2_OK);
        }
    }
    ck_assert_int_eq(ge2_program_sync(p), GE2_OK);
    ge2_alloc_stats_get(&after);
    ck_assert_int_eq(cudaMemGetInfo(&free_after, &total), cudaSuccess);
    ck_assert_msg(after.allocations == before.allocations, "%llu host allocations during %d replayed steps",
                  (unsigned long long)(after.allocations - before.allocations), n);
    ck_assert_msg(free_after == free_before, "device free memory changed: %zu -> %zu bytes", free_before,
                  free_after);
    cudaError_t e = cudaGetLastError();
    ck_assert_msg(e == cudaSuccess, "CUDA error after the run: %s", cudaGetErrorString(e));
}

static void cnn_soak_step(void *ctx, int i)
{
    cnn_step(ctx, i % 10 == 9 ? GE2_MODE_EVAL : GE2_MODE_TRAIN, DATA_SEED, (20 + i) % N_BATCHES, BATCH, false);
}

START_TEST(test_cnn_ten_thousand_replays_with_eval_keys)
{
    const int n = soak_replays();
    cnn m;
    cnn_open(&m, BATCH, SEED, false, GE2_PRECISION_FP32);
    /* Warm-up: both keys made, captured and replayed once */
    for (int i = 0; i < 20; i++)
        cnn_step(&m, i % 10 == 9 ? GE2_MODE_EVAL : GE2_MODE_TRAIN, DATA_SEED, i % N_BATCHES, BATCH, i == 19);
    ge2_metrics metrics;
    ck_assert_int_eq(ge2_program_sync(m.program), GE2_OK);
    ck_assert_int_eq(ge2_program_take_metrics(m.program, GE2_MODE_TRAIN, &metrics), GE2_OK);
    ck_assert_int_eq(ge2_program_take_metrics(m.program, GE2_MODE_EVAL, &metrics), GE2_OK);
    ck_assert_int_eq(ge2_program_capture_count(m.program), 2);
    expect_steady(m.program, n, cnn_soak_step, &m);
    ck_assert_int_eq(ge2_program_capture_count(m.program), 2);
    ck_assert_int_eq(ge2_program_key_count(m.program), 2);
    float var[16];
    ge2_tensor *rv = ge2_graph_find(m.graph, "bn2.running_var");
    ck_assert_int_eq(ge2_program_get_buffer(m.program, rv, var, sizeof var), GE2_OK);
    for (int c = 0; c < 16; c++)
        ck_assert_msg(isfinite(var[c]) && var[c] > 0, "bn2.running_var[%d] = %g", c, var[c]);
    int64_t count = 0;
    ck_assert_int_eq(ge2_program_get_buffer(m.program, ge2_graph_find(m.graph, "bn1.num_batches_tracked"), &count,
                                            sizeof count), GE2_OK);
    ck_assert_int_eq(count, 18 + n - n / 10);
    cnn_close(&m);
}
END_TEST

static void gpt_soak_step(void *ctx, int i)
{
    gpt_step(ctx, gpt_key_at(i), DATA_SEED, 21 + i, false);
}

/* The GPT's train, eval and generate keys interleaved over 10,000 replays
 * with dropout on: no host allocation, no device memory taken, no CUDA
 * error, three keys captured once each, a finite loss at the end. */
START_TEST(test_gpt_ten_thousand_replays_three_keys)
{
    const int n = soak_replays();
    gpt m;
    gpt_open(&m, BATCH < 32 ? BATCH : 32, SEED, false);
    for (int i = 0; i < 21; i++) /* warm-up: every key made, captured and replayed */
        gpt_step(&m, gpt_key_at(i), DATA_SEED, i, i == 20);
    ge2_metrics metrics;
    ck_assert_int_eq(ge2_program_sync(m.program), GE2_OK);
    ck_assert_int_eq(ge2_program_take_metrics(m.program, GE2_MODE_TRAIN, &metrics), GE2_OK);
    ck_assert_int_eq(ge2_program_take_metrics(m.program, GE2_MODE_EVAL, &metrics), GE2_OK);
    ck_assert_int_eq(ge2_program_capture_count(m.program), 3);
    expect_steady(m.program, n, gpt_soak_step, &m);
    ck_assert_int_eq(ge2_program_capture_count(m.program), 3);
    ck_assert_int_eq(ge2_program_key_count(m.program), 3);
    const float last = gpt_step(&m, GPT_TRAIN, DATA_SEED, 0, true);
    ck_assert_msg(isfinite(last) && last > 0.0f, "last loss %g", last);
    gpt_close(&m);
}
END_TEST

/* The MLP's training set kept by the program, n_batches full batches of
 * BATCH from the suite's data stream. */
static void keep_mlp_batches(mlp *m, int n_batches, float *x, int32_t *labels)
{
    for (int b = 0; b < n_batches; b++)
        mlp_batch(DATA_SEED, b, BATCH, x + (size_t)b * BATCH * MLP_IN, labels + (size_t)b * BATCH);
    const ge2_dataset_field fields[2] = {{m->x, x, GE2_F32, 0.0f}, {m->labels, labels, GE2_I32, 0.0f}};
    const ge2_dataset_desc desc = {(int64_t)n_batches * BATCH, fields, 2, true, SEED, 0};
    ck_assert_msg(ge2_program_set_dataset(m->program, GE2_MODE_TRAIN, &desc) == GE2_OK, "%s", ge2_last_error());
}

/* One launch of a device loop per expect_steady step, its metrics taken at
 * once (expect_steady's own takes then find none). */
typedef struct loop_launches {
    ge2_program *program;
    ge2_run run;
    int per_launch;
    int64_t looped, summed;
    double loss_sum;
} loop_launches;

static void loop_launch(void *ctx, int i)
{
    (void)i;
    loop_launches *l = ctx;
    l->run.steps = l->per_launch;
    ck_assert_msg(ge2_program_run(l->program, GE2_MODE_TRAIN, &l->run) == GE2_OK, "%s", ge2_last_error());
    l->looped += l->run.device_loop_steps;
    ge2_metrics metrics;
    ck_assert_int_eq(ge2_program_take_metrics(l->program, GE2_MODE_TRAIN, &metrics), GE2_OK);
    l->summed += metrics.steps;
    l->loss_sum += metrics.loss_sum;
}

/* (7) 10,000 steps in launches of 100 (device loops over a kept data set)
 * after warm-up: no host allocation, device free memory unchanged, no CUDA
 * error, every step in a loop; and the parameters those loops trained
 * equal, bit for bit, an eager program's after the same 10,000 steps. */
START_TEST(test_ten_thousand_steps_in_device_loops)
{
    const int n = soak_replays() < 100 ? 100 : soak_replays(), per_launch = 100, n_batches = 50;
    float *x = malloc(sizeof(float) * (size_t)n_batches * BATCH * MLP_IN);
    int32_t *labels = malloc(sizeof(int32_t) * (size_t)n_batches * BATCH);
    ck_assert(x && labels);
    mlp looped, eager;
    ge2_compile_options loops = ge2_compile_defaults(), steps = ge2_compile_defaults();
    loops.device_loop = true;
    steps.disable_capture = true;
    mlp_open_with(&looped, GE2_DEVICE_CUDA, BATCH, SEED, LR, &loops);
    mlp_open_with(&eager, GE2_DEVICE_CUDA, BATCH, SEED, LR, &steps);
    keep_mlp_batches(&looped, n_batches, x, labels);
    keep_mlp_batches(&eager, n_batches, x, labels);
    /* warm-up: the key's capture (a step alone), then the loop's, over the
     * first epoch */
    ge2_run run = {.batch = BATCH, .steps = n_batches};
    ck_assert_msg(ge2_program_run(looped.program, GE2_MODE_TRAIN, &run) == GE2_OK, "%s", ge2_last_error());
    ck_assert_msg(run.device_loop_steps == n_batches - 1, "%lld of %d warm-up steps looped: %s",
                  (long long)run.device_loop_steps, n_batches,
                  ge2_program_run_per_step(looped.program, GE2_MODE_TRAIN));
    ge2_metrics metrics;
    ck_assert_int_eq(ge2_program_take_metrics(looped.program, GE2_MODE_TRAIN, &metrics), GE2_OK);

    loop_launches l = {looped.program, run, per_launch, 0, 0, 0};
    expect_steady(looped.program, n / per_launch, loop_launch, &l);
    run = l.run;
    ck_assert_msg(l.looped == n && l.summed == n, "%lld of %d steps looped, %lld summed", (long long)l.looped, n,
                  (long long)l.summed);
    ck_assert_msg(isfinite(l.loss_sum / (double)n), "mean loss %g", l.loss_sum / (double)n);

    ge2_run eager_run = {.batch = BATCH, .steps = n_batches + n};
    ck_assert_msg(ge2_program_run(eager.program, GE2_MODE_TRAIN, &eager_run) == GE2_OK, "%s", ge2_last_error());
    ck_assert_int_eq(eager_run.device_loop_steps, 0);
    ck_assert(eager_run.epoch == run.epoch && eager_run.batch_in_epoch == run.batch_in_epoch);
    float *a = mlp_get_params(&looped), *b = mlp_get_params(&eager);
    char why[256];
    ck_assert_msg(memcmp(a, b, sizeof(float) * (size_t)mlp_total_numel()) == 0,
                  "looped and eager parameters differ after %d steps: %s", n_batches + n,
                  mlp_worst_element(a, b, NULL, why, sizeof why));
    free(a);
    free(b);
    mlp_close(&looped);
    mlp_close(&eager);
    free(x);
    free(labels);
}
END_TEST

GE2_GPU_SUITE_MAIN("capture_soak_test", 900, test_ten_thousand_replays_leak_nothing,
                   test_cnn_ten_thousand_replays_with_eval_keys, test_gpt_ten_thousand_replays_three_keys,
                   test_ten_thousand_steps_in_device_loops)
