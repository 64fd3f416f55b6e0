/* ge2_bench: ge2's half of the benchmark against PyTorch (bench/README.md).
 *
 * Each (workload, mode) trains a freshly built MLP or CNN (Adam, lr 1e-3,
 * mean cross-entropy) and prints one JSON line on stdout; bench/torch_bench.py
 * prints the same lines for PyTorch and bench/report.py joins the two.
 *
 * Timing. ge2_program_step returns before the GPU has run the step, and ge2
 * runs on a non-blocking stream of its own, so an event on the default
 * stream cannot bracket one step.
 * Instead a block of N steps sits between two ge2_program_sync() calls with
 * an event recorded after each: the elapsed time covers the block's enqueue
 * and execution plus one sync round trip, amortized over N. The reported
 * figure is the median over blocks of (block time / N); torch_bench.py times
 * its blocks the same way. Host time is measured apart, in bursts of
 * HOST_BURST steps after a sync, so that no step waits for the device.
 *
 * Feeding. Every row writes each batch straight into the program's pinned
 * feed buffers (ge2_program_feed_buffers + ge2_batcher_next_into: the one
 * copy of the batch, from the data set), so ge2_program_step copies
 * nothing. Host time is the time inside ge2_program_step; the batch's
 * write is reported apart (host_feed_us_per_step).
 *
 * Usage: ge2_bench [--data DIR] [--only WORKLOAD] [--seconds S] [--epochs E] [--cpu] [--update-mode M]
 *   --data     Fashion-MNIST folder for the epoch (default $GE2_DATA_DIR,
 *              else /usr/share/datasets/fashion-mnist)
 *   --only     run one workload (mlp_small, mlp_medium, mlp_large, epoch, epoch_loop, cnn64,
 *              cnn256, cnn_epoch, cnn_epoch_loop)
 *   --seconds  timed seconds per (workload, mode) (default 1)
 *   --epochs   timed epochs per mode (default 5, after one warm-up epoch)
 *   --cpu      run on the CPU backend, timed by the host clock: checks the
 *              bench itself on a machine without a GPU (figures meaningless)
 *   --update-mode  Adam's update_mode: auto (default), flat or per_parameter,
 *              to time both layouts on one machine (ge2_bench only: run.sh
 *              passes its options to torch_bench.py too, which has none)
 * Exit status: 0 when every row ran, 1 otherwise (failed rows carry "error").
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "graph/clock.h"
#include "data/dataset.h"
#include "ge2/ge2.h"
#include "graph/alloc.h"
#include "graph/error.h"

#define MAX_LAYERS 8
/* Distinct random batches the synthetic workloads cycle through. */
#define SYNTHETIC_BATCHES 4
/* Steps per host-time burst after a sync. Two: ge2 double-buffers its input
 * staging, so a third step in flight would wait for the device, and the
 * figure would be the GPU's time, not the host's. */
#define HOST_BURST 2
#define HOST_SAMPLES 400
#define SEED 1234

typedef struct bench_workload {
    const char *name;
    int n_dims;
    /* MLP: features, hidden..., classes; CNN: features (784 = 1 × 28 × 28),
     * conv1 and conv2 channels, fc1 width, classes (train_cnn's model) */
    int64_t dims[MAX_LAYERS + 1];
    int64_t batch;
    bool tf32_row; /* also measure replay with TF32 GEMMs */
    bool bf16_row; /* and replay in precision BF16 */
    bool epoch;    /* one Fashion-MNIST epoch instead of synthetic steps */
    bool cnn;
    /* the epoch from a data set the program keeps (ge2_program_run): on
     * CUDA its full batches loop on the device, many steps a launch */
    bool kept;
} bench_workload;

static const bench_workload WORKLOADS[] = {
    {"mlp_small", 4, {784, 256, 128, 10}, 64, false, false, false, false, false},
    {"mlp_medium", 4, {784, 1024, 1024, 10}, 256, false, false, false, false, false},
    {"mlp_large", 5, {784, 4096, 4096, 4096, 10}, 256, true, true, false, false, false},
    {"epoch", 4, {784, 256, 128, 10}, 64, false, false, true, false, false},
    {"cnn64", 5, {784, 32, 64, 128, 10}, 64, true, true, false, true, false},
    {"cnn256", 5, {784, 32, 64, 128, 10}, 256, true, true, false, true, false},
    {"cnn_epoch", 5, {784, 32, 64, 128, 10}, 64, false, false, true, true, false},
    {"epoch_loop", 4, {784, 256, 128, 10}, 64, false, false, true, false, true},
    {"cnn_epoch_loop", 5, {784, 32, 64, 128, 10}, 64, false, false, true, true, true},
};

typedef struct bench_mode {
    const char *name;
    bool capture;
    ge2_precision precision;
} bench_mode;

static const bench_mode MODES[] = {
    {"replay", true, GE2_PRECISION_FP32},
    {"eager", false, GE2_PRECISION_FP32},
    {"replay", true, GE2_PRECISION_TF32},
    {"replay", true, GE2_PRECISION_BF16},
};

typedef struct bench_options {
    const char *data_dir;
    const char *only;
    double seconds;
    int epochs;
    bool cpu;
    ge2_update_mode update_mode;
} bench_options;

/* What one (workload, mode) row reports. */
typedef struct bench_result {
    double us_median, us_p10, us_p90; /* device-timed µs per step */
    double host_us;                   /* median µs inside one ge2_program_step */
    double host_feed_us;              /* median µs writing a batch into the feed buffers */
    double host_allocs;               /* ge2_malloc calls per step (host bursts) */
    double ms_epoch;                  /* epoch workload: median ms per epoch */
    int64_t steps_timed, steps_per_epoch;
    int launches;      /* ge2 launches per step (one per scheduled node) */
    int graph_kernels; /* kernel nodes in the captured graph; -1 if not captured */
    ge2_plan_stats plan;
    size_t taken_bytes; /* device memory the row took from the GPU (cudaMemGetInfo drop) */
    float loss_first, loss_last;
} bench_result;

/* A built, compiled model and the batches it is fed. */
typedef struct bench_model {
    ge2_graph *graph;
    ge2_tensor *x;    /* [B, features] */
    ge2_tensor *y;    /* [B] i32 */
    ge2_tensor *loss; /* scalar */
    ge2_program *program;
    ge2_dataset *data; /* owned unless borrowed */
    bool data_borrowed;
    ge2_batcher *batcher;
    cudaEvent_t start, stop; /* NULL on the CPU backend: the host clock times blocks */
} bench_model;

/* --------------------------------------------------------------- helpers */

static ge2_status cuda_ok(cudaError_t err, const char *what)
{
    if (err == cudaSuccess)
        return GE2_OK;
    return ge2_error(GE2_ERR_CUDA, "ge2_bench: %s: %s", what, cudaGetErrorString(err));
}

static double now_us(void) { return 1e6 * ge2_now_s(); }

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* q-quantile of v[0..n) (sorts v), nearest rank. */
static double quantile(double *v, int n, double q)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    int i = (int)floor(q * (n - 1) + 0.5);
    return v[i];
}

static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

/* ,"key":v, or null when v is NaN or infinite (JSON has no such numbers). */
static void json_number(const char *key, double v)
{
    if (isfinite(v))
        printf(",\"%s\":%.6g", key, v);
    else
        printf(",\"%s\":null", key);
}

static void dims_string(const bench_workload *w, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < w->n_dims && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, i ? "-%lld" : "%lld", (long long)w->dims[i]);
}

/* ----------------------------------------------------------------- model */

/* train_cnn's blocks: conv 3x3 (padding 1, no bias) -> batch norm -> ReLU
 * -> 2x2 max pool, twice, then flatten into the linear layers. */
static ge2_status cnn_features(bench_model *m, const bench_workload *w, ge2_tensor **out)
{
    ge2_tensor *h = m->x;
    for (int b = 0; b < 2; b++) {
        int64_t in = ge2_tensor_shape(h).dim[1], channels = w->dims[1 + b];
        char name[32];
        ge2_tensor *wt;
        snprintf(name, sizeof name, "conv%d.weight", b + 1);
        GE2_TRY(ge2_parameter(m->graph, name, GE2_F32, ge2_shape4(channels, in, 3, 3),
                              (ge2_init){GE2_INIT_LINEAR_DEFAULT, 0, 0, in * 9}, &wt));
        ge2_conv2d_params conv = ge2_conv2d_defaults();
        conv.padding[0] = conv.padding[1] = 1;
        GE2_TRY(ge2_conv2d(m->graph, h, wt, NULL, &conv, &h));
        snprintf(name, sizeof name, "bn%d", b + 1);
        GE2_TRY(ge2_batch_norm_layer(m->graph, name, h, 0.1, 1e-5, &h));
        GE2_TRY(ge2_activate(m->graph, h, GE2_ACT_RELU, 0.0f, &h));
        ge2_pool2d_params pool = ge2_pool2d_square(2, 2, 0);
        GE2_TRY(ge2_max_pool2d(m->graph, h, &pool, &h));
    }
    return ge2_flatten(m->graph, h, out);
}

/* Linear+ReLU hidden layers (after the CNN's convolution blocks), a linear
 * head, mean cross-entropy, Adam. */
static ge2_status model_build(bench_model *m, const bench_workload *w, ge2_update_mode update_mode)
{
    GE2_TRY(ge2_graph_new(&m->graph));
    GE2_TRY(ge2_graph_set_seed(m->graph, SEED));
    ge2_shape x = w->cnn ? ge2_shape4(w->batch, 1, 28, 28) : ge2_shape2(w->batch, w->dims[0]);
    GE2_TRY(ge2_input(m->graph, "x", GE2_F32, x, &m->x));
    GE2_TRY(ge2_label(m->graph, "y", GE2_I32, ge2_shape1(w->batch), &m->y));
    ge2_tensor *h = m->x;
    int first = 0;
    if (w->cnn) {
        GE2_TRY(cnn_features(m, w, &h));
        first = 3; /* the fc layers: flattened features -> dims[3] -> classes */
    }
    for (int l = first; l + 1 < w->n_dims; l++) {
        int64_t in = l == first ? ge2_tensor_shape(h).dim[1] : w->dims[l], out = w->dims[l + 1];
        char name[32];
        ge2_tensor *wt, *b;
        ge2_init init = {GE2_INIT_LINEAR_DEFAULT, 0, 0, in};
        snprintf(name, sizeof name, "fc%d.weight", l - first + 1);
        GE2_TRY(ge2_parameter(m->graph, name, GE2_F32, ge2_shape2(out, in), init, &wt));
        snprintf(name, sizeof name, "fc%d.bias", l - first + 1);
        GE2_TRY(ge2_parameter(m->graph, name, GE2_F32, ge2_shape1(out), init, &b));
        bool last = l + 2 == w->n_dims;
        GE2_TRY(ge2_linear(m->graph, h, wt, b, last ? GE2_ACT_NONE : GE2_ACT_RELU, 0.0f, &h));
    }
    GE2_TRY(ge2_cross_entropy(m->graph, h, m->y, 0.0f, &m->loss));
    GE2_TRY(ge2_backward(m->graph, m->loss));
    ge2_optimizer_config adam = ge2_optimizer_defaults(GE2_OPT_ADAM);
    adam.lr = 1e-3;
    adam.update_mode = update_mode;
    return ge2_optimizer(m->graph, &adam);
}

/* Normal(0,1) features and uniform labels from a fixed-seed LCG, so every
 * run and torch_bench.py's twin see data of the same distribution. */
static ge2_status synthetic_data(const bench_workload *w, ge2_dataset **out)
{
    int64_t n = SYNTHETIC_BATCHES * w->batch, f = w->dims[0];
    int classes = (int)w->dims[w->n_dims - 1];
    GE2_TRY(ge2_dataset_new(n, f, classes, out));
    uint64_t s = SEED;
    for (int64_t i = 0; i < n * f; i += 2) {
        double u[2];
        for (int k = 0; k < 2; k++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            u[k] = ((double)(s >> 11) + 0.5) * (1.0 / 9007199254740992.0);
        }
        double r = sqrt(-2.0 * log(u[0])), t = 6.283185307179586 * u[1];
        (*out)->images[i] = (float)(r * cos(t));
        if (i + 1 < n * f)
            (*out)->images[i + 1] = (float)(r * sin(t));
    }
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        (*out)->labels[i] = (int32_t)((s >> 33) % (uint64_t)classes);
    }
    return GE2_OK;
}

static void model_free(bench_model *m)
{
    if (m->start)
        cudaEventDestroy(m->start);
    if (m->stop)
        cudaEventDestroy(m->stop);
    ge2_batcher_free(m->batcher);
    if (!m->data_borrowed)
        ge2_dataset_free(m->data);
    ge2_program_free(m->program);
    ge2_graph_free(m->graph);
    memset(m, 0, sizeof *m);
}

/* The batcher's next batch (wrapping to the next epoch), written straight
 * into the program's feed buffers; feeds are then the step's, copy-free. */
static ge2_status model_feed(bench_model *m, ge2_feed feeds[2])
{
    int64_t size = ge2_batcher_next_size(m->batcher);
    if (size == 0) {
        int64_t epoch, index;
        ge2_batcher_position(m->batcher, &epoch, &index);
        GE2_TRY(ge2_batcher_seek(m->batcher, epoch + 1, 0));
        size = ge2_batcher_next_size(m->batcher);
    }
    ge2_shape images = ge2_tensor_shape(m->x); /* [B, 784] or [B, 1, 28, 28] */
    images.dim[0] = size;
    feeds[0] = (ge2_feed){m->x, NULL, images};
    feeds[1] = (ge2_feed){m->y, NULL, ge2_shape1(size)};
    void *buf[2];
    GE2_TRY(ge2_program_feed_buffers(m->program, GE2_MODE_TRAIN, feeds, 2, buf));
    ge2_batch b;
    if (!ge2_batcher_next_into(m->batcher, buf[0], buf[1], &b))
        return ge2_error(GE2_ERR_STATE, "ge2_bench: empty data set");
    feeds[0].data = buf[0];
    feeds[1].data = buf[1];
    return GE2_OK;
}

/* One training step on the batcher's next batch. */
static ge2_status model_step(bench_model *m)
{
    ge2_feed feeds[2];
    GE2_TRY(model_feed(m, feeds));
    return ge2_program_step(m->program, GE2_MODE_TRAIN, feeds, 2);
}

static ge2_status read_loss(bench_model *m, float *out)
{
    return ge2_program_read_output(m->program, GE2_MODE_TRAIN, m->loss, out, sizeof *out);
}

/* ---------------------------------------------------------------- timing */

/* Device-timed µs per step of a block of n steps (see the top comment). */
static ge2_status time_block(bench_model *m, int64_t n, double *us_per_step)
{
    GE2_TRY(ge2_program_sync(m->program));
    double t0 = now_us();
    if (m->start)
        GE2_TRY(cuda_ok(cudaEventRecord(m->start, 0), "cudaEventRecord"));
    for (int64_t i = 0; i < n; i++)
        GE2_TRY(model_step(m));
    GE2_TRY(ge2_program_sync(m->program));
    double us = now_us() - t0;
    if (m->start) {
        float ms = 0.0f;
        GE2_TRY(cuda_ok(cudaEventRecord(m->stop, 0), "cudaEventRecord"));
        GE2_TRY(cuda_ok(cudaEventSynchronize(m->stop), "cudaEventSynchronize"));
        GE2_TRY(cuda_ok(cudaEventElapsedTime(&ms, m->start, m->stop), "cudaEventElapsedTime"));
        us = (double)ms * 1e3;
    }
    *us_per_step = us / (double)n;
    return GE2_OK;
}

/* Median µs spent inside ge2_program_step and writing its batch into the
 * feed buffers before it, and ge2 host allocations per step (both parts). */
static ge2_status time_host(bench_model *m, bench_result *r)
{
    double step_us[HOST_SAMPLES], feed_us[HOST_SAMPLES];
    ge2_alloc_stats before, after;
    ge2_alloc_stats_get(&before);
    for (int i = 0; i < HOST_SAMPLES; i++) {
        if (i % HOST_BURST == 0)
            GE2_TRY(ge2_program_sync(m->program));
        ge2_feed feeds[2];
        double t0 = now_us();
        GE2_TRY(model_feed(m, feeds));
        double t1 = now_us();
        GE2_TRY(ge2_program_step(m->program, GE2_MODE_TRAIN, feeds, 2));
        step_us[i] = now_us() - t1;
        feed_us[i] = t1 - t0;
    }
    ge2_alloc_stats_get(&after);
    GE2_TRY(ge2_program_sync(m->program));
    r->host_us = quantile(step_us, HOST_SAMPLES, 0.5);
    r->host_feed_us = quantile(feed_us, HOST_SAMPLES, 0.5);
    r->host_allocs = (double)(after.allocations - before.allocations) / HOST_SAMPLES;
    return GE2_OK;
}

/* Blocks sized to ~10 ms each, as many as fit in the time budget. */
static ge2_status time_steps(bench_model *m, double seconds, bench_result *r)
{
    double probe;
    GE2_TRY(time_block(m, 10, &probe));
    int64_t per_block = (int64_t)ceil(1e4 / probe);
    per_block = per_block < 10 ? 10 : per_block > 1000 ? 1000 : per_block;
    int blocks = (int)(seconds * 1e6 / (probe * (double)per_block));
    blocks = blocks < 7 ? 7 : blocks > 200 ? 200 : blocks;
    double *us = ge2_malloc((size_t)blocks * sizeof *us);
    if (!us)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_bench: %d block timings", blocks);
    ge2_status st = GE2_OK;
    for (int i = 0; i < blocks && st == GE2_OK; i++)
        st = time_block(m, per_block, &us[i]);
    if (st == GE2_OK) {
        r->us_median = quantile(us, blocks, 0.5);
        r->us_p10 = quantile(us, blocks, 0.1);
        r->us_p90 = quantile(us, blocks, 0.9);
        r->steps_timed = blocks * per_block;
    }
    ge2_free(us);
    return st;
}

/* The median epoch of ms[epochs] (and µs a step: median, p10, p90). */
static void epoch_result(double *ms, int epochs, int64_t steps, bench_result *r)
{
    r->ms_epoch = quantile(ms, epochs, 0.5);
    r->us_median = r->ms_epoch * 1e3 / (double)steps;
    r->us_p10 = quantile(ms, epochs, 0.1) * 1e3 / (double)steps;
    r->us_p90 = quantile(ms, epochs, 0.9) * 1e3 / (double)steps;
    r->steps_timed = (int64_t)epochs * steps;
    r->steps_per_epoch = steps;
}

/* One warm-up epoch (it captures the full and the last, partial, batch's
 * keys), then `epochs` timed epochs, data staging included. */
static ge2_status time_epochs(bench_model *m, int epochs, bench_result *r)
{
    int64_t steps = ge2_batcher_batches_per_epoch(m->batcher);
    double ms[64];
    epochs = epochs < 1 ? 1 : epochs > 64 ? 64 : epochs;
    for (int e = -1; e < epochs; e++) {
        double us;
        GE2_TRY(ge2_batcher_seek(m->batcher, e + 1, 0));
        GE2_TRY(time_block(m, steps, &us));
        if (e >= 0)
            ms[e] = us * (double)steps * 1e-3;
    }
    epoch_result(ms, epochs, steps, r);
    return GE2_OK;
}

/* The same epochs as time_epochs from the training set the program keeps:
 * one ge2_program_run an epoch, waited for (the warm-up epoch captures the
 * device loop and the partial batch's key). */
static ge2_status time_kept_epochs(bench_model *m, int64_t batch, int epochs, bench_result *r)
{
    const ge2_dataset *d = m->data;
    const ge2_dataset_field fields[2] = {
        {m->y, d->labels, GE2_I32, 0.0f},
        d->pixels ? (ge2_dataset_field){m->x, d->pixels, GE2_U8, GE2_PIXEL_DIVISOR}
                  : (ge2_dataset_field){m->x, d->images, GE2_F32, 0.0f}};
    const ge2_dataset_desc desc = {d->n, fields, 2, false, SEED, 0};
    GE2_TRY(ge2_program_set_dataset(m->program, GE2_MODE_TRAIN, &desc));
    const int64_t steps = ge2_program_run_batches(m->program, GE2_MODE_TRAIN, batch);
    double ms[64];
    epochs = epochs < 1 ? 1 : epochs > 64 ? 64 : epochs;
    for (int e = -1; e < epochs; e++) {
        ge2_run run = {.batch = batch, .epoch = e + 1, .steps = steps};
        GE2_TRY(ge2_program_sync(m->program));
        const double t0 = now_us();
        GE2_TRY(ge2_program_run(m->program, GE2_MODE_TRAIN, &run));
        GE2_TRY(ge2_program_sync(m->program));
        if (e >= 0)
            ms[e] = (now_us() - t0) * 1e-3;
    }
    const char *why = ge2_program_run_per_step(m->program, GE2_MODE_TRAIN);
    if (why)
        fprintf(stderr, "ge2_bench: note: each step of the kept epoch is its own launch: %s\n", why);
    epoch_result(ms, epochs, steps, r);
    return GE2_OK;
}

/* ------------------------------------------------------------------- rows */

static ge2_status run_row(ge2_context *ctx, const bench_workload *w, const bench_mode *mode,
                          ge2_dataset *fmnist, const bench_options *opt, bench_result *r)
{
    bench_model m;
    memset(&m, 0, sizeof m);
    memset(r, 0, sizeof *r);
    size_t free0 = 0, free1 = 0, total = 0;
    ge2_status st = opt->cpu ? GE2_OK : cuda_ok(cudaMemGetInfo(&free0, &total), "cudaMemGetInfo");
#define ROW_TRY(expr)              \
    do {                           \
        if (st == GE2_OK)          \
            st = (expr);           \
    } while (0)
    ROW_TRY(model_build(&m, w, opt->update_mode));
    ge2_compile_options copt = ge2_compile_defaults();
    copt.precision = mode->precision;
    copt.disable_capture = !mode->capture;
    copt.device_loop = w->kept;
    ROW_TRY(ge2_compile(ctx, m.graph, &copt, &m.program));
    if (w->epoch) {
        m.data = fmnist;
        m.data_borrowed = true;
    } else {
        ROW_TRY(synthetic_data(w, &m.data));
    }
    ge2_batcher_options bopt = {.batch_size = w->batch, .shuffle = false, .seed = SEED, .drop_last = false};
    ROW_TRY(m.data ? ge2_batcher_new(m.data, &bopt, &m.batcher) : GE2_OK);
    if (!opt->cpu) {
        ROW_TRY(cuda_ok(cudaEventCreate(&m.start), "cudaEventCreate"));
        ROW_TRY(cuda_ok(cudaEventCreate(&m.stop), "cudaEventCreate"));
    }

    /* First step: plan + capture; its loss shows where training starts. */
    ROW_TRY(model_step(&m));
    ROW_TRY(read_loss(&m, &r->loss_first));
    for (int i = 0; i < 20; i++)
        ROW_TRY(model_step(&m));
    if (w->kept)
        ROW_TRY(time_kept_epochs(&m, w->batch, opt->epochs, r));
    else if (w->epoch)
        ROW_TRY(time_epochs(&m, opt->epochs, r));
    else
        ROW_TRY(time_steps(&m, opt->seconds, r));
    ROW_TRY(time_host(&m, r));
    ROW_TRY(read_loss(&m, &r->loss_last));
    ROW_TRY(ge2_program_plan_stats(m.program, GE2_MODE_TRAIN, &r->plan));
    ROW_TRY(opt->cpu ? GE2_OK : cuda_ok(cudaMemGetInfo(&free1, &total), "cudaMemGetInfo"));
#undef ROW_TRY
    r->launches = m.program ? ge2_program_launch_count(m.program, GE2_MODE_TRAIN) : 0;
    r->graph_kernels = m.program ? ge2_program_graph_kernel_count(m.program, GE2_MODE_TRAIN) : -1;
    r->taken_bytes = free0 > free1 ? free0 - free1 : 0;
    model_free(&m);
    return st;
}

static void print_row(const bench_workload *w, const bench_mode *mode, const char *device, const bench_result *r,
                      ge2_status st)
{
    char dims[96];
    dims_string(w, dims, sizeof dims);
    printf("{\"impl\":\"ge2\",\"workload\":\"%s\",\"model\":\"%s\",\"mode\":\"%s\",\"tf32\":%s,"
           "\"precision\":\"%s\",\"batch\":%lld,\"dims\":\"%s\",\"device\":",
           w->name, w->cnn ? "cnn" : "mlp", mode->name, mode->precision == GE2_PRECISION_TF32 ? "true" : "false",
           ge2_precision_name(mode->precision), (long long)w->batch, dims);
    json_string(device);
    if (st != GE2_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s: %s", ge2_status_name(st), ge2_last_error());
        printf(",\"error\":");
        json_string(msg);
        printf("}\n");
        fflush(stdout);
        return;
    }
    const ge2_plan_stats *p = &r->plan;
    printf(",\"us_per_step\":%.3f,\"us_p10\":%.3f,\"us_p90\":%.3f,\"steps_timed\":%lld,"
           "\"host_us_per_step\":%.3f,\"host_feed_us_per_step\":%.3f,\"host_allocs_per_step\":%.3f,"
           "\"kernels_per_step\":%d,"
           "\"launches_per_step\":%d,\"kernels_source\":\"%s\",\"device_bytes\":%zu,"
           "\"param_bytes\":%zu,\"grad_bytes\":%zu,\"optimizer_state_bytes\":%zu,\"arena_bytes\":%zu,"
           "\"arena_lower_bound_bytes\":%zu,\"input_bytes\":%zu,\"device_staging_bytes\":%zu,\"workspace_bytes\":%zu,\"taken_bytes\":%zu,"
           "\"update_mode\":\"%s\",\"update_nodes\":%d",
           r->us_median, r->us_p10, r->us_p90, (long long)r->steps_timed, r->host_us, r->host_feed_us, r->host_allocs,
           /* what a replay really runs, comparable with PyTorch's profiler count */
           r->graph_kernels >= 0 ? r->graph_kernels : r->launches, r->launches,
           r->graph_kernels >= 0 ? "captured graph kernel nodes" : "ge2_program_launch_count",
           p->device_bytes, p->parameter_bytes, p->gradient_bytes, p->optimizer_state_bytes, p->arena_bytes,
           p->lower_bound_bytes, p->input_bytes, p->device_staging_bytes, p->workspace_bytes, r->taken_bytes,
           ge2_update_mode_name(p->update_mode), p->update_nodes);
    json_number("loss_first", r->loss_first);
    json_number("loss_last", r->loss_last);
    if (w->epoch)
        printf(",\"ms_per_epoch\":%.3f,\"steps_per_epoch\":%lld", r->ms_epoch, (long long)r->steps_per_epoch);
    printf("}\n");
    fflush(stdout);
}

/* ------------------------------------------------------------------- main */

static int usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s [--data DIR] [--only WORKLOAD] [--seconds S] [--epochs E] [--cpu] "
            "[--update-mode auto|flat|per_parameter]\n",
            argv0);
    return 2;
}

/* GE2_UPDATE_COUNT for a name that is none of them. */
static ge2_update_mode update_mode_parse(const char *name)
{
    int m = 0;
    while (m < GE2_UPDATE_COUNT && strcmp(name, ge2_update_mode_name((ge2_update_mode)m)))
        m++;
    return (ge2_update_mode)m;
}

static bool parse_options(int argc, char **argv, bench_options *opt)
{
    opt->data_dir = getenv("GE2_DATA_DIR");
    if (!opt->data_dir || !*opt->data_dir)
        opt->data_dir = "/usr/share/datasets/fashion-mnist";
    opt->only = NULL;
    opt->seconds = 1.0;
    opt->epochs = 5;
    opt->cpu = false;
    opt->update_mode = GE2_UPDATE_AUTO;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--cpu")) {
            opt->cpu = true;
            continue;
        }
        if (i + 1 >= argc)
            return false;
        if (!strcmp(argv[i], "--data"))
            opt->data_dir = argv[++i];
        else if (!strcmp(argv[i], "--only"))
            opt->only = argv[++i];
        else if (!strcmp(argv[i], "--seconds"))
            opt->seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--epochs"))
            opt->epochs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--update-mode"))
            opt->update_mode = update_mode_parse(argv[++i]);
        else
            return false;
    }
    return opt->seconds > 0 && opt->epochs > 0 && opt->update_mode != GE2_UPDATE_COUNT;
}

int main(int argc, char **argv)
{
    bench_options opt;
    if (!parse_options(argc, argv, &opt))
        return usage(argv[0]);
    char device[256] = "cpu";
    if (!opt.cpu) {
        struct cudaDeviceProp prop;
        if (!ge2_cuda_available() || cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
            fprintf(stderr, "ge2_bench: no CUDA device (--cpu checks the bench on the CPU backend)\n");
            return 1;
        }
        snprintf(device, sizeof device, "%s", prop.name);
        fprintf(stderr, "ge2_bench: device %s, %d SMs\n", prop.name, prop.multiProcessorCount);
    }

    ge2_context *ctx = NULL;
    if (ge2_context_new(opt.cpu ? GE2_DEVICE_CPU : GE2_DEVICE_CUDA, &ctx) != GE2_OK) {
        fprintf(stderr, "ge2_bench: %s\n", ge2_last_error());
        return 1;
    }
    ge2_dataset *fmnist = NULL;
    ge2_status data_st = GE2_OK;
    char data_err[512] = "";

    int failures = 0;
    for (size_t wi = 0; wi < sizeof WORKLOADS / sizeof *WORKLOADS; wi++) {
        const bench_workload *w = &WORKLOADS[wi];
        if (opt.only && strcmp(opt.only, w->name))
            continue;
        if (w->epoch && !fmnist) {
            data_st = ge2_dataset_load_fashion_mnist(opt.data_dir, GE2_SPLIT_TRAIN, &fmnist);
            if (data_st != GE2_OK)
                snprintf(data_err, sizeof data_err, "%s", ge2_last_error());
        }
        for (size_t mi = 0; mi < sizeof MODES / sizeof *MODES; mi++) {
            const bench_mode *mode = &MODES[mi];
            if ((mode->precision == GE2_PRECISION_TF32 && !w->tf32_row) ||
                (mode->precision == GE2_PRECISION_BF16 && !w->bf16_row))
                continue;
            bench_result r;
            ge2_status st;
            if (w->epoch && !fmnist)
                st = ge2_error(data_st, "ge2_bench: epoch: %s", data_err);
            else
                st = run_row(ctx, w, mode, fmnist, &opt, &r);
            print_row(w, mode, device, &r, st);
            failures += st != GE2_OK;
        }
    }
    ge2_dataset_free(fmnist);
    ge2_context_free(ctx);
    return failures ? 1 : 0;
}
