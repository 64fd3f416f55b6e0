/* Data parallel on the CPU backend, one process per rank under mpirun
 * (tests/dist/run_mpi.sh starts it with 1 and 2 ranks).
 *
 * The reference is one process without a process group training the same
 * MLP on each step's whole global batch (world x B examples): after K steps
 * every rank's parameters must equal it within float32 error (the rank
 * shards' mean gradient is the global batch's mean gradient, summed in
 * another order), for SGD with momentum, Adam, AdamW with per-parameter
 * updates, clipping (the norm of the averaged gradient), gradient
 * accumulation and small buckets (several all-reduces a step); and a
 * batch-norm net against one process that normalizes each rank's rows
 * apart (the norm's input gradient reads the rank's own parameter
 * gradients before their all-reduce). With one
 * rank the all-reduce does nothing and the results must be bitwise the
 * reference's. Then: the ranks' parameters are bitwise the same; rank 0's
 * state reaches ranks that started from other seeds
 * (ge2_dist_broadcast_state); a group of several ranks refuses a graph
 * whose optimizer does not average.
 *
 * With --device cuda the same checks run on the GPU, the all-reduce going
 * through NCCL inside the captured step (one rank too: a group of one still
 * calls NCCL), and two more: replayed steps equal eager ones bitwise, and
 * 10,000 replays allocate nothing, host or device, and do not hang. The
 * whole-step MLP kernel is left out on both sides (disable_fusions
 * "mlp_step"): it declines graphs with all-reduces, and the reference must
 * run the same kernels to compare bits.
 *
 *   data_parallel_test [--device cpu|cuda]  the checks; rank 0 prints "N passed, M failed"
 *   ... --fail-rank R    rank R feeds a wrong shape at step 2, prints its error and
 *                        aborts the job (the others wait in the all-reduce meanwhile)
 *   ... --hang-rank R    rank R stops stepping; the others' all-reduce times out
 *                        after 2 s (CPU) and they abort the job
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "capture/program_state.h" /* the control block's gradient norm */
#include "ge2/dist.h"
#include "ge2/ge2.h"
#include "graph/alloc.h"              /* ge2_alloc_stats: the soak's host allocations */

enum { IN = 12, HIDDEN = 16, CLASSES = 5, BATCH = 8, STEPS = 6 };

static ge2_dist *dist;
static int rank, world, passed, failed;
/* The GPU build of this file (data_parallel_gpu_test, staged for the GPU
 * machine, whose runner passes no flags) starts on CUDA. */
#ifdef GE2_DP_TEST_ON_CUDA
static ge2_device device = GE2_DEVICE_CUDA;
#else
static ge2_device device = GE2_DEVICE_CPU;
#endif

#define API(call)                                                                                          \
    do {                                                                                                   \
        if ((call) != GE2_OK) {                                                                            \
            fprintf(stderr, "data_parallel_test: rank %d: %s: %s\n", rank, #call, ge2_last_error());       \
            ge2_dist_abort(dist, 1);                                                                       \
        }                                                                                                  \
    } while (0)

static void verdict(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void verdict(bool ok, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("rank %d: %s: ", rank, ok ? "ok" : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    ok ? passed++ : failed++;
}

/* ------------------------------------------------------------ the model */

/* A trained net: the MLP (mlp_build) or the batch-norm net (bn_net_build) */
enum { MAX_PARAMS = 6 };
typedef struct net {
    ge2_graph *graph;
    ge2_tensor *x, *y, *loss, *params[MAX_PARAMS];
    int n_params;
    ge2_context *ctx;
    ge2_program *program;
    int64_t batch;
} net;

static const char *const param_names[4] = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};

/* The graph's loss (mean cross-entropy of logits), backward and
 * optimizer, compiled; `group` NULL: one process. */
static void finish(net *m, ge2_tensor *logits, const ge2_optimizer_config *oc, const ge2_collective *group,
                   bool capture)
{
    API(ge2_cross_entropy(m->graph, logits, m->y, 0, &m->loss));
    API(ge2_backward(m->graph, m->loss));
    API(ge2_optimizer(m->graph, oc));
    API(ge2_context_new(device, &m->ctx));
    ge2_compile_options co = ge2_compile_defaults();
    co.collective = group;
    co.disable_fusions = "mlp_step"; /* see the top of the file */
    co.disable_capture = !capture;
    API(ge2_compile(m->ctx, m->graph, &co, &m->program));
}

/* IN -> HIDDEN relu -> CLASSES, mean cross-entropy, at `batch` examples a
 * step; `group` NULL: one process. */
static void mlp_build_with(net *m, int64_t batch, const ge2_optimizer_config *oc, const ge2_collective *group,
                           uint64_t seed, bool capture)
{
    memset(m, 0, sizeof *m);
    m->batch = batch;
    API(ge2_graph_new(&m->graph));
    API(ge2_graph_set_seed(m->graph, seed));
    API(ge2_input(m->graph, "x", GE2_F32, ge2_shape2(batch, IN), &m->x));
    API(ge2_label(m->graph, "y", GE2_I32, ge2_shape1(batch), &m->y));
    const int64_t dims[3] = {IN, HIDDEN, CLASSES};
    ge2_tensor *h = m->x;
    for (int l = 0; l < 2; l++) {
        ge2_init wi = {GE2_INIT_LINEAR_DEFAULT, 0, 0, 0}, bi = {GE2_INIT_LINEAR_DEFAULT, 0, 0, dims[l]};
        API(ge2_parameter(m->graph, param_names[2 * l], GE2_F32, ge2_shape2(dims[l + 1], dims[l]), wi,
                          &m->params[2 * l]));
        API(ge2_parameter(m->graph, param_names[2 * l + 1], GE2_F32, ge2_shape1(dims[l + 1]), bi,
                          &m->params[2 * l + 1]));
        API(ge2_linear(m->graph, h, m->params[2 * l], m->params[2 * l + 1], l == 0 ? GE2_ACT_RELU : GE2_ACT_NONE, 0,
                       &h));
    }
    m->n_params = 4;
    finish(m, h, oc, group, capture);
}

/* IN -> HIDDEN, batch norm, relu -> CLASSES. Batch norm normalizes by the
 * statistics of the rows it sees: in the group, a rank's shard; in the
 * reference (shards > 1, one process at shards·B), each rank's rows apart,
 * slices sharing weight and bias with running statistics of their own, so
 * the reference's mean loss is the ranks' mean and its gradient their
 * average. */
static void bn_net_build(net *m, int shards, const ge2_optimizer_config *oc, const ge2_collective *group)
{
    memset(m, 0, sizeof *m);
    m->batch = (int64_t)shards * BATCH;
    API(ge2_graph_new(&m->graph));
    API(ge2_graph_set_seed(m->graph, 11));
    API(ge2_input(m->graph, "x", GE2_F32, ge2_shape2(m->batch, IN), &m->x));
    API(ge2_label(m->graph, "y", GE2_I32, ge2_shape1(m->batch), &m->y));
    const ge2_init weight = {GE2_INIT_LINEAR_DEFAULT, 0, 0, 0}, gain = {GE2_INIT_UNIFORM, 0.5, 1.5, 0},
                   shift = {GE2_INIT_UNIFORM, -0.2, 0.2, 0}, zeros = {GE2_INIT_ZEROS, 0, 0, 0},
                   ones = {GE2_INIT_CONSTANT, 1, 0, 0};
    ge2_tensor **p = m->params;
    API(ge2_parameter(m->graph, "fc1.weight", GE2_F32, ge2_shape2(HIDDEN, IN), weight, &p[0]));
    API(ge2_parameter(m->graph, "fc1.bias", GE2_F32, ge2_shape1(HIDDEN), (ge2_init){GE2_INIT_LINEAR_DEFAULT, 0, 0, IN},
                      &p[1]));
    API(ge2_parameter(m->graph, "bn.weight", GE2_F32, ge2_shape1(HIDDEN), gain, &p[2]));
    API(ge2_parameter(m->graph, "bn.bias", GE2_F32, ge2_shape1(HIDDEN), shift, &p[3]));
    API(ge2_parameter(m->graph, "fc2.weight", GE2_F32, ge2_shape2(CLASSES, HIDDEN), weight, &p[4]));
    API(ge2_parameter(m->graph, "fc2.bias", GE2_F32, ge2_shape1(CLASSES),
                      (ge2_init){GE2_INIT_LINEAR_DEFAULT, 0, 0, HIDDEN}, &p[5]));
    m->n_params = 6;
    ge2_tensor *h, *normed[4];
    API(ge2_linear(m->graph, m->x, p[0], p[1], GE2_ACT_NONE, 0, &h));
    for (int k = 0; k < shards; k++) {
        char name[40];
        ge2_tensor *rows = h, *mean, *var;
        if (shards > 1)
            API(ge2_slice(m->graph, h, 0, (int64_t)k * BATCH, (int64_t)(k + 1) * BATCH, &rows));
        snprintf(name, sizeof name, "bn.%d.running_mean", k);
        API(ge2_buffer(m->graph, name, GE2_F32, ge2_shape1(HIDDEN), zeros, &mean));
        snprintf(name, sizeof name, "bn.%d.running_var", k);
        API(ge2_buffer(m->graph, name, GE2_F32, ge2_shape1(HIDDEN), ones, &var));
        API(ge2_batch_norm(m->graph, rows, p[2], p[3], mean, var, NULL, 0.1, 1e-5, &normed[k]));
    }
    if (shards > 1)
        API(ge2_concat(m->graph, normed, shards, 0, &h));
    else
        h = normed[0];
    API(ge2_activate(m->graph, h, GE2_ACT_RELU, 0, &h));
    API(ge2_linear(m->graph, h, p[4], p[5], GE2_ACT_NONE, 0, &h));
    finish(m, h, oc, group, true);
}

static void mlp_build(net *m, int64_t batch, const ge2_optimizer_config *oc, const ge2_collective *group,
                      uint64_t seed)
{
    mlp_build_with(m, batch, oc, group, seed, true);
}

static void net_free(net *m)
{
    ge2_program_free(m->program);
    ge2_context_free(m->ctx);
    ge2_graph_free(m->graph);
}

/* Example e of the data: the same on every rank. */
static void example(int64_t e, float *x, int32_t *y)
{
    for (int i = 0; i < IN; i++)
        x[i] = (float)sin(0.37 * (double)(e * IN + i) + 0.11 * (double)e);
    *y = (int32_t)((e * 7 + e / 3) % CLASSES);
}

/* Step s of m: the global batch is examples [s·world·B, (s+1)·world·B);
 * a rank of the group takes its slice [rank·B, (rank+1)·B) of it, the
 * reference (first = 0, m->batch = world·B) all of it. */
static ge2_status step(net *m, int s, int64_t first)
{
    float x[BATCH * 4 * IN];
    int32_t y[BATCH * 4];
    for (int64_t r = 0; r < m->batch; r++)
        example((int64_t)s * world * BATCH + first + r, &x[r * IN], &y[r]);
    ge2_feed feeds[2] = {{m->x, x, ge2_shape2(m->batch, IN)}, {m->y, y, ge2_shape1(m->batch)}};
    return ge2_program_step(m->program, GE2_MODE_TRAIN, feeds, 2);
}

/* The MLP's parameter values; the batch-norm net adds the norm's two */
#define N_ALL (HIDDEN * IN + HIDDEN + CLASSES * HIDDEN + CLASSES)
#define N_MAX (N_ALL + 2 * HIDDEN)

/* Every parameter's values, in order, into out [N_MAX]; returns how many. */
static int read_params(net *m, float *out)
{
    int64_t total = 0;
    for (int p = 0; p < m->n_params; p++) {
        int64_t n = ge2_shape_numel(ge2_tensor_shape(m->params[p]));
        API(ge2_program_get_parameter(m->program, m->params[p], out + total, (size_t)n * sizeof(float)));
        total += n;
    }
    return (int)total;
}

/* Whether every |a - b| <= atol + rtol |b| over n values (NaN fails); the
 * largest |a - b| into *max_diff. */
static bool near(const float *a, const float *b, int n, double atol, double rtol, double *max_diff)
{
    bool ok = true;
    *max_diff = 0;
    for (int i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        ok = ok && d <= atol + rtol * fabs((double)b[i]);
        if (!(d <= *max_diff))
            *max_diff = d;
    }
    return ok;
}

/* ------------------------------------------------------------ the checks */

/* The group's train step fuses the nodes one process's does: the
 * all-reduces must not split a fused group (the head's backward GEMMs), or
 * the rank runs other kernels, and one rank's bits differ from one
 * process's. The fuse pass is the same on both backends, so the CPU checks
 * what CUDA runs. */
static void fuses_as_one_process(const char *name, net *dp, net *ref)
{
    ge2_plan_stats a, b;
    API(ge2_program_plan_stats(dp->program, GE2_MODE_TRAIN, &a));
    API(ge2_program_plan_stats(ref->program, GE2_MODE_TRAIN, &b));
    verdict(a.fused_groups == b.fused_groups && a.fused_nodes == b.fused_nodes && b.fused_groups > 0,
            "%s: the step fuses %d groups of %d nodes, as one process's (%d of %d)", name, a.fused_groups,
            a.fused_nodes, b.fused_groups, b.fused_nodes);
}

/* The group at B per rank against one process at world·B, K steps. */
static void against_one_process(const char *name, ge2_optimizer_config oc)
{
    ge2_optimizer_config ref_oc = oc;
    oc.data_parallel = true;
    net dp, ref;
    mlp_build(&dp, BATCH, &oc, ge2_dist_collective(dist), 7);
    mlp_build(&ref, (int64_t)world * BATCH, &ref_oc, NULL, 7);
    for (int s = 0; s < STEPS; s++) {
        API(step(&dp, s, (int64_t)rank * BATCH));
        API(step(&ref, s, 0));
    }
    fuses_as_one_process(name, &dp, &ref);
    float a[N_ALL], b[N_ALL];
    read_params(&dp, a);
    read_params(&ref, b);
    if (world == 1) {
        verdict(memcmp(a, b, sizeof a) == 0, "%s: 1 rank equals one process bitwise after %d steps", name, STEPS);
    } else {
        double d;
        bool ok = near(a, b, N_ALL, 1e-6, 1e-5, &d);
        verdict(ok, "%s: %d ranks at batch %d equal one process at batch %d after %d steps (max |difference| %.3g)",
                name, world, BATCH, world * BATCH, STEPS, d);
    }
    if (oc.clip_norm > 0) { /* the norm the clip factor came from is the averaged gradient's */
        ge2_control *cd = ge2_program_control_host(dp.program), *cr = ge2_program_control_host(ref.program);
        API(ge2_program_download_control(dp.program));
        API(ge2_program_download_control(ref.program));
        verdict(isfinite(cr->grad_norm) && cr->grad_norm > oc.clip_norm &&
                    fabsf(cd->grad_norm - cr->grad_norm) <= 1e-5f * cr->grad_norm,
                "%s: the last step's gradient norm %.6g equals one process's %.6g, above the clip norm %g (so "
                "the clip acts)",
                name, cd->grad_norm, cr->grad_norm, oc.clip_norm);
    }
    /* every rank holds rank 0's bits */
    float mine[N_ALL];
    memcpy(mine, a, sizeof a);
    API(ge2_dist_broadcast_state(dist, dp.program));
    read_params(&dp, a);
    verdict(memcmp(a, mine, sizeof a) == 0, "%s: parameters bitwise identical across the %d ranks", name, world);
    net_free(&dp);
    net_free(&ref);
}

/* Batch norm in the group: each rank normalizes its own shard, and the
 * norm's input gradient reads the rank's own sums of the parameter
 * gradients, so their all-reduce must wait for it (were it summed first,
 * every layer below the norm would get a wrong gradient). Against one
 * process normalizing each rank's rows apart (bn_net_build). */
static void batch_norm_shards(void)
{
    ge2_optimizer_config oc = ge2_optimizer_defaults(GE2_OPT_SGD);
    oc.lr = 0.1;
    oc.momentum = 0.9;
    oc.bucket_bytes = 64; /* the norm's gradients in buckets of their own, complete before its input gradient */
    ge2_optimizer_config ref_oc = oc;
    oc.data_parallel = true;
    net dp, ref;
    bn_net_build(&dp, 1, &oc, ge2_dist_collective(dist));
    bn_net_build(&ref, world, &ref_oc, NULL);
    for (int s = 0; s < STEPS; s++) {
        API(step(&dp, s, (int64_t)rank * BATCH));
        API(step(&ref, s, 0));
    }
    fuses_as_one_process("batch norm", &dp, &ref);
    float a[N_MAX], b[N_MAX];
    const int n = read_params(&dp, a);
    read_params(&ref, b);
    if (world == 1) {
        verdict(memcmp(a, b, sizeof(float) * (size_t)n) == 0,
                "batch norm: 1 rank equals one process bitwise after %d steps", STEPS);
    } else {
        double d;
        bool ok = near(a, b, n, 1e-6, 1e-5, &d);
        verdict(ok,
                "batch norm: %d ranks at batch %d equal one process normalizing each rank's %d rows apart after %d "
                "steps (max |difference| %.3g)",
                world, BATCH, BATCH, STEPS, d);
    }
    net_free(&dp);
    net_free(&ref);
}

/* Ranks built from different seeds agree after the broadcast, and then
 * train as one process started from rank 0's seed. */
static void broadcast_state(void)
{
    ge2_optimizer_config oc = ge2_optimizer_defaults(GE2_OPT_ADAM);
    oc.eps = 1e-3; /* Adam's step on a gradient of ~0 is +-lr whatever its size: keep rounding from flipping it */
    ge2_optimizer_config ref_oc = oc;
    oc.data_parallel = true;
    net dp, ref;
    mlp_build(&dp, BATCH, &oc, ge2_dist_collective(dist), 100 + (uint64_t)rank);
    mlp_build(&ref, (int64_t)world * BATCH, &ref_oc, NULL, 100);
    API(ge2_dist_broadcast_state(dist, dp.program));
    float a[N_ALL], b[N_ALL];
    read_params(&dp, a);
    read_params(&ref, b);
    verdict(memcmp(a, b, sizeof a) == 0, "broadcast: rank %d holds rank 0's initial parameters", rank);
    for (int s = 0; s < STEPS; s++) {
        API(step(&dp, s, (int64_t)rank * BATCH));
        API(step(&ref, s, 0));
    }
    read_params(&dp, a);
    read_params(&ref, b);
    double d;
    bool ok = near(a, b, N_ALL, 1e-6, 1e-5, &d);
    verdict(ok, "broadcast: then trains as one process from rank 0's seed (max |difference| %.3g)", d);
    net_free(&dp);
    net_free(&ref);
}

/* Several ranks and an optimizer that does not average: refused, saying so. */
static void refuses_unaveraged(void)
{
    if (world == 1)
        return;
    ge2_graph *g;
    ge2_tensor *x, *y, *w, *out, *loss;
    API(ge2_graph_new(&g));
    API(ge2_input(g, "x", GE2_F32, ge2_shape2(BATCH, IN), &x));
    API(ge2_label(g, "y", GE2_I32, ge2_shape1(BATCH), &y));
    API(ge2_parameter(g, "w", GE2_F32, ge2_shape2(CLASSES, IN), (ge2_init){GE2_INIT_LINEAR_DEFAULT, 0, 0, 0}, &w));
    API(ge2_linear(g, x, w, NULL, GE2_ACT_NONE, 0, &out));
    API(ge2_cross_entropy(g, out, y, 0, &loss));
    API(ge2_backward(g, loss));
    ge2_optimizer_config oc = ge2_optimizer_defaults(GE2_OPT_SGD);
    API(ge2_optimizer(g, &oc));
    ge2_context *ctx;
    API(ge2_context_new(GE2_DEVICE_CPU, &ctx));
    ge2_compile_options co = ge2_compile_defaults();
    co.collective = ge2_dist_collective(dist);
    ge2_program *p = NULL;
    ge2_status st = ge2_compile(ctx, g, &co, &p);
    verdict(st == GE2_ERR_INVALID_ARGUMENT && strstr(ge2_last_error(), "data_parallel"),
            "a group of %d ranks refuses an optimizer without data_parallel: \"%s\"", world,
            st == GE2_OK ? "(compiled)" : ge2_last_error());
    ge2_program_free(p);
    ge2_context_free(ctx);
    ge2_graph_free(g);
}

/* CUDA: the captured step's replays against eager steps, bitwise. */
static void replay_equals_eager(void)
{
    ge2_optimizer_config oc = ge2_optimizer_defaults(GE2_OPT_ADAM);
    oc.data_parallel = true;
    net replayed, eager;
    mlp_build_with(&replayed, BATCH, &oc, ge2_dist_collective(dist), 7, true);
    mlp_build_with(&eager, BATCH, &oc, ge2_dist_collective(dist), 7, false);
    for (int s = 0; s < STEPS; s++) {
        API(step(&replayed, s, (int64_t)rank * BATCH));
        API(step(&eager, s, (int64_t)rank * BATCH));
    }
    float a[N_ALL], b[N_ALL];
    read_params(&replayed, a);
    read_params(&eager, b);
    verdict(memcmp(a, b, sizeof a) == 0 && ge2_program_capture_count(replayed.program) == 1,
            "replayed steps (%d capture) equal eager steps bitwise after %d steps",
            ge2_program_capture_count(replayed.program), STEPS);
    net_free(&replayed);
    net_free(&eager);
}

/* CUDA: 10,000 replays of the step with its all-reduce: nothing allocated
 * on the host or the device, no new capture, finite parameters. */
static void soak(void)
{
    enum { REPLAYS = 10000 };
    ge2_optimizer_config oc = ge2_optimizer_defaults(GE2_OPT_SGD);
    oc.lr = 0.01;
    oc.data_parallel = true;
    net m;
    mlp_build(&m, BATCH, &oc, ge2_dist_collective(dist), 7);
    API(step(&m, 0, (int64_t)rank * BATCH)); /* warm-up and capture */
    API(step(&m, 1, (int64_t)rank * BATCH));
    API(ge2_program_sync(m.program));
    size_t free_before = 0, free_after = 0, total;
    ge2_alloc_stats before, after;
    cudaMemGetInfo(&free_before, &total);
    ge2_alloc_stats_get(&before);
    for (int s = 0; s < REPLAYS; s++)
        API(step(&m, s % STEPS, (int64_t)rank * BATCH));
    API(ge2_program_sync(m.program));
    ge2_alloc_stats_get(&after);
    cudaMemGetInfo(&free_after, &total);
    float p[N_ALL];
    read_params(&m, p);
    bool finite = true;
    for (int i = 0; i < N_ALL; i++)
        finite = finite && isfinite(p[i]);
    verdict(after.allocations == before.allocations && free_after == free_before &&
                ge2_program_capture_count(m.program) == 1 && finite,
            "%d replays: %llu host allocations, %lld device bytes taken, %d capture(s), parameters %s", REPLAYS,
            (unsigned long long)(after.allocations - before.allocations), (long long)free_before - (long long)free_after,
            ge2_program_capture_count(m.program), finite ? "finite" : "not finite");
    net_free(&m);
}

/* --fail-rank / --hang-rank: a rank that fails or stops mid-training. */
static int misbehave(int bad_rank, bool hang)
{
    ge2_optimizer_config oc = ge2_optimizer_defaults(GE2_OPT_SGD);
    oc.data_parallel = true;
    net m;
    mlp_build(&m, BATCH, &oc, ge2_dist_collective(dist), 7);
    for (int s = 0; s < STEPS; s++) {
        ge2_status st;
        if (rank == bad_rank && s == 2 && hang) {
            sleep(30); /* the others time out long before */
            st = GE2_OK;
        } else if (rank == bad_rank && s == 2) {
            float x[BATCH * (IN + 1)] = {0};
            int32_t y[BATCH] = {0};
            ge2_feed feeds[2] = {{m.x, x, ge2_shape2(BATCH, IN + 1)}, {m.y, y, ge2_shape1(BATCH)}};
            st = ge2_program_step(m.program, GE2_MODE_TRAIN, feeds, 2);
        } else {
            st = step(&m, s, (int64_t)rank * BATCH);
        }
        if (st != GE2_OK) {
            fprintf(stderr, "data_parallel_test: rank %d: step %d: %s\n", rank, s, ge2_last_error());
            ge2_dist_abort(dist, 3);
        }
    }
    net_free(&m);
    fprintf(stderr, "data_parallel_test: rank %d finished although rank %d misbehaved\n", rank, bad_rank);
    return 0;
}

int main(int argc, char **argv)
{
    ge2_dist_options o = ge2_dist_defaults();
    int bad_rank = -1;
    bool hang = false;
    for (int i = 1; i < argc; i += 2) {
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (value && !strcmp(argv[i], "--device") && (!strcmp(value, "cpu") || !strcmp(value, "cuda"))) {
            device = strcmp(value, "cuda") ? GE2_DEVICE_CPU : GE2_DEVICE_CUDA;
        } else if (value && (!strcmp(argv[i], "--fail-rank") || !strcmp(argv[i], "--hang-rank"))) {
            bad_rank = atoi(value);
            hang = !strcmp(argv[i], "--hang-rank");
            o.timeout_s = 2;
        } else {
            fprintf(stderr, "usage: data_parallel_test [--device cpu|cuda] [--fail-rank R | --hang-rank R]\n");
            return 2;
        }
    }
    if (device == GE2_DEVICE_CUDA && !ge2_cuda_available()) {
        printf("data_parallel_test: no CUDA device; skipping the CUDA checks\n");
        return 0;
    }
    if (ge2_dist_init(&argc, &argv, &o, &dist) != GE2_OK) {
        fprintf(stderr, "data_parallel_test: %s\n", ge2_last_error());
        return 1;
    }
    rank = ge2_dist_rank(dist);
    world = ge2_dist_world(dist);
    if (world > 4) {
        fprintf(stderr, "data_parallel_test: at most 4 ranks (got %d)\n", world);
        ge2_dist_abort(dist, 2);
    }
    if (bad_rank >= 0)
        return misbehave(bad_rank, hang);

    ge2_optimizer_config sgd = ge2_optimizer_defaults(GE2_OPT_SGD);
    sgd.lr = 0.1;
    sgd.momentum = 0.9;
    against_one_process("sgd momentum, flat update", sgd);

    /* Adam's step hardly depends on the gradient's scale (m / sqrt(v)); a
     * large eps makes it, so a sum the update failed to average shows */
    ge2_optimizer_config adam = ge2_optimizer_defaults(GE2_OPT_ADAM);
    adam.lr = 0.01;
    adam.eps = 1e-3;
    adam.bucket_bytes = 256; /* a bucket per layer or less: several all-reduces */
    against_one_process("adam, 256-byte buckets", adam);

    ge2_optimizer_config adamw = ge2_optimizer_defaults(GE2_OPT_ADAMW);
    adamw.lr = 0.01;
    adamw.eps = 1e-3;
    adamw.update_mode = GE2_UPDATE_PER_PARAMETER;
    against_one_process("adamw, per-parameter updates", adamw);

    ge2_optimizer_config clip = sgd;
    clip.clip_norm = 0.05; /* below the gradients' norm: the clip factor acts */
    against_one_process("sgd, clipped to norm 0.05", clip);

    ge2_optimizer_config accum = adam;
    accum.accumulation_steps = 2;
    against_one_process("adam, 2 accumulation steps", accum);

    batch_norm_shards();
    broadcast_state();
    refuses_unaveraged();
    if (device == GE2_DEVICE_CUDA) {
        replay_equals_eager();
        soak();
    }

    double counts[2] = {passed, failed};
    API(ge2_dist_sum(dist, counts, 2));
    if (rank == 0)
        printf("%d rank(s), %s: %.0f passed, %.0f failed\n", world, ge2_device_name(device), counts[0], counts[1]);
    ge2_dist_free(dist);
    return counts[1] == 0 ? 0 : 1;
}
