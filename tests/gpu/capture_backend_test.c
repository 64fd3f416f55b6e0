/* The CUDA backend (capture/backends/backend_cuda.c) on its own, without the program:
 * a hand-built key of two LINEAR launches (x -> relu(x·W1ᵀ + b1) -> ·W2ᵀ + b2).
 *
 *   - memory: alloc is zero-filled, upload/download round-trip, a fence
 *     never recorded or whose work is done reads done;
 *   - each step goes through a staging slot, in turn: its io uploads x from
 *     the slot's pinned buffer before the launches and copies y into the
 *     slot's pinned result buffer after them;
 *   - the first run computes the step (eager warm-up) and captures one graph
 *     per slot; a replay reads its slot's staging, so new inputs give new
 *     results, matching a float64 reference computed here;
 *   - both slots' replays in flight at once each use their own buffers;
 *   - replay == eager (capture disabled) bitwise;
 *   - a launch that breaks capture: the key falls back to eager with one
 *     warning naming the node and op, and keeps computing correctly;
 *   - GE2_DISABLE_CAPTURE is not the backend's to read (ge2_compile folds it
 *     into the options): with it set and the option off, the key captures.
 */
#include <check.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture/backend.h"
#include "capture/options.h"
#include "graph/error.h"
#include "ops/linear/linear.h"
#include "tests/gpu/capture_suite.h"

#define B 8
#define IN 20
#define H 16
#define OUT 6
#define STAGING (H * IN)

#define API(call) ck_assert_msg((call) == GE2_OK, "%s: %s", #call, ge2_last_error())

/* The key: device buffers, nodes, launches, staging slots. */
typedef struct key {
    const ge2_backend *be;
    ge2_backend_ctx *ctx;
    float *x, *w1, *b1, *h, *w2, *b2, *y; /* device */
    float *staging;                       /* pinned [STAGING], the largest parameter upload */
    float *slot_x[GE2_STAGING_BUFFERS];   /* pinned [B, IN]: each slot's feed, uploaded to x */
    float *slot_y[GE2_STAGING_BUFFERS];   /* pinned [B, OUT]: each slot's result, copied from y */
    float *slot_dx[GE2_STAGING_BUFFERS];  /* device [B, IN] or NULL: each slot's device staging */
    int next_slot;
    ge2_node nodes[2];
    ge2_launch launches[2];
    ge2_launch slot_launches[GE2_STAGING_BUFFERS][2]; /* with device staging: each slot's, x at slot_dx */
    ge2_exec exec;
    ge2_copy result[GE2_STAGING_BUFFERS]; /* each slot's one result copy: y back to slot_y */
    float hw1[H * IN], hb1[H], hw2[OUT * H], hb2[OUT];
} key;

static uint64_t rng = 42;

static float uniform(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static ge2_view view(void *data, ge2_shape s)
{
    ge2_view v = {data, GE2_F32, s};
    return v;
}

/* The op the key's two launches run: LINEAR, or a registered copy of it. */
static ge2_op linear_op = GE2_OP_LINEAR;
/* The options the backend opens with (the environment's overrides in);
 * the launches see its kernel settings, as a program's would. */
static ge2_program_options options;

static void linear_launch(key *k, int i, float *x, int64_t in, float *w, float *b, float *y, int64_t out,
                          ge2_activation act)
{
    ge2_node *n = &k->nodes[i];
    memset(n, 0, sizeof *n);
    n->id = 10 + i;
    n->op = linear_op;
    n->n_inputs = 3;
    n->n_outputs = 1;
    GE2_ATTRS(ge2_linear_attrs, n->attrs)->act = act;
    ge2_launch *l = &k->launches[i];
    memset(l, 0, sizeof *l);
    l->node = n;
    l->settings = &options.settings;
    l->n_in = 3;
    l->n_out = 1;
    l->in[0] = view(x, ge2_shape2(B, in));
    l->in[1] = view(w, ge2_shape2(out, in));
    l->in[2] = view(b, ge2_shape1(out));
    l->out[0] = view(y, ge2_shape2(B, out));
}

static void *dev(key *k, size_t n)
{
    void *p = NULL;
    API(k->be->alloc(k->ctx, n * sizeof(float), &p));
    return p;
}

static void upload_floats(key *k, float *dst, const float *src, size_t n)
{
    ck_assert_uint_le(n, STAGING);
    memcpy(k->staging, src, n * sizeof(float));
    API(k->be->upload(k->ctx, dst, k->staging, n * sizeof(float)));
    API(k->be->sync(k->ctx)); /* staging is reused right away */
}

/* device_staging: each slot's feed goes host -> the slot's device staging
 * (io.stage, on the feed stream, ahead of the step), where the slot's own
 * launches read it (exec.slot_launches), as a program on a feeds_ahead
 * backend sets it up; else host -> x (io.upload). */
static void key_open_with(key *k, bool disable_capture, bool device_staging)
{
    memset(k, 0, sizeof *k);
    rng = 42;
    k->be = &ge2_backend_cuda;
    API(ge2_options_resolve(NULL, &options));
    options.o.disable_capture = disable_capture;
    API(k->be->open(&options, &k->ctx));
    API(k->be->alloc_host(k->ctx, STAGING * sizeof(float), (void **)&k->staging));
    k->x = dev(k, B * IN), k->w1 = dev(k, H * IN), k->b1 = dev(k, H), k->h = dev(k, B * H);
    k->w2 = dev(k, OUT * H), k->b2 = dev(k, OUT), k->y = dev(k, B * OUT);
    for (int i = 0; i < H * IN; i++)
        k->hw1[i] = uniform();
    for (int i = 0; i < H; i++)
        k->hb1[i] = uniform();
    for (int i = 0; i < OUT * H; i++)
        k->hw2[i] = uniform();
    for (int i = 0; i < OUT; i++)
        k->hb2[i] = uniform();
    upload_floats(k, k->w1, k->hw1, H * IN);
    upload_floats(k, k->b1, k->hb1, H);
    upload_floats(k, k->w2, k->hw2, OUT * H);
    upload_floats(k, k->b2, k->hb2, OUT);
    linear_launch(k, 0, k->x, IN, k->w1, k->b1, k->h, H, GE2_ACT_RELU);
    linear_launch(k, 1, k->h, H, k->w2, k->b2, k->y, OUT, GE2_ACT_NONE);
    k->exec.n_launches = 2;
    k->exec.launches = k->launches;
    for (int s = 0; s < GE2_STAGING_BUFFERS; s++) {
        API(k->be->alloc_host(k->ctx, B * IN * sizeof(float), (void **)&k->slot_x[s]));
        API(k->be->alloc_host(k->ctx, B * OUT * sizeof(float), (void **)&k->slot_y[s]));
        const void *feed = k->slot_x[s];
        if (device_staging) {
            k->slot_dx[s] = dev(k, B * IN);
            k->exec.io[s].stage = (ge2_copy){k->slot_dx[s], k->slot_x[s], B * IN * sizeof(float)};
            feed = k->slot_dx[s];
            /* the slot's own launches read the feed at its device staging */
            memcpy(k->slot_launches[s], k->launches, sizeof k->launches);
            k->slot_launches[s][0].in[0].data = k->slot_dx[s];
            k->exec.slot_launches[s] = k->slot_launches[s];
        }
        k->exec.io[s].upload = (ge2_copy){k->x, feed, B * IN * sizeof(float)};
        k->result[s] = (ge2_copy){k->slot_y[s], k->y, B * OUT * sizeof(float)};
        k->exec.io[s].results = &k->result[s];
        k->exec.io[s].n_results = 1;
    }
    API(k->be->exec_prepare(k->ctx, &k->exec));
}

static void key_open(key *k, bool disable_capture) { key_open_with(k, disable_capture, false); }

static void key_close(key *k)
{
    k->be->exec_release(k->ctx, &k->exec);
    float *bufs[] = {k->x, k->w1, k->b1, k->h, k->w2, k->b2, k->y};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        k->be->free(k->ctx, bufs[i]);
    k->be->free_host(k->ctx, k->staging);
    for (int s = 0; s < GE2_STAGING_BUFFERS; s++) {
        k->be->free_host(k->ctx, k->slot_x[s]);
        k->be->free_host(k->ctx, k->slot_y[s]);
        k->be->free(k->ctx, k->slot_dx[s]);
    }
    k->be->close(k->ctx);
}

static void make_input(float *x, uint64_t seed)
{
    rng = seed;
    for (int i = 0; i < B * IN; i++)
        x[i] = uniform();
}

/* One step on input x through the key's next slot; y from the slot's
 * result buffer, where the step itself put it. */
static void step(key *k, const float *x, float *y)
{
    int s = k->next_slot;
    k->next_slot = (s + 1) % GE2_STAGING_BUFFERS;
    memcpy(k->slot_x[s], x, B * IN * sizeof(float));
    memset(k->slot_y[s], 0xff, B * OUT * sizeof(float)); /* NaN: a step that copies nothing fails the check */
    API(k->be->exec_run(k->ctx, &k->exec, s));
    API(k->be->sync(k->ctx));
    memcpy(y, k->slot_y[s], B * OUT * sizeof(float));
}

static void check_reference(const key *k, const float *x, const float *y);

/* Steps on inputs seeded first..last-1, each checked against the reference. */
static void checked_steps(key *k, uint64_t first, uint64_t last)
{
    float x[B * IN], y[B * OUT];
    for (uint64_t s = first; s < last; s++) {
        make_input(x, s);
        step(k, x, y);
        check_reference(k, x, y);
    }
}

static void check_reference(const key *k, const float *x, const float *y)
{
    for (int r = 0; r < B; r++) {
        double h[H];
        for (int j = 0; j < H; j++) {
            double acc = k->hb1[j];
            for (int i = 0; i < IN; i++)
                acc += (double)x[r * IN + i] * k->hw1[j * IN + i];
            h[j] = acc > 0 ? acc : 0;
        }
        for (int o = 0; o < OUT; o++) {
            double acc = k->hb2[o];
            for (int j = 0; j < H; j++)
                acc += h[j] * k->hw2[o * H + j];
            ck_assert_msg(fabs(y[r * OUT + o] - acc) <= 1e-5 * (1 + fabs(acc)), "y[%d,%d] = %.9g, want %.9g", r, o,
                          y[r * OUT + o], acc);
        }
    }
}

START_TEST(test_memory_round_trip)
{
    key k;
    key_open(&k, false);
    float z[B * H];
    memset(z, 0x7f, sizeof z);
    API(k.be->download(k.ctx, z, k.h, sizeof z));
    for (int i = 0; i < B * H; i++)
        ck_assert_msg(z[i] == 0.0f, "alloc is not zero-filled at %d: %g", i, z[i]);
    float back[H];
    API(k.be->download(k.ctx, back, k.b1, sizeof back));
    ck_assert(memcmp(back, k.hb1, sizeof back) == 0);
    /* Fences: done when never recorded, and once the work before them is. */
    void *fence = NULL;
    bool done = false;
    API(k.be->fence_new(k.ctx, &fence));
    API(k.be->fence_done(k.ctx, fence, &done));
    ck_assert(done);
    API(k.be->fence_record(k.ctx, fence));
    API(k.be->sync(k.ctx));
    done = false;
    API(k.be->fence_done(k.ctx, fence, &done));
    ck_assert(done);
    API(k.be->fence_wait(k.ctx, fence));
    k.be->fence_free(k.ctx, fence);
    key_close(&k);
}
END_TEST

static void capture_then_replay_new_inputs(bool device_staging)
{
    key k;
    key_open_with(&k, false, device_staging);
    checked_steps(&k, 1, 2); /* eager warm-up + capture */
    ck_assert_int_eq(k.be->capture_count(k.ctx), 1);
    ck_assert(k.exec.captured);
    checked_steps(&k, 2, 6); /* replays, each on a new input */
    ck_assert_int_eq(k.be->capture_count(k.ctx), 1);
    key_close(&k);
}

START_TEST(test_capture_then_replay_new_inputs) { capture_then_replay_new_inputs(false); }
END_TEST

START_TEST(test_capture_then_replay_device_staging) { capture_then_replay_new_inputs(true); }
END_TEST

/* Both slots' graphs enqueued back to back, without a sync between: each
 * step reads its own slot's feed and writes its own slot's result. Run with
 * host and with device staging: there the second slot's stage copy runs
 * beside the first slot's step, and each step must wait for its own. */
static void slots_in_flight_together(bool device_staging)
{
    key k;
    key_open_with(&k, false, device_staging);
    checked_steps(&k, 1, 2); /* eager warm-up + capture; slot 1 is next */
    float x[GE2_STAGING_BUFFERS][B * IN], y[B * OUT];
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < GE2_STAGING_BUFFERS; i++) {
            int s = (1 + i) % GE2_STAGING_BUFFERS;
            make_input(x[s], 100 + 10 * (uint64_t)round + (uint64_t)s);
            memcpy(k.slot_x[s], x[s], sizeof x[s]);
            memset(k.slot_y[s], 0xff, B * OUT * sizeof(float));
            API(k.be->exec_run(k.ctx, &k.exec, s));
        }
        API(k.be->sync(k.ctx));
        for (int s = 0; s < GE2_STAGING_BUFFERS; s++) {
            memcpy(y, k.slot_y[s], sizeof y);
            check_reference(&k, x[s], y);
        }
    }
    ck_assert_int_eq(k.be->capture_count(k.ctx), 1);
    key_close(&k);
}

START_TEST(test_slots_in_flight_together) { slots_in_flight_together(false); }
END_TEST

START_TEST(test_slots_in_flight_device_staging) { slots_in_flight_together(true); }
END_TEST

START_TEST(test_replay_equals_eager_bitwise)
{
    key cap, eager;
    key_open(&cap, false);
    key_open(&eager, true);
    float x[B * IN], y1[B * OUT], y2[B * OUT];
    for (uint64_t s = 1; s < 5; s++) {
        make_input(x, s);
        step(&cap, x, y1);
        step(&eager, x, y2);
        ck_assert_msg(memcmp(y1, y2, sizeof y1) == 0, "step %d: replay and eager differ", (int)s);
    }
    ck_assert_int_eq(cap.be->capture_count(cap.ctx), 1);
    ck_assert_int_eq(eager.be->capture_count(eager.ctx), 0);
    key_close(&cap);
    key_close(&eager);
}
END_TEST

/* LINEAR that synchronizes its stream: fine eagerly, illegal during capture. */
static ge2_status linear_then_sync(const ge2_launch *l)
{
    GE2_TRY(ge2_op_def_linear.cuda.launch(l));
    cudaError_t e = cudaStreamSynchronize((cudaStream_t)l->stream);
    if (e != cudaSuccess)
        return ge2_error(GE2_ERR_CUDA, "cudaStreamSynchronize: %s", cudaGetErrorString(e));
    return GE2_OK;
}

START_TEST(test_broken_capture_falls_back_to_eager)
{
    /* a user op through the extension API: LINEAR with that launch */
    static ge2_op_def def;
    def = ge2_op_def_linear;
    def.name = "linear_then_sync";
    def.cuda.launch = linear_then_sync;
    API(ge2_op_register(&def, &linear_op));
    key k;
    key_open(&k, false);
    float x[B * IN], y[B * OUT];
    make_input(x, 7);
    step(&k, x, y); /* runs, capture fails, falls back */
    check_reference(&k, x, y);
    ck_assert_int_eq(k.be->capture_count(k.ctx), 0);
    ck_assert(!k.exec.captured);
    const char *why = ge2_last_error();
    ck_assert_msg(strstr(why, "node 10 (linear_then_sync)") != NULL, "capture failure message: %s", why);
    make_input(x, 8);
    step(&k, x, y); /* eager from now on, still right */
    check_reference(&k, x, y);
    ck_assert_int_eq(k.be->capture_count(k.ctx), 0);
    key_close(&k);
    linear_op = GE2_OP_LINEAR;
}
END_TEST

/* GE2_DISABLE_CAPTURE is ge2_compile's to read (one rule, folded into the
 * options; tests/planner covers it): the backend follows the option alone. */
START_TEST(test_backend_ignores_capture_env)
{
    setenv("GE2_DISABLE_CAPTURE", "1", 1); /* this forked child only */
    key k;
    key_open(&k, false);
    checked_steps(&k, 1, 4);
    ck_assert_int_eq(k.be->capture_count(k.ctx), 1);
    key_close(&k);
}
END_TEST

START_TEST(test_print_kernels_names_each_node)
{
    setenv("GE2_PRINT_KERNELS", "1", 1); /* this forked child only */
    /* one GEMM family, so the names below do not depend on which candidate
     * the autotuner's timing (or an earlier test's cached choice) favoured */
    setenv("GE2_GEMM_KERNEL", "cublaslt", 1);
    char path[] = "/tmp/ge2_print_kernels_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_ptr_nonnull(freopen(path, "w", stderr));
    key k;
    key_open(&k, false);
    key_close(&k);
    fflush(stderr);
    char text[1024] = "";
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    close(fd);
    unlink(path);
    ck_assert_msg(strstr(text, "ge2: node 10 linear: cublasLt RELU_BIAS") != NULL, "printed: %s", text);
    ck_assert_msg(strstr(text, "ge2: node 11 linear: cublasLt BIAS") != NULL, "printed: %s", text);
}
END_TEST

GE2_GPU_SUITE_MAIN("capture_backend_test", 120, test_memory_round_trip, test_capture_then_replay_new_inputs,
                   test_capture_then_replay_device_staging, test_slots_in_flight_together,
                   test_slots_in_flight_device_staging, test_replay_equals_eager_bitwise, test_broken_capture_falls_back_to_eager,
                   test_backend_ignores_capture_env, test_print_kernels_names_each_node)
