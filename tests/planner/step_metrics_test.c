/* ge2_program_take_metrics counts every step exactly once.
 *
 * Each step copies its loss and metric into its staging slot's result area
 * and is added to the sums when the host next waits on that slot or
 * take_metrics finds its fence done. Checked against the values
 * ge2_program_read_output shows after each step of a twin program (same
 * graph, same feeds): over two graph keys, both modes, copied and zero-copy
 * feeds, take_metrics at odd moments, with shared and separate arenas; with a
 * device that lags behind (fences done only when the test says so), only
 * finished steps are counted, oldest first; a failed step is not counted.
 * CPU backend: the same step and metrics code as CUDA, whose steps copy
 * their results inside the captured graph. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "capture/program_inspect.h"
#include "ge2/extension.h"
#include "graph/control.h"
#include "graph/error.h"
#include "tests/planner/random_graph.h"
#include "tests/planner/suite.h"

/* step_results_gpu_test builds this file with STEP_METRICS_CUDA: the step
 * results test on the CUDA backend, where more results than one copy kernel
 * takes come back through a second. */
#ifdef STEP_METRICS_CUDA
#define RESULTS_DEVICE GE2_DEVICE_CUDA
#else
#define RESULTS_DEVICE GE2_DEVICE_CPU
#endif

#define FEATURES 6
#define CLASSES 4
#define BATCH 12
#define SMALL 5 /* the second key's batch */

/* A classifier with a loss and a metric (correct count), trained by Adam. */
typedef struct classifier {
    ge2_graph *graph;
    ge2_tensor *x, *labels, *loss, *correct;
} classifier;

static void classifier_build(classifier *c)
{
    ge2_tensor *w, *b, *logits;
    ck_assert_int_eq(ge2_graph_new(&c->graph), GE2_OK);
    ck_assert_int_eq(ge2_input(c->graph, "x", GE2_F32, ge2_shape2(BATCH, FEATURES), &c->x), GE2_OK);
    ck_assert_int_eq(ge2_label(c->graph, "labels", GE2_I32, ge2_shape1(BATCH), &c->labels), GE2_OK);
    ge2_init w_init = {GE2_INIT_LINEAR_DEFAULT, 0, 0, 0}, b_init = {GE2_INIT_LINEAR_DEFAULT, 0, 0, FEATURES};
    ck_assert_int_eq(ge2_parameter(c->graph, "w", GE2_F32, ge2_shape2(CLASSES, FEATURES), w_init, &w), GE2_OK);
    ck_assert_int_eq(ge2_parameter(c->graph, "b", GE2_F32, ge2_shape1(CLASSES), b_init, &b), GE2_OK);
    ck_assert_int_eq(ge2_linear(c->graph, c->x, w, b, GE2_ACT_NONE, 0, &logits), GE2_OK);
    ck_assert_int_eq(ge2_cross_entropy(c->graph, logits, c->labels, 0, &c->loss), GE2_OK);
    ck_assert_int_eq(ge2_accuracy(c->graph, logits, c->labels, &c->correct), GE2_OK);
    ck_assert_int_eq(ge2_mark_output(c->graph, c->correct), GE2_OK);
    ck_assert_int_eq(ge2_backward(c->graph, c->loss), GE2_OK);
    ge2_optimizer_config adam = ge2_optimizer_defaults(GE2_OPT_ADAM);
    adam.lr = 0.05;
    ck_assert_int_eq(ge2_optimizer(c->graph, &adam), GE2_OK);
}

static ge2_program *compile_cpu(ge2_context *ctx, const classifier *c, bool separate_arenas)
{
    ge2_compile_options o = ge2_compile_defaults();
    o.separate_arenas = separate_arenas;
    ge2_program *prog;
    ck_assert_msg(ge2_compile(ctx, c->graph, &o, &prog) == GE2_OK, "%s", ge2_last_error());
    return prog;
}

/* Batch data: x uniform, labels below CLASSES. */
typedef struct batch {
    float x[BATCH * FEATURES];
    int32_t labels[BATCH];
    ge2_feed feeds[2];
} batch;

static void batch_fill(const classifier *c, int64_t b, uint64_t *rng, batch *out)
{
    for (int64_t i = 0; i < b * FEATURES; i++)
        out->x[i] = rg_uniform(rng);
    for (int64_t i = 0; i < b; i++)
        out->labels[i] = (int32_t)rg_below(rng, CLASSES);
    out->feeds[0] = (ge2_feed){c->x, out->x, ge2_shape2(b, FEATURES)};
    out->feeds[1] = (ge2_feed){c->labels, out->labels, ge2_shape1(b)};
}

/* One step of the batch; zero_copy writes it into the program's feed buffers first. */
static void step(ge2_program *prog, ge2_mode mode, const batch *in, bool zero_copy)
{
    ge2_feed feeds[2] = {in->feeds[0], in->feeds[1]};
    if (zero_copy) {
        void *ptrs[2];
        ck_assert_msg(ge2_program_feed_buffers(prog, mode, feeds, 2, ptrs) == GE2_OK, "%s", ge2_last_error());
        memcpy(ptrs[0], in->x, (size_t)ge2_shape_numel(feeds[0].shape) * sizeof(float));
        memcpy(ptrs[1], in->labels, (size_t)ge2_shape_numel(feeds[1].shape) * sizeof(int32_t));
        feeds[0].data = ptrs[0];
        feeds[1].data = ptrs[1];
    }
    ck_assert_msg(ge2_program_step(prog, mode, feeds, 2) == GE2_OK, "%s", ge2_last_error());
}

/* The step's loss and correct count as read_output shows them, added to *sums. */
static void add_read_output(ge2_program *prog, const classifier *c, ge2_mode mode, int64_t b, ge2_metrics *sums)
{
    float loss, correct;
    ck_assert_int_eq(ge2_program_read_output(prog, mode, c->loss, &loss, sizeof loss), GE2_OK);
    ck_assert_int_eq(ge2_program_read_output(prog, mode, c->correct, &correct, sizeof correct), GE2_OK);
    sums->steps++;
    sums->examples += b;
    sums->loss_sum += loss;
    sums->metric_sum += correct;
}

static void add_taken(ge2_program *prog, ge2_mode mode, ge2_metrics *sums)
{
    ge2_metrics m;
    ck_assert_int_eq(ge2_program_take_metrics(prog, mode, &m), GE2_OK);
    sums->steps += m.steps;
    sums->examples += m.examples;
    sums->loss_sum += m.loss_sum;
    sums->metric_sum += m.metric_sum;
}

/* Counts must match exactly; sums up to the order of addition (a step
 * missed or counted twice moves the loss sum by about a loss, ~1). */
static void expect_metrics(const ge2_metrics *got, const ge2_metrics *want, const char *what)
{
    ck_assert_msg(got->steps == want->steps, "%s: %lld steps, want %lld", what, (long long)got->steps,
                  (long long)want->steps);
    ck_assert_msg(got->examples == want->examples, "%s: %lld examples, want %lld", what, (long long)got->examples,
                  (long long)want->examples);
    ck_assert_msg(fabs(got->loss_sum - want->loss_sum) <= 1e-12 * (1 + fabs(want->loss_sum)),
                  "%s: loss sum %.17g, want %.17g", what, got->loss_sum, want->loss_sum);
    ck_assert_msg(got->metric_sum == want->metric_sum, "%s: metric sum %.17g, want %.17g", what, got->metric_sum,
                  want->metric_sum);
}

START_TEST(test_every_step_counted_once)
{
    static const bool separate[] = {false, true};
    for (size_t iv = 0; iv < sizeof separate / sizeof separate[0]; iv++) {
        classifier c;
        classifier_build(&c);
        ge2_context *ctx;
        ck_assert_int_eq(ge2_context_new(GE2_DEVICE_CPU, &ctx), GE2_OK);
        ge2_program *ref = compile_cpu(ctx, &c, false), *dut = compile_cpu(ctx, &c, separate[iv]);
        ge2_metrics want[GE2_MODE_COUNT] = {{0}}, got[GE2_MODE_COUNT] = {{0}};
        uint64_t rng = 7 + iv;
        batch in;
        for (int s = 0; s < 60; s++) {
            ge2_mode mode = s % 5 == 4 ? GE2_MODE_EVAL : GE2_MODE_TRAIN;
            int64_t b = s % 3 == 2 ? SMALL : BATCH; /* two keys per mode, interleaved */
            batch_fill(&c, b, &rng, &in);
            step(ref, mode, &in, false);
            add_read_output(ref, &c, mode, b, &want[mode]);
            step(dut, mode, &in, s % 2 == 1);
            if (s % 7 == 3) /* mid-run: what has arrived, nothing twice */
                add_taken(dut, (ge2_mode)(s % GE2_MODE_COUNT), &got[s % GE2_MODE_COUNT]);
        }
        ck_assert_int_eq(ge2_program_key_count(dut), 4);
        ck_assert_int_eq(ge2_program_sync(dut), GE2_OK);
        for (int m = 0; m < GE2_MODE_COUNT; m++) {
            add_taken(dut, (ge2_mode)m, &got[m]);
            expect_metrics(&got[m], &want[m], m == GE2_MODE_TRAIN ? "train" : "eval");
            ge2_metrics again;
            ck_assert_int_eq(ge2_program_take_metrics(dut, (ge2_mode)m, &again), GE2_OK);
            ck_assert_int_eq(again.steps, 0);
        }
        ck_assert_int_eq(want[GE2_MODE_TRAIN].steps, 48);
        ck_assert_int_eq(want[GE2_MODE_EVAL].steps, 12);
        ge2_program_free(ref);
        ge2_program_free(dut);
        ge2_context_free(ctx);
        ge2_graph_free(c.graph);
    }
}
END_TEST

/* The CPU backend behind fences of a device that lags: a recorded fence is
 * done only once the test (or a wait on it, or a sync) lets the device get
 * that far. The CPU has run every step already; only what the program may
 * know is delayed. */
typedef struct lag_fence {
    uint64_t seq; /* record number of its latest record, 0 if never recorded */
} lag_fence;

static uint64_t records, finished; /* fences recorded so far; records the device has finished */
static int failures_left;          /* exec_run calls still to fail */

static ge2_status lag_new(ge2_backend_ctx *ctx, void **fence)
{
    (void)ctx;
    *fence = calloc(1, sizeof(lag_fence));
    return *fence ? GE2_OK : ge2_error(GE2_ERR_OUT_OF_MEMORY, "lag fence");
}

static void lag_free(ge2_backend_ctx *ctx, void *fence)
{
    (void)ctx;
    free(fence);
}

static ge2_status lag_record(ge2_backend_ctx *ctx, void *fence)
{
    (void)ctx;
    ((lag_fence *)fence)->seq = ++records;
    return GE2_OK;
}

static ge2_status lag_wait(ge2_backend_ctx *ctx, void *fence)
{
    (void)ctx;
    if (finished < ((lag_fence *)fence)->seq)
        finished = ((lag_fence *)fence)->seq;
    return GE2_OK;
}

static ge2_status lag_done(ge2_backend_ctx *ctx, void *fence, bool *done)
{
    (void)ctx;
    *done = ((lag_fence *)fence)->seq <= finished;
    return GE2_OK;
}

static ge2_status lag_sync(ge2_backend_ctx *ctx)
{
    (void)ctx;
    finished = records;
    return GE2_OK;
}

static ge2_status failing_exec_run(ge2_backend_ctx *ctx, ge2_exec *exec, int slot)
{
    if (failures_left > 0) {
        failures_left--;
        return ge2_error(GE2_ERR_CUDA, "lagging backend: injected step failure");
    }
    return ge2_backend_cpu.exec_run(ctx, exec, slot);
}

/* A twin pair whose `dut` runs on the lagging backend. */
typedef struct lag_twin {
    classifier c;
    ge2_context *ctx;
    ge2_program *ref, *dut;
    ge2_backend backend;
    float loss[16]; /* per step of the test, from ref */
    uint64_t rng;
} lag_twin;

static void lag_twin_open(lag_twin *t)
{
    memset(t, 0, sizeof *t);
    classifier_build(&t->c);
    ck_assert_int_eq(ge2_context_new(GE2_DEVICE_CPU, &t->ctx), GE2_OK);
    t->ref = compile_cpu(t->ctx, &t->c, false);
    t->dut = compile_cpu(t->ctx, &t->c, false);
    t->backend = ge2_backend_cpu;
    t->backend.fence_new = lag_new;
    t->backend.fence_free = lag_free;
    t->backend.fence_record = lag_record;
    t->backend.fence_wait = lag_wait;
    t->backend.fence_done = lag_done;
    t->backend.sync = lag_sync;
    t->backend.exec_run = failing_exec_run;
    ge2_program_swap_backend(t->dut, &t->backend); /* before any key: each key's slots get lagging fences */
    records = finished = 0;
    failures_left = 0;
    t->rng = 3;
}

static void lag_twin_close(lag_twin *t)
{
    ge2_program_free(t->ref);
    ge2_program_free(t->dut);
    ge2_context_free(t->ctx);
    ge2_graph_free(t->c.graph);
}

/* Train step i of the test on both programs; its loss from ref. */
static void lag_step(lag_twin *t, int i)
{
    batch in;
    batch_fill(&t->c, BATCH, &t->rng, &in);
    step(t->ref, GE2_MODE_TRAIN, &in, false);
    ck_assert_int_eq(ge2_program_read_output(t->ref, GE2_MODE_TRAIN, t->c.loss, &t->loss[i], sizeof(float)),
                     GE2_OK);
    step(t->dut, GE2_MODE_TRAIN, &in, i % 2 == 0);
}

/* take_metrics on dut: `steps` steps, the losses of steps [first, first + steps) summed in order. */
static void expect_taken(lag_twin *t, int first, int steps)
{
    ge2_metrics m;
    ck_assert_int_eq(ge2_program_take_metrics(t->dut, GE2_MODE_TRAIN, &m), GE2_OK);
    double want = 0;
    for (int i = first; i < first + steps; i++)
        want += t->loss[i];
    ck_assert_msg(m.steps == steps, "took %lld steps, want %d (from step %d)", (long long)m.steps, steps, first);
    ck_assert_int_eq(m.examples, (int64_t)steps * BATCH);
    ck_assert_msg(m.loss_sum == want, "loss sum %.17g, want %.17g (steps %d..%d)", m.loss_sum, want, first,
                  first + steps - 1);
}

/* Any number of one-element marked outputs come back with each step: the
 * classifier with three more (the logits' sum, their mean, the loss again
 * through a scale), each summed by the metrics over the steps a take
 * counts, equal to what read_output shows after each step; a non-scalar
 * marked output and an unmarked tensor are not step results. */
START_TEST(test_every_scalar_output_comes_back)
{
    classifier c;
    ge2_tensor *w, *b, *logits, *total, *average, *twice;
    ck_assert_int_eq(ge2_graph_new(&c.graph), GE2_OK);
    ck_assert_int_eq(ge2_input(c.graph, "x", GE2_F32, ge2_shape2(BATCH, FEATURES), &c.x), GE2_OK);
    ck_assert_int_eq(ge2_label(c.graph, "labels", GE2_I32, ge2_shape1(BATCH), &c.labels), GE2_OK);
    ge2_init w_init = {GE2_INIT_LINEAR_DEFAULT, 0, 0, 0}, b_init = {GE2_INIT_LINEAR_DEFAULT, 0, 0, FEATURES};
    ck_assert_int_eq(ge2_parameter(c.graph, "w", GE2_F32, ge2_shape2(CLASSES, FEATURES), w_init, &w), GE2_OK);
    ck_assert_int_eq(ge2_parameter(c.graph, "b", GE2_F32, ge2_shape1(CLASSES), b_init, &b), GE2_OK);
    ck_assert_int_eq(ge2_linear(c.graph, c.x, w, b, GE2_ACT_NONE, 0, &logits), GE2_OK);
    ck_assert_int_eq(ge2_cross_entropy(c.graph, logits, c.labels, 0, &c.loss), GE2_OK);
    ck_assert_int_eq(ge2_accuracy(c.graph, logits, c.labels, &c.correct), GE2_OK);
    ck_assert_int_eq(ge2_sum_all(c.graph, logits, &total), GE2_OK);
    ck_assert_int_eq(ge2_mean_all(c.graph, logits, &average), GE2_OK);
    ck_assert_int_eq(ge2_scale(c.graph, c.loss, 2.0, &twice), GE2_OK);
    ge2_tensor *outs[4] = {c.correct, total, average, twice};
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(ge2_mark_output(c.graph, outs[i]), GE2_OK);
    ck_assert_int_eq(ge2_mark_output(c.graph, logits), GE2_OK); /* [BATCH, CLASSES]: read, not summed */
    ck_assert_int_eq(ge2_backward(c.graph, c.loss), GE2_OK);
    ge2_optimizer_config adam = ge2_optimizer_defaults(GE2_OPT_ADAM);
    ck_assert_int_eq(ge2_optimizer(c.graph, &adam), GE2_OK);
    ge2_context *ctx;
    ck_assert_int_eq(ge2_context_new(RESULTS_DEVICE, &ctx), GE2_OK);
    ge2_program *prog = compile_cpu(ctx, &c, false);
    double want[5] = {0};
    uint64_t rng = 11;
    batch in;
    for (int s = 0; s < 7; s++) {
        batch_fill(&c, s % 2 ? SMALL : BATCH, &rng, &in); /* two keys */
        step(prog, GE2_MODE_TRAIN, &in, false);
        float v;
        ck_assert_int_eq(ge2_program_read_output(prog, GE2_MODE_TRAIN, c.loss, &v, sizeof v), GE2_OK);
        want[0] += v;
        for (int i = 0; i < 4; i++) {
            ck_assert_int_eq(ge2_program_read_output(prog, GE2_MODE_TRAIN, outs[i], &v, sizeof v), GE2_OK);
            want[1 + i] += v;
        }
    }
    ge2_metrics m;
    ck_assert_int_eq(ge2_program_sync(prog), GE2_OK);
    ck_assert_int_eq(ge2_program_take_metrics(prog, GE2_MODE_TRAIN, &m), GE2_OK);
    ck_assert_int_eq(m.steps, 7);
    ck_assert(m.loss_sum == want[0]);
    ck_assert(m.metric_sum == want[1]); /* the first marked output */
    ge2_tensor *all[5] = {c.loss, c.correct, total, average, twice};
    for (int i = 0; i < 5; i++) {
        double got;
        ck_assert_int_eq(ge2_program_taken_sum(prog, GE2_MODE_TRAIN, all[i], &got), GE2_OK);
        ck_assert_msg(got == want[i], "%s: summed %.17g, read_output's %.17g", all[i]->name, got, want[i]);
    }
    double got;
    ck_assert_int_eq(ge2_program_taken_sum(prog, GE2_MODE_TRAIN, logits, &got), GE2_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(ge2_program_taken_sum(prog, GE2_MODE_TRAIN, w, &got), GE2_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "not a step result"));
    ge2_program_free(prog);
    ge2_context_free(ctx);
    ge2_graph_free(c.graph);
}
END_TEST

START_TEST(test_lagging_device_counts_finished_steps)
{
    lag_twin t;
    lag_twin_open(&t);
    /* Nothing finished yet: nothing to take. */
    lag_step(&t, 0);
    lag_step(&t, 1);
    expect_taken(&t, 0, 0);
    /* Steps 2, 3, 4 each wait for the step two before them (their slot's
     * last user), which counts it: steps 0, 1, 2 arrive; 3 and 4 have not. */
    for (int i = 2; i < 5; i++)
        lag_step(&t, i);
    ck_assert_uint_eq(finished, 3); /* the records of steps 0..2 */
    expect_taken(&t, 0, 3);
    /* The device gets through step 3 only: step 4 is not counted, and step
     * 3 is counted once although a later wait would count it too. */
    finished = 4;
    expect_taken(&t, 3, 1);
    lag_step(&t, 5); /* waits for step 3, counted already */
    expect_taken(&t, 4, 0);
    /* After a sync every step is in, each once. */
    ck_assert_int_eq(ge2_program_sync(t.dut), GE2_OK);
    expect_taken(&t, 4, 2);
    expect_taken(&t, 6, 0);
    lag_twin_close(&t);
}
END_TEST

/* A step whose run fails reports its error, is not counted, and leaves its
 * slot to the next step, whose feeds and result it then holds. */
START_TEST(test_failed_step_not_counted)
{
    lag_twin t;
    lag_twin_open(&t);
    lag_step(&t, 0);
    lag_step(&t, 1);
    const int next = ge2_program_key_view(t.dut, 0).next_staging;
    batch in;
    batch_fill(&t.c, BATCH, &t.rng, &in);
    failures_left = 1;
    expect_error(ge2_program_step(t.dut, GE2_MODE_TRAIN, in.feeds, 2), GE2_ERR_CUDA, "injected", NULL);
    ck_assert_int_eq(ge2_program_key_view(t.dut, 0).next_staging, next);
    ck_assert(!ge2_program_key_view(t.dut, 0).in_flight[next]); /* waited for by the failed step, nothing new in it */
    for (int i = 2; i < 6; i++)
        lag_step(&t, i);
    ck_assert_int_eq(ge2_program_sync(t.dut), GE2_OK);
    expect_taken(&t, 0, 6);
    lag_twin_close(&t);
}
END_TEST

/* The message a label of value at row makes, read by node (cross-entropy
 * or accuracy, whichever the schedule runs first): the CPU kernels and the
 * program's check of the CUDA count say the same. */
static bool names_bad_label(const char *msg, const ge2_graph *g, const ge2_tensor *from, int row, int value)
{
    char want[160];
    const ge2_node *n = &g->nodes[from->producer];
    snprintf(want, sizeof want, "ge2_%s (node %d): labels[%d] is %d, outside [0, %d)", ge2_op_name(n->op), n->id,
             row, value, CLASSES);
    return strncmp(msg, want, strlen(want)) == 0;
}

/* A label outside [0, C) is never trained on silently: on the CPU the step
 * fails at once; on CUDA the kernels count it, the count comes back with
 * the step's results, and the call that folds the step fails, with the
 * same message. Steps after it train and count as before. */
START_TEST(test_out_of_range_label_fails)
{
    classifier c;
    classifier_build(&c);
    ge2_context *ctx;
    ck_assert_int_eq(ge2_context_new(RESULTS_DEVICE, &ctx), GE2_OK);
    ge2_program *prog = compile_cpu(ctx, &c, false);
    uint64_t rng = 5;
    batch in;
    for (int s = 0; s < 3; s++) {
        batch_fill(&c, BATCH, &rng, &in);
        step(prog, GE2_MODE_TRAIN, &in, false);
    }
    batch_fill(&c, BATCH, &rng, &in);
    in.labels[5] = CLASSES + 3;
    ge2_status st = ge2_program_step(prog, GE2_MODE_TRAIN, in.feeds, 2);
    ge2_metrics m;
    if (RESULTS_DEVICE == GE2_DEVICE_CUDA) {
        ck_assert_msg(st == GE2_OK, "%s", ge2_last_error()); /* a kernel cannot fail: counted on the device */
        ck_assert_int_eq(ge2_program_sync(prog), GE2_OK);
        st = ge2_program_take_metrics(prog, GE2_MODE_TRAIN, &m);
    }
    ck_assert_int_eq(st, GE2_ERR_INVALID_ARGUMENT);
    const char *msg = ge2_last_error();
    ck_assert_msg(names_bad_label(msg, c.graph, c.loss, 5, CLASSES + 3) ||
                      names_bad_label(msg, c.graph, c.correct, 5, CLASSES + 3),
                  "%s", msg);
    /* good batches again: trained and counted, no error repeated */
    ck_assert_int_eq(ge2_program_take_metrics(prog, GE2_MODE_TRAIN, &m), GE2_OK);
    for (int s = 0; s < 3; s++) {
        batch_fill(&c, BATCH, &rng, &in);
        step(prog, GE2_MODE_TRAIN, &in, false);
    }
    ck_assert_int_eq(ge2_program_sync(prog), GE2_OK);
    ck_assert_msg(ge2_program_take_metrics(prog, GE2_MODE_TRAIN, &m) == GE2_OK, "%s", ge2_last_error());
    ck_assert_int_eq(m.steps, 3);
    ge2_program_free(prog);
    ge2_context_free(ctx);
    ge2_graph_free(c.graph);
}
END_TEST

#ifndef STEP_METRICS_CUDA
/* The host half of the CUDA path on the CPU backend: an op whose CPU kernel
 * counts out-of-range labels in the control block as the CUDA kernels do,
 * instead of failing. The fold that meets a grown count fails naming the
 * first one; a step that adds none folds as usual. */
static ge2_status count_labels_cpu(const ge2_launch *l)
{
    const int32_t *labels = l->in[0].data;
    const int64_t n = ge2_shape_numel(l->in[0].shape);
    for (int64_t i = 0; i < n; i++) {
        if (labels[i] >= 0 && labels[i] < CLASSES)
            continue;
        ge2_bad_index *b = &l->control->bad_index;
        if (b->count++ == 0)
            *b = (ge2_bad_index){1, i, CLASSES, l->node->id, GE2_BAD_LABEL, labels[i], 0};
    }
    *(float *)l->out[0].data = 0.0f;
    return GE2_OK;
}

static ge2_status count_labels_infer(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    (void)node, (void)in;
    out[0] = (ge2_desc){GE2_F32, ge2_shape0(), NULL};
    return GE2_OK;
}

START_TEST(test_device_count_fails_the_fold)
{
    static const ge2_op_def def = {.name = "count_labels", .min_inputs = 1, .max_inputs = 1, .max_outputs = 1,
                                   .flags = GE2_OPF_NO_GRAD, .infer = count_labels_infer, .cpu = count_labels_cpu};
    ge2_op op;
    ck_assert_int_eq(ge2_op_register(&def, &op), GE2_OK);
    ge2_graph *g;
    ge2_tensor *labels, *x, *w, *y, *loss, *counted;
    ck_assert_int_eq(ge2_graph_new(&g), GE2_OK);
    ck_assert_int_eq(ge2_input(g, "x", GE2_F32, ge2_shape1(BATCH), &x), GE2_OK);
    ck_assert_int_eq(ge2_label(g, "labels", GE2_I32, ge2_shape1(BATCH), &labels), GE2_OK);
    ck_assert_int_eq(ge2_parameter(g, "w", GE2_F32, ge2_shape1(BATCH), (ge2_init){GE2_INIT_ZEROS, 0, 0, 0}, &w),
                     GE2_OK);
    ck_assert_int_eq(ge2_mul(g, x, w, &y), GE2_OK);
    ck_assert_int_eq(ge2_mean_all(g, y, &loss), GE2_OK);
    ck_assert_int_eq(ge2_apply(g, op, &labels, 1, NULL, 0, 1, &counted), GE2_OK);
    ck_assert_int_eq(ge2_mark_output(g, counted), GE2_OK);
    ck_assert_int_eq(ge2_backward(g, loss), GE2_OK);
    ge2_optimizer_config sgd = ge2_optimizer_defaults(GE2_OPT_SGD);
    ck_assert_int_eq(ge2_optimizer(g, &sgd), GE2_OK);
    ge2_context *ctx;
    ck_assert_int_eq(ge2_context_new(GE2_DEVICE_CPU, &ctx), GE2_OK);
    ge2_program *prog;
    ck_assert_int_eq(ge2_compile(ctx, g, NULL, &prog), GE2_OK);
    float xs[BATCH] = {0};
    int32_t ls[BATCH] = {0};
    ge2_feed feeds[2] = {{x, xs, x->shape}, {labels, ls, labels->shape}};
    ge2_metrics m;
    ck_assert_int_eq(ge2_program_step(prog, GE2_MODE_TRAIN, feeds, 2), GE2_OK);
    ls[3] = -2;
    ck_assert_int_eq(ge2_program_step(prog, GE2_MODE_TRAIN, feeds, 2), GE2_OK);
    ls[3] = 0;
    ck_assert_int_eq(ge2_program_take_metrics(prog, GE2_MODE_TRAIN, &m), GE2_ERR_INVALID_ARGUMENT);
    char want[128];
    snprintf(want, sizeof want, "ge2_count_labels (node %d): labels[3] is -2, outside [0, %d) (the first; 1 ",
             counted->producer, CLASSES);
    ck_assert_msg(strncmp(ge2_last_error(), want, strlen(want)) == 0, "%s", ge2_last_error());
    ck_assert_int_eq(ge2_program_step(prog, GE2_MODE_TRAIN, feeds, 2), GE2_OK);
    ck_assert_msg(ge2_program_take_metrics(prog, GE2_MODE_TRAIN, &m) == GE2_OK, "%s", ge2_last_error());
    ck_assert_int_eq(m.steps, 2); /* the good steps before and after it; the bad one is not counted */
    ls[7] = 99;
    ck_assert_int_eq(ge2_program_step(prog, GE2_MODE_TRAIN, feeds, 2), GE2_OK);
    ck_assert_int_eq(ge2_program_take_metrics(prog, GE2_MODE_TRAIN, &m), GE2_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(ge2_last_error(), "labels[3] is -2") && strstr(ge2_last_error(), "an earlier step's first"),
                  "%s", ge2_last_error());
    ge2_program_free(prog);
    ge2_context_free(ctx);
    ge2_graph_free(g);
}
END_TEST
#endif

int main(void)
{
#ifdef STEP_METRICS_CUDA
    const TTest *tests[] = {test_every_scalar_output_comes_back, test_out_of_range_label_fails};
    /* the others test the CPU backend's step and fence logic */
    (void)test_every_step_counted_once, (void)test_lagging_device_counts_finished_steps,
        (void)test_failed_step_not_counted;
#else
    const TTest *tests[] = {
        test_every_step_counted_once,
        test_every_scalar_output_comes_back,
        test_lagging_device_counts_finished_steps,
        test_failed_step_not_counted,
        test_out_of_range_label_fails,
        test_device_count_fails_the_fold,
    };
#endif
    return planner_run_tests("step_metrics", tests, (int)(sizeof tests / sizeof tests[0]), 120);
}
