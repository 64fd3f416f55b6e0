/* Many steps per call over a kept data set (ge2_program_set_dataset,
 * ge2_program_run) on the CPU: a run equals the same steps fed one at a
 * time from the trainers' batcher (data/dataset.h), bit for bit (the
 * parameters, batch norm's running statistics, the dropout stream, the
 * optimizer's state and the metrics), whatever the runs' lengths and with
 * an eval run between them; and what a user can get wrong is refused with
 * a message naming it. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "data/dataset.h"
#include "ge2/ge2.h"
#include "tests/planner/random_graph.h"
#include "tests/planner/suite.h"

/* Built twice: on the CPU (CI) and, as program_run_gpu_test, on CUDA,
 * where a run's full batches go many to a launch (a device loop) and must
 * still equal the steps one at a time bit for bit. */
#ifdef PROGRAM_RUN_ON_CUDA
#include "tests/gpu/capture_suite.h"
#define DEVICE GE2_DEVICE_CUDA
#else
#define DEVICE GE2_DEVICE_CPU
#endif

#define FEATURES 12
#define CLASSES 4
#define TRAIN_EXAMPLES 50 /* batches of 8: six full, one of 2 */
#define EVAL_EXAMPLES 20
#define BATCH 8

/* x -> linear+relu -> batch norm -> dropout -> linear -> cross-entropy,
 * accuracy; Adam */
typedef struct model {
    ge2_graph *graph;
    ge2_tensor *x, *labels, *params[6];
    int n_params;
    ge2_tensor *running[2];
} model;

static ge2_tensor *param(model *m, const char *name, ge2_shape s, int64_t fan_in)
{
    ge2_tensor *t;
    ck_assert_int_eq(ge2_parameter(m->graph, name, GE2_F32, s, (ge2_init){GE2_INIT_LINEAR_DEFAULT, 0, 0, fan_in}, &t),
                     GE2_OK);
    m->params[m->n_params++] = t;
    return t;
}

static void model_build(model *m)
{
    memset(m, 0, sizeof *m);
    ck_assert_int_eq(ge2_graph_new(&m->graph), GE2_OK);
    ge2_graph *g = m->graph;
    ge2_tensor *h, *loss, *correct;
    ck_assert_int_eq(ge2_input(g, "x", GE2_F32, ge2_shape2(BATCH, FEATURES), &m->x), GE2_OK);
    ck_assert_int_eq(ge2_label(g, "labels", GE2_I32, ge2_shape1(BATCH), &m->labels), GE2_OK);
    ge2_tensor *w1 = param(m, "w1", ge2_shape2(16, FEATURES), FEATURES), *b1 = param(m, "b1", ge2_shape1(16), FEATURES);
    ck_assert_int_eq(ge2_linear(g, m->x, w1, b1, GE2_ACT_RELU, 0.0f, &h), GE2_OK);
    ck_assert_int_eq(ge2_batch_norm_layer(g, "bn", h, 0.1, 1e-5, &h), GE2_OK);
    ck_assert_int_eq(ge2_dropout(g, h, 0.2, &h), GE2_OK);
    ge2_tensor *w2 = param(m, "w2", ge2_shape2(CLASSES, 16), 16), *b2 = param(m, "b2", ge2_shape1(CLASSES), 16);
    ck_assert_int_eq(ge2_linear(g, h, w2, b2, GE2_ACT_NONE, 0.0f, &h), GE2_OK);
    ck_assert_int_eq(ge2_cross_entropy(g, h, m->labels, 0.0f, &loss), GE2_OK);
    ck_assert_int_eq(ge2_accuracy(g, h, m->labels, &correct), GE2_OK);
    ck_assert_int_eq(ge2_mark_output(g, correct), GE2_OK);
    ck_assert_int_eq(ge2_backward(g, loss), GE2_OK);
    ge2_optimizer_config adam = ge2_optimizer_defaults(GE2_OPT_ADAM);
    ck_assert_int_eq(ge2_optimizer(g, &adam), GE2_OK);
    m->running[0] = ge2_graph_find(g, "bn.running_mean");
    m->running[1] = ge2_graph_find(g, "bn.running_var");
    ck_assert(m->running[0] && m->running[1]);
}

/* A data set of n examples: pixels as bytes, the same as floats the way
 * the loader makes them ((float)byte / 255), labels below CLASSES. */
typedef struct data {
    int64_t n;
    uint8_t *bytes;
    ge2_dataset *set;
} data;

static void data_make(int64_t n, uint64_t seed, data *d)
{
    d->n = n;
    d->bytes = malloc((size_t)(n * FEATURES));
    ck_assert_ptr_nonnull(d->bytes);
    ck_assert_int_eq(ge2_dataset_new(n, FEATURES, CLASSES, &d->set), GE2_OK);
    uint64_t s = seed;
    for (int64_t i = 0; i < n * FEATURES; i++) {
        d->bytes[i] = (uint8_t)rg_below(&s, 256);
        d->set->images[i] = (float)d->bytes[i] / 255.0f;
    }
    for (int64_t i = 0; i < n; i++)
        d->set->labels[i] = (int32_t)((d->bytes[i * FEATURES] + i) % CLASSES);
}

static void data_free(data *d)
{
    free(d->bytes);
    ge2_dataset_free(d->set);
}

static ge2_program *compile_on_device(const model *m, ge2_context **ctx)
{
    ge2_program *p;
    ck_assert_int_eq(ge2_context_new(DEVICE, ctx), GE2_OK);
    ge2_compile_options o = ge2_compile_defaults();
    o.device_loop = true;
    ck_assert_msg(ge2_compile(*ctx, m->graph, &o, &p) == GE2_OK, "%s", ge2_last_error());
    return p;
}

/* Keeps d for mode's runs: x as bytes, labels as they are. */
static void keep(ge2_program *p, const model *m, ge2_mode mode, const data *d, bool shuffle)
{
    const ge2_dataset_field fields[2] = {{m->labels, d->set->labels, GE2_I32, 0.0f},
                                         {m->x, d->bytes, GE2_U8, 255.0f}};
    const ge2_dataset_desc desc = {d->n, fields, 2, shuffle, 99, 0};
    ck_assert_msg(ge2_program_set_dataset(p, mode, &desc) == GE2_OK, "%s", ge2_last_error());
}

/* Steps run inside device loops by the runs so far */
static int64_t looped_steps;

static void run(ge2_program *p, ge2_mode mode, ge2_run *r, int64_t steps)
{
    r->steps = steps;
    ck_assert_msg(ge2_program_run(p, mode, r) == GE2_OK, "%s", ge2_last_error());
    looped_steps += r->device_loop_steps;
}

/* The reference: `steps` ge2_program_step calls on the batcher's batches. */
static void steps_from(ge2_program *p, const model *m, ge2_mode mode, ge2_batcher *b, int64_t steps)
{
    for (int64_t s = 0; s < steps; s++) {
        ge2_batch batch;
        if (!ge2_batcher_next(b, &batch)) {
            int64_t epoch, at;
            ge2_batcher_position(b, &epoch, &at);
            ck_assert_int_eq(ge2_batcher_seek(b, epoch + 1, 0), GE2_OK);
            ck_assert(ge2_batcher_next(b, &batch));
        }
        const ge2_feed feeds[2] = {{m->x, batch.images, ge2_shape2(batch.size, FEATURES)},
                                   {m->labels, batch.labels, ge2_shape1(batch.size)}};
        ck_assert_msg(ge2_program_step(p, mode, feeds, 2) == GE2_OK, "%s", ge2_last_error());
    }
}

/* Whether two programs hold the same second layer's weight, bit for bit. */
static bool same_weights(ge2_program *a, ge2_program *b, const model *m)
{
    float wa[CLASSES * 16], wb[CLASSES * 16];
    ck_assert_int_eq(ge2_program_get_parameter(a, m->params[2], wa, sizeof wa), GE2_OK);
    ck_assert_int_eq(ge2_program_get_parameter(b, m->params[2], wb, sizeof wb), GE2_OK);
    return memcmp(wa, wb, sizeof wa) == 0;
}

static void free_programs(ge2_program *const *programs, ge2_context *const *contexts, int n)
{
    for (int i = 0; i < n; i++) {
        ge2_program_free(programs[i]);
        ge2_context_free(contexts[i]);
    }
}

/* The model's state and both modes' metrics, bit for bit. */
static void expect_same(ge2_program *a, ge2_program *b, const model *m, const char *what)
{
    float va[16 * FEATURES], vb[16 * FEATURES];
    for (int i = 0; i < m->n_params; i++) {
        const size_t bytes = (size_t)ge2_shape_numel(ge2_tensor_shape(m->params[i])) * sizeof(float);
        ck_assert_int_eq(ge2_program_get_parameter(a, m->params[i], va, bytes), GE2_OK);
        ck_assert_int_eq(ge2_program_get_parameter(b, m->params[i], vb, bytes), GE2_OK);
        ck_assert_msg(memcmp(va, vb, bytes) == 0, "%s: '%s' differs", what, ge2_tensor_name(m->params[i]));
    }
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(ge2_program_get_buffer(a, m->running[i], va, 16 * sizeof(float)), GE2_OK);
        ck_assert_int_eq(ge2_program_get_buffer(b, m->running[i], vb, 16 * sizeof(float)), GE2_OK);
        ck_assert_msg(memcmp(va, vb, 16 * sizeof(float)) == 0, "%s: '%s' differs", what, ge2_tensor_name(m->running[i]));
    }
    for (int mode = 0; mode < GE2_MODE_COUNT; mode++) {
        ge2_metrics ma, mb;
        ck_assert_int_eq(ge2_program_sync(a), GE2_OK);
        ck_assert_int_eq(ge2_program_sync(b), GE2_OK);
        ck_assert_int_eq(ge2_program_take_metrics(a, (ge2_mode)mode, &ma), GE2_OK);
        ck_assert_int_eq(ge2_program_take_metrics(b, (ge2_mode)mode, &mb), GE2_OK);
        ck_assert_msg(ma.steps == mb.steps && ma.examples == mb.examples && ma.first_nonfinite == mb.first_nonfinite &&
                          memcmp(&ma.loss_sum, &mb.loss_sum, sizeof ma.loss_sum) == 0 &&
                          memcmp(&ma.metric_sum, &mb.metric_sum, sizeof ma.metric_sum) == 0,
                      "%s, %s metrics: %lld steps, %lld examples, loss %.9g, metric %g against %lld, %lld, %.9g, %g",
                      what, mode ? "eval" : "train", (long long)ma.steps, (long long)ma.examples, ma.loss_sum,
                      ma.metric_sum, (long long)mb.steps, (long long)mb.examples, mb.loss_sum, mb.metric_sum);
    }
}

/* Runs of 5, 9 (across the epoch's end and its partial batch) and 4 train
 * steps, an eval pass between them, against the same steps one at a time;
 * and one run of all 18 against the split runs. */
START_TEST(test_runs_equal_single_steps)
{
    for (int shuffle = 0; shuffle < 2; shuffle++) {
        model m;
        model_build(&m);
        data train, eval;
        data_make(TRAIN_EXAMPLES, 5, &train);
        data_make(EVAL_EXAMPLES, 6, &eval);
        ge2_context *ca, *cb, *cc;
        ge2_program *a = compile_on_device(&m, &ca), *b = compile_on_device(&m, &cb), *c = compile_on_device(&m, &cc);
        keep(a, &m, GE2_MODE_TRAIN, &train, shuffle);
        keep(a, &m, GE2_MODE_EVAL, &eval, false);
        keep(c, &m, GE2_MODE_TRAIN, &train, shuffle);
        ck_assert_int_eq(ge2_program_run_batches(a, GE2_MODE_TRAIN, BATCH), 7);
        ck_assert_int_eq(ge2_program_run_batches(a, GE2_MODE_EVAL, BATCH), 3);

        const ge2_batcher_options train_order = {.batch_size = BATCH, .shuffle = shuffle, .seed = 99};
        const ge2_batcher_options eval_order = {.batch_size = BATCH};
        ge2_batcher *tb, *eb;
        ck_assert_int_eq(ge2_batcher_new(train.set, &train_order, &tb), GE2_OK);
        ck_assert_int_eq(ge2_batcher_new(eval.set, &eval_order, &eb), GE2_OK);

        ge2_run r = {.batch = BATCH};
        run(a, GE2_MODE_TRAIN, &r, 5);
        steps_from(b, &m, GE2_MODE_TRAIN, tb, 5);
        ge2_run e = {.batch = BATCH};
        run(a, GE2_MODE_EVAL, &e, 3);
        steps_from(b, &m, GE2_MODE_EVAL, eb, 3);
        ck_assert(e.epoch == 1 && e.batch_in_epoch == 0);
        run(a, GE2_MODE_TRAIN, &r, 9);
        steps_from(b, &m, GE2_MODE_TRAIN, tb, 9);
        ck_assert_msg(r.epoch == 2 && r.batch_in_epoch == 0, "after 14 steps: epoch %lld batch %lld",
                      (long long)r.epoch, (long long)r.batch_in_epoch);
        run(a, GE2_MODE_TRAIN, &r, 4);
        steps_from(b, &m, GE2_MODE_TRAIN, tb, 4);
        int64_t epoch, at;
        ge2_batcher_position(tb, &epoch, &at);
        ck_assert(r.epoch == epoch && r.batch_in_epoch == at);
        expect_same(a, b, &m, shuffle ? "shuffled runs" : "runs in order");

        /* Each run's full batches loop: on the CPU all of them (5 + 6 + 4
         * of a's 18 train steps, 2 of its 3 eval steps); on CUDA those after
         * the key's first step, which captures it (4 + 6 + 4; the eval
         * run's two full batches are its key's first and a lone one) */
        ck_assert_msg(looped_steps == (DEVICE == GE2_DEVICE_CUDA ? 14 : 17), "%lld steps ran in loops (%s)",
                      (long long)looped_steps, ge2_program_run_per_step(a, GE2_MODE_TRAIN) ?
                      ge2_program_run_per_step(a, GE2_MODE_TRAIN) : "no reason given");
        looped_steps = 0;
        ge2_run all = {.batch = BATCH};
        run(c, GE2_MODE_TRAIN, &all, 18);
        ck_assert_msg(looped_steps == (DEVICE == GE2_DEVICE_CUDA ? 15 : 16), "%lld of 18 steps in loops",
                      (long long)looped_steps);
        looped_steps = 0;
        ck_assert_msg(same_weights(a, c, &m), "one run of 18 steps trained another model than 5 + 9 + 4");

        ge2_batcher_free(tb);
        ge2_batcher_free(eb);
        free_programs((ge2_program *[]){a, b, c}, (ge2_context *[]){ca, cb, cc}, 3);
        data_free(&train);
        data_free(&eval);
        ge2_graph_free(m.graph);
    }
}
END_TEST

/* CPU only: a CPU step fails at once, where a CUDA step's count is seen
 * at a later wait, with the run's position past it. */
#ifndef PROGRAM_RUN_ON_CUDA
START_TEST(test_mistakes_are_named)
{
    model m;
    model_build(&m);
    data d;
    data_make(TRAIN_EXAMPLES, 5, &d);
    ge2_context *ctx;
    ge2_program *p = compile_on_device(&m, &ctx);
    ge2_run r = {.batch = BATCH, .steps = 1};
    expect_error(ge2_program_run(p, GE2_MODE_TRAIN, &r), GE2_ERR_STATE, "no train data set", NULL);

    ge2_dataset_field fields[2] = {{m.labels, d.set->labels, GE2_I32, 0.0f}, {m.x, d.bytes, GE2_U8, 255.0f}};
    ge2_dataset_desc desc = {d.n, fields, 1, true, 1, 0};
    expect_error(ge2_program_set_dataset(p, GE2_MODE_TRAIN, &desc), GE2_ERR_INVALID_ARGUMENT, "2 input(s)", NULL);
    desc.n_fields = 2;
    fields[1].feed = m.labels;
    expect_error(ge2_program_set_dataset(p, GE2_MODE_TRAIN, &desc), GE2_ERR_INVALID_ARGUMENT, "both feed 'labels'",
                 NULL);
    fields[1].feed = m.params[0];
    expect_error(ge2_program_set_dataset(p, GE2_MODE_TRAIN, &desc), GE2_ERR_INVALID_ARGUMENT,
                 "'w1' is a parameter, not an input or label", NULL);
    fields[1] = (ge2_dataset_field){m.x, d.bytes, GE2_I32, 0.0f};
    expect_error(ge2_program_set_dataset(p, GE2_MODE_TRAIN, &desc), GE2_ERR_INVALID_ARGUMENT,
                 "field 1 for 'x' is i32; the feed is f32", NULL);
    fields[1] = (ge2_dataset_field){m.x, d.bytes, GE2_U8, 0.0f};
    expect_error(ge2_program_set_dataset(p, GE2_MODE_TRAIN, &desc), GE2_ERR_INVALID_ARGUMENT, "divisor > 0", NULL);
    fields[1].divisor = 255.0f;
    desc.max_bytes = 400;
    expect_error(ge2_program_set_dataset(p, GE2_MODE_TRAIN, &desc), GE2_ERR_OUT_OF_MEMORY, "over its limit", NULL);
    desc.max_bytes = 0;
    ck_assert_int_eq(ge2_program_set_dataset(p, GE2_MODE_TRAIN, &desc), GE2_OK);
    r.batch = 0;
    expect_error(ge2_program_run(p, GE2_MODE_TRAIN, &r), GE2_ERR_INVALID_ARGUMENT, "batch 0", NULL);
    r = (ge2_run){.batch = BATCH, .batch_in_epoch = 7, .steps = 1};
    expect_error(ge2_program_run(p, GE2_MODE_TRAIN, &r), GE2_ERR_INVALID_ARGUMENT, "an epoch has 7 batches of 8", NULL);
    r = (ge2_run){.batch = BATCH, .batch_in_epoch = 6, .steps = 2};
    ck_assert_int_eq(ge2_program_run(p, GE2_MODE_TRAIN, &r), GE2_OK);
    ck_assert(r.epoch == 1 && r.batch_in_epoch == 1);
    /* a label out of range fails its step, which names it; the position
     * stays at that step */
    d.set->labels[3] = 7;
    fields[0].data = d.set->labels;
    desc.shuffle = false;
    ck_assert_int_eq(ge2_program_set_dataset(p, GE2_MODE_TRAIN, &desc), GE2_OK);
    r = (ge2_run){.batch = BATCH, .steps = 3};
    expect_error(ge2_program_run(p, GE2_MODE_TRAIN, &r), GE2_ERR_INVALID_ARGUMENT, "labels[3] is 7, outside [0, 4)", NULL);
    ck_assert(r.epoch == 0 && r.batch_in_epoch == 0);
    ge2_program_free(p);
    ge2_context_free(ctx);
    data_free(&d);
    ge2_graph_free(m.graph);
}
END_TEST
#endif

/* A learning-rate table gives runs, loops included, the bits of
 * ge2_set_lr before each step, past the table's end too; a run without it
 * trains another model; bad tables are named. */
START_TEST(test_lr_table_equals_set_lr_each_step)
{
    model m;
    model_build(&m);
    data train;
    data_make(TRAIN_EXAMPLES, 5, &train);
    ge2_context *ca, *cb, *cc;
    ge2_program *a = compile_on_device(&m, &ca), *b = compile_on_device(&m, &cb), *c = compile_on_device(&m, &cc);
    keep(a, &m, GE2_MODE_TRAIN, &train, true);
    keep(c, &m, GE2_MODE_TRAIN, &train, true);
    double lrs[10];
    for (int i = 0; i < 10; i++)
        lrs[i] = 1e-3 * (1.0 + 0.37 * i) / (1 + i % 4);
    expect_error(ge2_program_set_lr_table(a, lrs, 10, 0), GE2_ERR_INVALID_ARGUMENT, "steps_each >= 1", NULL);
    lrs[4] = -1.0;
    expect_error(ge2_program_set_lr_table(a, lrs, 10, 2), GE2_ERR_INVALID_ARGUMENT, "lrs[4] is -1", NULL);
    lrs[4] = 2e-3;
    ck_assert_msg(ge2_program_set_lr_table(a, lrs, 10, 2) == GE2_OK, "%s", ge2_last_error());
    ck_assert_int_eq(ge2_set_lr(c, lrs[0]), GE2_OK);

    const ge2_batcher_options order = {.batch_size = BATCH, .shuffle = true, .seed = 99};
    ge2_batcher *tb;
    ck_assert_int_eq(ge2_batcher_new(train.set, &order, &tb), GE2_OK);
    ge2_run r = {.batch = BATCH}, rc = {.batch = BATCH};
    run(a, GE2_MODE_TRAIN, &r, 9);
    run(a, GE2_MODE_TRAIN, &r, 14); /* 23 steps: 3 past the table's 20 */
    run(c, GE2_MODE_TRAIN, &rc, 23);
    looped_steps = 0;
    for (int s = 0; s < 23; s++) {
        ck_assert_int_eq(ge2_set_lr(b, lrs[s / 2 < 10 ? s / 2 : 9]), GE2_OK);
        steps_from(b, &m, GE2_MODE_TRAIN, tb, 1);
    }
    expect_same(a, b, &m, "a learning-rate table");
    double la = 0, lb = 0;
    ck_assert_int_eq(ge2_get_lr(a, &la), GE2_OK);
    ck_assert_int_eq(ge2_get_lr(b, &lb), GE2_OK);
    ck_assert_msg(la == lb, "ge2_get_lr after the runs: %.9g, after the steps %.9g", la, lb);
    ck_assert_msg(!same_weights(a, c, &m), "the table changed nothing");
    ge2_batcher_free(tb);
    free_programs((ge2_program *[]){a, b, c}, (ge2_context *[]){ca, cb, cc}, 3);
    data_free(&train);
    ge2_graph_free(m.graph);
}
END_TEST

/* A step result a key does not compute (a marked bias gradient, which the
 * eval key has not) adds 0 in a loop as in a step alone: runs of both
 * modes equal the steps one at a time in every result's sum. */
START_TEST(test_uncomputed_result_adds_zero)
{
    ge2_graph *g;
    ge2_tensor *x, *t, *w, *b, *pred, *loss;
    ck_assert_int_eq(ge2_graph_new(&g), GE2_OK);
    ck_assert_int_eq(ge2_input(g, "x", GE2_F32, ge2_shape2(BATCH, FEATURES), &x), GE2_OK);
    ck_assert_int_eq(ge2_input(g, "t", GE2_F32, ge2_shape2(BATCH, 1), &t), GE2_OK);
    ck_assert_int_eq(ge2_parameter(g, "w", GE2_F32, ge2_shape2(1, FEATURES),
                                   (ge2_init){GE2_INIT_LINEAR_DEFAULT, 0, 0, FEATURES}, &w), GE2_OK);
    ck_assert_int_eq(ge2_parameter(g, "b", GE2_F32, ge2_shape1(1), (ge2_init){GE2_INIT_LINEAR_DEFAULT, 0, 0, FEATURES},
                                   &b), GE2_OK);
    ck_assert_int_eq(ge2_linear(g, x, w, b, GE2_ACT_NONE, 0.0f, &pred), GE2_OK);
    ck_assert_int_eq(ge2_mse_loss(g, pred, t, &loss), GE2_OK);
    ck_assert_int_eq(ge2_backward(g, loss), GE2_OK);
    ck_assert_int_eq(ge2_mark_output(g, ge2_grad(b)), GE2_OK);
    ge2_optimizer_config sgd = ge2_optimizer_defaults(GE2_OPT_SGD);
    sgd.update_mode = GE2_UPDATE_FLAT;
    ck_assert_int_eq(ge2_optimizer(g, &sgd), GE2_OK);
    enum { N = 6 * BATCH };
    float xs[N * FEATURES], ts[N];
    uint64_t s = 3;
    for (int i = 0; i < N * FEATURES; i++)
        xs[i] = (float)rg_below(&s, 1000) / 1000.0f;
    for (int i = 0; i < N; i++)
        ts[i] = (float)rg_below(&s, 1000) / 500.0f;
    const ge2_dataset_field fields[2] = {{x, xs, GE2_F32, 0.0f}, {t, ts, GE2_F32, 0.0f}};
    const ge2_dataset_desc desc = {N, fields, 2, true, 7, 0};
    ge2_context *ca, *cb;
    ge2_program *a, *p;
    ck_assert_int_eq(ge2_context_new(DEVICE, &ca), GE2_OK);
    ck_assert_int_eq(ge2_context_new(DEVICE, &cb), GE2_OK);
    ge2_compile_options o = ge2_compile_defaults();
    o.device_loop = true;
    ck_assert_msg(ge2_compile(ca, g, &o, &a) == GE2_OK, "%s", ge2_last_error());
    ck_assert_msg(ge2_compile(cb, g, &o, &p) == GE2_OK, "%s", ge2_last_error());
    for (int mode = 0; mode < GE2_MODE_COUNT; mode++) {
        ck_assert_msg(ge2_program_set_dataset(a, (ge2_mode)mode, &desc) == GE2_OK, "%s", ge2_last_error());
        ck_assert_msg(ge2_program_set_dataset(p, (ge2_mode)mode, &desc) == GE2_OK, "%s", ge2_last_error());
    }
    for (int round = 0; round < 2; round++)
        for (int mode = 0; mode < GE2_MODE_COUNT; mode++) {
            ge2_run all = {.batch = BATCH, .epoch = round, .steps = 6};
            looped_steps = 0;
            run(a, (ge2_mode)mode, &all, 6);
            /* CUDA's first run of a key starts with its capture, alone */
            const int64_t want = DEVICE == GE2_DEVICE_CUDA && round == 0 ? 5 : 6;
            ck_assert_msg(looped_steps == want, "%lld of 6 %s steps looped", (long long)looped_steps,
                          mode ? "eval" : "train");
            for (int i = 0; i < 6; i++) {
                ge2_run one = {.batch = BATCH, .epoch = round, .batch_in_epoch = i, .steps = 1};
                run(p, (ge2_mode)mode, &one, 1);
            }
        }
    looped_steps = 0;
    for (int mode = 0; mode < GE2_MODE_COUNT; mode++) {
        ge2_metrics ma, mp;
        double ga, gp;
        ck_assert_int_eq(ge2_program_sync(a), GE2_OK);
        ck_assert_int_eq(ge2_program_sync(p), GE2_OK);
        ck_assert_int_eq(ge2_program_take_metrics(a, (ge2_mode)mode, &ma), GE2_OK);
        ck_assert_int_eq(ge2_program_take_metrics(p, (ge2_mode)mode, &mp), GE2_OK);
        ck_assert_int_eq(ge2_program_taken_sum(a, (ge2_mode)mode, ge2_grad(b), &ga), GE2_OK);
        ck_assert_int_eq(ge2_program_taken_sum(p, (ge2_mode)mode, ge2_grad(b), &gp), GE2_OK);
        ck_assert_msg(ma.steps == 12 && mp.steps == 12 && memcmp(&ma.loss_sum, &mp.loss_sum, sizeof ma.loss_sum) == 0 &&
                          memcmp(&ga, &gp, sizeof ga) == 0,
                      "%s: %lld steps, loss %.9g, b's gradient %.9g against %lld, %.9g, %.9g",
                      mode ? "eval" : "train", (long long)ma.steps, ma.loss_sum, ga, (long long)mp.steps,
                      mp.loss_sum, gp);
        if (mode == GE2_MODE_EVAL)
            ck_assert_msg(ga == 0.0, "the eval key's gradient sum is %g", ga);
        else
            ck_assert_msg(ga != 0.0, "the train key's gradient sum is 0");
    }
    ge2_program_free(a);
    ge2_program_free(p);
    ge2_context_free(ca);
    ge2_context_free(cb);
    ge2_graph_free(g);
}
END_TEST

/* A u8 feed kept as bytes is copied as bytes (only an f32 feed widens
 * them): it reads back as the examples' bytes, after a step alone and
 * after a loop (its last batch). */
START_TEST(test_byte_feed_kept_as_bytes)
{
    ge2_graph *g;
    ge2_tensor *x;
    ck_assert_int_eq(ge2_graph_new(&g), GE2_OK);
    ck_assert_int_eq(ge2_input(g, "x", GE2_U8, ge2_shape2(2, 3), &x), GE2_OK);
    ck_assert_int_eq(ge2_mark_output(g, x), GE2_OK);
    ge2_context *ctx;
    ge2_program *p;
    ck_assert_int_eq(ge2_context_new(DEVICE, &ctx), GE2_OK);
    ge2_compile_options o = ge2_compile_defaults();
    o.device_loop = true;
    ck_assert_msg(ge2_compile(ctx, g, &o, &p) == GE2_OK, "%s", ge2_last_error());
    const uint8_t bytes[8][3] = {{1, 2, 3},       {4, 5, 6},    {250, 251, 252}, {7, 8, 9},
                                 {10, 11, 12}, {13, 14, 15}, {16, 17, 18},    {19, 20, 21}};
    const ge2_dataset_field field = {x, bytes, GE2_U8, 0.0f};
    const ge2_dataset_desc desc = {8, &field, 1, false, 0, 0};
    ck_assert_msg(ge2_program_set_dataset(p, GE2_MODE_EVAL, &desc) == GE2_OK, "%s", ge2_last_error());
    ge2_run r = {.batch = 2, .batch_in_epoch = 1, .steps = 1};
    ck_assert_msg(ge2_program_run(p, GE2_MODE_EVAL, &r) == GE2_OK, "%s", ge2_last_error());
    uint8_t got[8] = {0};
    ck_assert_msg(ge2_program_read_output(p, GE2_MODE_EVAL, x, got, 6) == GE2_OK, "%s", ge2_last_error());
    ck_assert_msg(memcmp(got, bytes[2], 6) == 0 && got[6] == 0, "read back %d %d %d %d %d %d", got[0], got[1], got[2],
                  got[3], got[4], got[5]);
    r = (ge2_run){.batch = 2, .steps = 4};
    ck_assert_msg(ge2_program_run(p, GE2_MODE_EVAL, &r) == GE2_OK, "%s", ge2_last_error());
    /* the key ran (and, on CUDA, was captured) by the step above: all loop */
    ck_assert_msg(r.device_loop_steps == 4, "%lld of 4 steps looped",
                  (long long)r.device_loop_steps);
    ck_assert_msg(ge2_program_read_output(p, GE2_MODE_EVAL, x, got, 6) == GE2_OK, "%s", ge2_last_error());
    ck_assert_msg(memcmp(got, bytes[6], 6) == 0, "after the loop: read back %d %d %d %d %d %d", got[0], got[1],
                  got[2], got[3], got[4], got[5]);
    ge2_program_free(p);
    ge2_context_free(ctx);
    ge2_graph_free(g);
}
END_TEST

/* A label out of range inside a loop: the loop ends at that step, and the
 * run fails naming it (the CPU's kernel at once, CUDA's count when the
 * launch is done), its position at the failed step, the loop's steps
 * before it counted. */
START_TEST(test_loop_reports_bad_labels)
{
    model m;
    model_build(&m);
    data d;
    data_make(TRAIN_EXAMPLES, 5, &d);
    d.set->labels[8 * 3 + 2] = 9; /* the fourth batch, inside the loop */
    ge2_context *ctx;
    ge2_program *p = compile_on_device(&m, &ctx);
    keep(p, &m, GE2_MODE_TRAIN, &d, false);
    ge2_run r = {.batch = BATCH, .steps = 6};
    expect_error(ge2_program_run(p, GE2_MODE_TRAIN, &r), GE2_ERR_INVALID_ARGUMENT, "is 9, outside [0, 4)", NULL);
    /* CUDA's first step runs alone (its key's capture) */
    const int64_t looped = DEVICE == GE2_DEVICE_CUDA ? 2 : 3;
    ck_assert_msg(r.epoch == 0 && r.batch_in_epoch == 3 && r.device_loop_steps == looped,
                  "after the failed run: epoch %lld, batch %lld, %lld steps looped", (long long)r.epoch,
                  (long long)r.batch_in_epoch, (long long)r.device_loop_steps);
    ge2_program_free(p);
    ge2_context_free(ctx);
    data_free(&d);
    ge2_graph_free(m.graph);
}
END_TEST

#ifdef PROGRAM_RUN_ON_CUDA
int main(void)
{
    const TTest *const tests[] = {test_runs_equal_single_steps, test_byte_feed_kept_as_bytes,
                                  test_loop_reports_bad_labels, test_uncomputed_result_adds_zero,
                                  test_lr_table_equals_set_lr_each_step};
    return ge2_gpu_suite_main("program_run_gpu", 120, tests, (int)(sizeof tests / sizeof tests[0]));
}
#else
int main(void)
{
    const TTest *tests[] = {test_runs_equal_single_steps, test_mistakes_are_named, test_byte_feed_kept_as_bytes,
                            test_loop_reports_bad_labels, test_uncomputed_result_adds_zero,
                            test_lr_table_equals_set_lr_each_step};
    return planner_run_tests("program_run", tests, (int)(sizeof tests / sizeof tests[0]), 60);
}
#endif
