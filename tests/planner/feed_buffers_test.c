/* Zero-copy feeding (ge2_program_feed_buffers): a program whose batches are
 * written straight into its staging trains bit for bit like one whose step
 * copies them, over several graph keys, both modes and mixed feeds; the path
 * allocates nothing per step; bad arguments and stale or foreign staging
 * pointers are refused with messages that say what went wrong. CPU backend:
 * the same staging code as CUDA, with uploads that copy at once. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "capture/program_inspect.h"
#include "graph/alloc.h"
#include "graph/error.h"
#include "tests/planner/random_graph.h"
#include "tests/planner/suite.h"

#define MAX_EXTRA 3 /* the second key's batch: built batch + MAX_EXTRA */

/* One random graph (with Adam) compiled twice from the same seed: `copy` is
 * fed from the caller's buffers, `zero` through its feed buffers. */
typedef struct twin {
    rg_graph rg;
    ge2_context *ctx;
    ge2_program *copy, *zero;
    float *x;    /* [batch + MAX_EXTRA, x_row] the caller's data */
    void *label; /* [batch + MAX_EXTRA, label_row] 4-byte elements */
    uint64_t rng;
    /* scratch for the tests: the caller's feeds, those given to `zero`, its buffers */
    ge2_feed feeds[2], zfeeds[2];
    void *ptrs[2];
} twin;

static ge2_program *compile_cpu(ge2_context *ctx, ge2_graph *g)
{
    ge2_program *prog;
    ck_assert_msg(ge2_compile(ctx, g, NULL, &prog) == GE2_OK, "%s", ge2_last_error());
    return prog;
}

static void twin_new(uint64_t seed, twin *t)
{
    memset(t, 0, sizeof *t);
    ck_assert_int_eq(rg_build(seed, true, &t->rg), GE2_OK);
    ge2_optimizer_config adam = ge2_optimizer_defaults(GE2_OPT_ADAM);
    adam.lr = 0.01;
    ck_assert_int_eq(ge2_optimizer(t->rg.graph, &adam), GE2_OK);
    ck_assert_int_eq(ge2_context_new(GE2_DEVICE_CPU, &t->ctx), GE2_OK);
    t->copy = compile_cpu(t->ctx, t->rg.graph);
    t->zero = compile_cpu(t->ctx, t->rg.graph);
    int64_t rows = t->rg.batch + MAX_EXTRA, label_row = rg_label_row(&t->rg);
    t->x = malloc(sizeof(float) * (size_t)(rows * rg_x_row(&t->rg)));
    t->label = malloc(4 * (size_t)(rows * (label_row ? label_row : 1)));
    t->rng = seed;
}

static void twin_free(twin *t)
{
    ge2_program_free(t->copy);
    ge2_program_free(t->zero);
    ge2_context_free(t->ctx);
    rg_free(&t->rg);
    free(t->x);
    free(t->label);
}

/* The first graph from `seed` on that has a label: two feeds. */
static void twin_new_labelled(uint64_t seed, twin *t)
{
    for (twin_new(seed, t); !t->rg.label; twin_new(++seed, t))
        twin_free(t);
}

static size_t feed_bytes(const ge2_feed *f)
{
    return (size_t)ge2_shape_numel(f->shape) * ge2_dtype_size(ge2_tensor_dtype(f->tensor));
}

/* Asks prog for feed buffers of these feeds (data ignored: passed as NULL),
 * writes each feed's data there unless bit i of copy_mask is set, and fills
 * out[] with the feeds to step with: the buffers, or the caller's data for
 * the feeds left to the step to copy. */
static void write_feed_buffers(ge2_program *prog, ge2_mode mode, const ge2_feed *feeds, int n, unsigned copy_mask,
                               ge2_feed *out, void **ptrs)
{
    for (int i = 0; i < n; i++)
        out[i] = (ge2_feed){feeds[i].tensor, NULL, feeds[i].shape};
    ck_assert_msg(ge2_program_feed_buffers(prog, mode, out, n, ptrs) == GE2_OK, "%s", ge2_last_error());
    for (int i = 0; i < n; i++) {
        ck_assert_ptr_nonnull(ptrs[i]);
        ck_assert_uint_eq((uintptr_t)ptrs[i] % GE2_ARENA_ALIGN, 0);
        if (copy_mask >> i & 1u) {
            out[i].data = feeds[i].data;
        } else {
            memcpy(ptrs[i], feeds[i].data, feed_bytes(&feeds[i]));
            out[i].data = ptrs[i];
        }
    }
}

static void expect_same_loss(twin *t, ge2_mode mode, const char *when)
{
    float a, b;
    ck_assert_int_eq(ge2_program_read_output(t->copy, mode, t->rg.loss, &a, sizeof a), GE2_OK);
    ck_assert_int_eq(ge2_program_read_output(t->zero, mode, t->rg.loss, &b, sizeof b), GE2_OK);
    ck_assert_msg(memcmp(&a, &b, sizeof a) == 0, "%s: loss %.9g copying, %.9g zero-copy", when, (double)a, (double)b);
}

/* A new batch of b in t->feeds, written into `zero`'s feed buffers
 * (t->ptrs) for a step of mode; t->zfeeds are the feeds to step it with.
 * Returns the number of feeds. */
static int twin_fill(twin *t, ge2_mode mode, int64_t b, unsigned copy_mask)
{
    int n = rg_feeds(&t->rg, b, &t->rng, t->x, t->label, t->feeds);
    write_feed_buffers(t->zero, mode, t->feeds, n, copy_mask, t->zfeeds, t->ptrs);
    return n;
}

/* One step of a new batch of b on both programs, the zero-copy one through
 * its feed buffers (copy_mask: feeds it copies instead); losses must be equal. */
static void twin_step(twin *t, ge2_mode mode, int64_t b, unsigned copy_mask)
{
    int n = twin_fill(t, mode, b, copy_mask);
    ck_assert_msg(ge2_program_step(t->copy, mode, t->feeds, n) == GE2_OK, "%s", ge2_last_error());
    ck_assert_msg(ge2_program_step(t->zero, mode, t->zfeeds, n) == GE2_OK, "%s", ge2_last_error());
    char when[64];
    snprintf(when, sizeof when, "%s batch %lld mask %u", mode == GE2_MODE_TRAIN ? "train" : "eval", (long long)b,
             copy_mask);
    expect_same_loss(t, mode, when);
}

/* Parameters and optimizer state of the two programs, bit for bit. */
static void expect_same_model(const twin *t)
{
    const size_t param_bytes = ge2_program_layout(t->copy)->param_bytes;
    const ge2_flat_pools copy = ge2_program_pools(t->copy), zero = ge2_program_pools(t->zero);
    ck_assert(memcmp(copy.params, zero.params, param_bytes) == 0);
    ck_assert(memcmp(copy.state, zero.state, (size_t)copy.slots * param_bytes) == 0);
}

START_TEST(test_zero_copy_matches_copying)
{
    for (uint64_t seed = 500; seed < 516; seed++) {
        twin t;
        twin_new(seed, &t);
        int n_feeds = t.rg.label ? 2 : 1;
        for (int s = 0; s < 10; s++) {
            int64_t b = s % 3 == 1 ? t.rg.batch + MAX_EXTRA : t.rg.batch; /* two keys per mode */
            unsigned mask = (unsigned)s % (1u << n_feeds);                 /* sometimes a feed is copied */
            if (s == 0)
                mask = 0; /* the first step of a key, in place */
            twin_step(&t, GE2_MODE_TRAIN, b, mask);
            if (s % 4 == 3)
                twin_step(&t, GE2_MODE_EVAL, b, 0);
        }
        expect_same_model(&t);
        ck_assert_int_eq(ge2_program_key_count(t.zero), ge2_program_key_count(t.copy));
        ck_assert_int_eq(ge2_program_key_count(t.zero), 4);
        twin_free(&t);
    }
}
END_TEST

START_TEST(test_no_host_allocation_zero_copy)
{
    twin t;
    twin_new_labelled(40, &t);
    int64_t big = t.rg.batch + MAX_EXTRA;
    /* A key's first feed_buffers or step may allocate (plan, buffers). */
    twin_step(&t, GE2_MODE_TRAIN, t.rg.batch, 0);
    twin_step(&t, GE2_MODE_TRAIN, big, 0);
    twin_step(&t, GE2_MODE_EVAL, t.rg.batch, 0);

    ge2_alloc_stats before, after;
    ge2_metrics m;
    ge2_alloc_stats_get(&before);
    for (int s = 0; s < 60; s++) {
        ge2_mode mode = s % 5 == 4 ? GE2_MODE_EVAL : GE2_MODE_TRAIN;
        int64_t b = mode == GE2_MODE_TRAIN && s % 3 == 0 ? big : t.rg.batch;
        int n = twin_fill(&t, mode, b, 0);
        ck_assert_int_eq(ge2_program_step(t.zero, mode, t.zfeeds, n), GE2_OK);
        ck_assert_int_eq(ge2_program_take_metrics(t.zero, mode, &m), GE2_OK);
    }
    ck_assert_int_eq(ge2_program_sync(t.zero), GE2_OK);
    ge2_alloc_stats_get(&after);
    ck_assert_uint_eq(after.allocations, before.allocations);
    ck_assert_int_eq(ge2_program_key_count(t.zero), 3);
    twin_free(&t);
}
END_TEST

/* feed_buffers plans a new key as a first step would; asking again before
 * the step gives the same buffers with their contents. */
START_TEST(test_feed_buffers_builds_key_and_repeats)
{
    twin t;
    twin_new_labelled(60, &t);
    ck_assert_int_eq(ge2_program_key_count(t.zero), 0);
    int n = twin_fill(&t, GE2_MODE_TRAIN, t.rg.batch, 0);
    ck_assert_int_eq(ge2_program_key_count(t.zero), 1);
    ck_assert_ptr_ne(t.ptrs[0], t.ptrs[1]);
    ck_assert_int_eq(ge2_program_launch_count(t.zero, GE2_MODE_TRAIN), 0); /* nothing ran */

    void *again[2];
    ck_assert_int_eq(ge2_program_feed_buffers(t.zero, GE2_MODE_TRAIN, t.zfeeds, n, again), GE2_OK);
    ck_assert_ptr_eq(again[0], t.ptrs[0]);
    ck_assert_ptr_eq(again[1], t.ptrs[1]);
    ck_assert_mem_eq(again[0], t.feeds[0].data, feed_bytes(&t.feeds[0]));
    /* Feeds given in the other order: ptrs follow the feeds, not the key. */
    ge2_feed swapped[2] = {t.zfeeds[1], t.zfeeds[0]};
    ck_assert_int_eq(ge2_program_feed_buffers(t.zero, GE2_MODE_TRAIN, swapped, n, again), GE2_OK);
    ck_assert_ptr_eq(again[0], t.ptrs[1]);
    ck_assert_ptr_eq(again[1], t.ptrs[0]);
    ck_assert_int_eq(ge2_program_step(t.zero, GE2_MODE_TRAIN, swapped, n), GE2_OK);
    ck_assert_int_eq(ge2_program_key_count(t.zero), 1);
    ck_assert_int_eq(ge2_program_step(t.copy, GE2_MODE_TRAIN, t.feeds, n), GE2_OK);
    expect_same_loss(&t, GE2_MODE_TRAIN, "after repeated feed_buffers");

    /* The next step's buffers are the key's other staging buffer. */
    ck_assert_int_eq(ge2_program_feed_buffers(t.zero, GE2_MODE_TRAIN, t.zfeeds, n, again), GE2_OK);
    ck_assert_ptr_ne(again[0], t.ptrs[0]);
    /* The eval key is its own, with its own buffers. */
    ck_assert_int_eq(ge2_program_feed_buffers(t.zero, GE2_MODE_EVAL, t.zfeeds, n, t.ptrs), GE2_OK);
    ck_assert_int_eq(ge2_program_key_count(t.zero), 2);
    ck_assert_ptr_ne(again[0], t.ptrs[0]);
    twin_free(&t);
}
END_TEST

START_TEST(test_feed_buffers_errors)
{
    twin t, other;
    twin_new_labelled(80, &t);
    twin_new_labelled(90, &other);
    const char *fn = "ge2_program_feed_buffers";
    int64_t b = t.rg.batch, d = rg_x_row(&t.rg);
    char built[64], wrong[64];
    ge2_shape_str(ge2_tensor_shape(t.rg.x), built, sizeof built);
    ge2_shape_str(ge2_shape2(b, d + 1), wrong, sizeof wrong);
    ge2_feed f[3] = {{t.rg.x, NULL, ge2_shape2(b, d)}, {t.rg.label, NULL, ge2_tensor_shape(t.rg.label)}};
    void *ptrs[3];

    expect_error(ge2_program_feed_buffers(t.zero, GE2_MODE_TRAIN, f, 2, NULL), GE2_ERR_INVALID_ARGUMENT, fn, "ptrs");
    expect_error(ge2_program_feed_buffers(NULL, GE2_MODE_TRAIN, f, 2, ptrs), GE2_ERR_INVALID_ARGUMENT, fn, "program");
    expect_error(ge2_program_feed_buffers(t.zero, GE2_MODE_TRAIN, NULL, 2, ptrs), GE2_ERR_INVALID_ARGUMENT, fn, NULL);
    expect_error(ge2_program_feed_buffers(t.zero, (ge2_mode)7, f, 2, ptrs), GE2_ERR_INVALID_ARGUMENT, fn,
                 "unknown mode 7");
    f[0].shape = ge2_shape2(b, d + 1);
    expect_error(ge2_program_feed_buffers(t.zero, GE2_MODE_TRAIN, f, 2, ptrs), GE2_ERR_SHAPE, wrong, built);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), fn));
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "'x'"));
    f[0].shape = ge2_shape1(b);
    expect_error(ge2_program_feed_buffers(t.zero, GE2_MODE_TRAIN, f, 2, ptrs), GE2_ERR_SHAPE, "'x'", "only dim 0");
    f[0].shape = ge2_shape2(0, d);
    expect_error(ge2_program_feed_buffers(t.zero, GE2_MODE_TRAIN, f, 2, ptrs), GE2_ERR_SHAPE, "'x'", "[0,");
    f[0].shape = ge2_shape2(b, d);
    expect_error(ge2_program_feed_buffers(t.zero, GE2_MODE_TRAIN, f, 1, ptrs), GE2_ERR_INVALID_ARGUMENT, "'label'",
                 "not fed");
    f[2] = f[0];
    expect_error(ge2_program_feed_buffers(t.zero, GE2_MODE_TRAIN, f, 3, ptrs), GE2_ERR_INVALID_ARGUMENT, "'x'",
                 "twice");
    ge2_tensor *p0 = ge2_graph_find(t.rg.graph, "p0");
    f[2] = (ge2_feed){p0, NULL, ge2_tensor_shape(p0)};
    expect_error(ge2_program_feed_buffers(t.zero, GE2_MODE_TRAIN, f, 3, ptrs), GE2_ERR_INVALID_ARGUMENT, "'p0'",
                 "parameter");
    f[2] = (ge2_feed){NULL, NULL, ge2_shape2(b, d)};
    expect_error(ge2_program_feed_buffers(t.zero, GE2_MODE_TRAIN, f, 3, ptrs), GE2_ERR_INVALID_ARGUMENT, fn,
                 "no tensor");
    f[2] = (ge2_feed){other.rg.x, NULL, ge2_tensor_shape(other.rg.x)};
    expect_error(ge2_program_feed_buffers(t.zero, GE2_MODE_TRAIN, f, 3, ptrs), GE2_ERR_GRAPH, fn, "another graph");
    ck_assert_int_eq(ge2_program_key_count(t.zero), 0); /* no error planned a key */
    /* The graph grew after compile: refused, as a step would be. */
    ge2_tensor *extra;
    ck_assert_int_eq(ge2_scale(t.rg.graph, t.rg.loss, 2.0, &extra), GE2_OK);
    expect_error(ge2_program_feed_buffers(t.zero, GE2_MODE_TRAIN, f, 2, ptrs), GE2_ERR_STATE, fn,
                 "changed after ge2_compile");
    twin_free(&t);
    twin_free(&other);
}
END_TEST

/* Staging pointers used wrongly are refused without touching the program;
 * used rightly after other keys' steps, or as plain data for another key,
 * they train exactly like copied feeds. */
START_TEST(test_staging_pointers_misused)
{
    twin t;
    twin_new_labelled(120, &t);
    int64_t b = t.rg.batch, big = b + MAX_EXTRA;
    twin_step(&t, GE2_MODE_TRAIN, b, 0);

    /* Inside this step's staging but not the feed's own buffer. */
    int n = twin_fill(&t, GE2_MODE_TRAIN, b, 0);
    ge2_feed bad[2] = {t.zfeeds[0], t.zfeeds[1]};
    bad[0].data = (const float *)t.ptrs[0] + 1;
    expect_error(ge2_program_step(t.zero, GE2_MODE_TRAIN, bad, n), GE2_ERR_INVALID_ARGUMENT, "'x'",
                 "not the buffer ge2_program_feed_buffers gave");
    bad[0] = t.zfeeds[0];
    bad[1].data = t.ptrs[0]; /* the label read from x's buffer */
    expect_error(ge2_program_step(t.zero, GE2_MODE_TRAIN, bad, n), GE2_ERR_INVALID_ARGUMENT, "'label'",
                 "not the buffer");
    /* Nothing moved: the right feeds still step and match. */
    ck_assert_int_eq(ge2_program_step(t.zero, GE2_MODE_TRAIN, t.zfeeds, n), GE2_OK);
    ck_assert_int_eq(ge2_program_step(t.copy, GE2_MODE_TRAIN, t.feeds, n), GE2_OK);
    expect_same_loss(&t, GE2_MODE_TRAIN, "after refused steps");

    /* Buffers of a step already taken: refused now, and after the ring of
     * staging buffers has come round to them again. */
    ge2_feed old[2] = {t.zfeeds[0], t.zfeeds[1]};
    expect_error(ge2_program_step(t.zero, GE2_MODE_TRAIN, old, n), GE2_ERR_STATE, "'x'",
                 "call ge2_program_feed_buffers before every step");
    for (int s = 0; s < GE2_STAGING_BUFFERS - 1; s++)
        twin_step(&t, GE2_MODE_TRAIN, b, 0);
    twin_step(&t, GE2_MODE_TRAIN, b, 3); /* the same staging again, handed out, then copied into */
    ck_assert_ptr_eq(t.ptrs[0], old[0].data);
    for (int s = 0; s < GE2_STAGING_BUFFERS - 1; s++)
        twin_step(&t, GE2_MODE_TRAIN, b, 3);
    const ge2_key_view pk = ge2_program_key_view(t.zero, 0);
    ck_assert_ptr_eq((const unsigned char *)pk.staging[pk.next_staging] + pk.plan->tensors[t.rg.x->id].offset,
                     old[0].data); /* the next step's, but not handed out for it */
    expect_error(ge2_program_step(t.zero, GE2_MODE_TRAIN, old, n), GE2_ERR_STATE, "'x'", "not handed out");

    /* Filled for this key, then other keys step (other batch, eval): the
     * buffers are still this key's next step's. The copying twin keeps its
     * own copy of the batch, as the caller's buffers are refilled. */
    n = twin_fill(&t, GE2_MODE_TRAIN, b, 0);
    ge2_feed held[2], kept[2];
    for (int i = 0; i < n; i++) {
        void *copy = malloc(feed_bytes(&t.feeds[i]));
        memcpy(copy, t.feeds[i].data, feed_bytes(&t.feeds[i]));
        kept[i] = (ge2_feed){t.feeds[i].tensor, copy, t.feeds[i].shape};
        held[i] = t.zfeeds[i];
    }
    twin_step(&t, GE2_MODE_TRAIN, big, 0);
    twin_step(&t, GE2_MODE_EVAL, b, 0);
    ck_assert_int_eq(ge2_program_step(t.zero, GE2_MODE_TRAIN, held, n), GE2_OK);
    ck_assert_int_eq(ge2_program_step(t.copy, GE2_MODE_TRAIN, kept, n), GE2_OK);
    expect_same_loss(&t, GE2_MODE_TRAIN, "after other keys' steps");
    for (int i = 0; i < n; i++)
        free((void *)kept[i].data);

    /* One key's buffers as the data of another key's step: plain data, copied. */
    n = twin_fill(&t, GE2_MODE_TRAIN, big, 0);
    ge2_feed small[2], small_ref[2];
    for (int i = 0; i < n; i++) {
        ge2_shape shape = t.feeds[i].shape;
        shape.dim[0] = b; /* the first b rows */
        small[i] = (ge2_feed){t.feeds[i].tensor, t.ptrs[i], shape};
        small_ref[i] = (ge2_feed){t.feeds[i].tensor, t.feeds[i].data, shape};
    }
    ck_assert_int_eq(ge2_program_step(t.zero, GE2_MODE_EVAL, small, n), GE2_OK);
    ck_assert_int_eq(ge2_program_step(t.copy, GE2_MODE_EVAL, small_ref, n), GE2_OK);
    expect_same_loss(&t, GE2_MODE_EVAL, "another key's buffers as data");
    ck_assert_int_eq(ge2_program_step(t.zero, GE2_MODE_TRAIN, t.zfeeds, n), GE2_OK); /* still big's, unused */
    ck_assert_int_eq(ge2_program_step(t.copy, GE2_MODE_TRAIN, t.feeds, n), GE2_OK);
    expect_same_loss(&t, GE2_MODE_TRAIN, "big after its buffers were read");
    expect_same_model(&t);
    twin_free(&t);
}
END_TEST

/* The CPU backend with fences that keep count, standing in for CUDA's
 * events, so the staging ring's waits can be checked without a GPU. */
typedef struct count_fence {
    bool pending; /* recorded, not waited for since */
    int waits;
} count_fence;

static const ge2_program *fenced; /* the program whose steps are checked */
static int steps_checked;

static ge2_status cf_new(ge2_backend_ctx *ctx, void **fence)
{
    (void)ctx;
    *fence = calloc(1, sizeof(count_fence));
    return *fence ? GE2_OK : ge2_error(GE2_ERR_OUT_OF_MEMORY, "count fence");
}

static void cf_free(ge2_backend_ctx *ctx, void *fence)
{
    (void)ctx;
    free(fence);
}

static ge2_status cf_record(ge2_backend_ctx *ctx, void *fence)
{
    (void)ctx;
    ((count_fence *)fence)->pending = true;
    return GE2_OK;
}

static ge2_status cf_wait(ge2_backend_ctx *ctx, void *fence)
{
    (void)ctx;
    ((count_fence *)fence)->pending = false;
    ((count_fence *)fence)->waits++;
    return GE2_OK;
}

/* The CPU ran the step before exec_run returned: done, never pending. */
static ge2_status cf_done(ge2_backend_ctx *ctx, void *fence, bool *done)
{
    (void)ctx;
    ((count_fence *)fence)->pending = false;
    *done = true;
    return GE2_OK;
}

/* A step uploads its staging slot (so the slot was just written) only after
 * the step before it through that slot was waited for. */
static ge2_status cf_exec_run(ge2_backend_ctx *ctx, ge2_exec *exec, int slot)
{
    for (int k = 0; fenced && k < ge2_program_key_count(fenced); k++)
        if (exec == ge2_program_key_view(fenced, k).exec) {
            ck_assert_ptr_eq(exec->io[slot].upload.src, ge2_program_key_view(fenced, k).staging[slot]);
            ck_assert_msg(!((count_fence *)ge2_program_key_view(fenced, k).fence[slot])->pending,
                          "key %d staging %d rewritten while its step may be in flight", k, slot);
            steps_checked++;
        }
    return ge2_backend_cpu.exec_run(ctx, exec, slot);
}

/* The waits on key 0's staging fences so far; 0 before the key is made. */
static int staging_waits(const ge2_program *program)
{
    const ge2_key_view pk = ge2_program_key_view(program, 0);
    int n = 0;
    for (int i = 0; pk.fence && i < GE2_STAGING_BUFFERS; i++)
        n += ((const count_fence *)pk.fence[i])->waits;
    return n;
}

/* Every staging buffer is waited for once per reuse: by feed_buffers when it
 * hands the buffer out (the step after it then does not wait again), else
 * by the copying step. */
START_TEST(test_staging_waits_once_per_reuse)
{
    twin t;
    twin_new_labelled(140, &t);
    ge2_backend backend = ge2_backend_cpu;
    backend.fence_new = cf_new;
    backend.fence_free = cf_free;
    backend.fence_record = cf_record;
    backend.fence_wait = cf_wait;
    backend.fence_done = cf_done;
    backend.exec_run = cf_exec_run;
    ge2_program_swap_backend(t.zero, &backend); /* before any key: each key's staging gets fences */
    fenced = t.zero;
    for (int s = 0; s < 12; s++) {
        bool in_place = s % 4 != 3;
        int waits = staging_waits(t.zero);
        if (in_place) {
            int n = twin_fill(&t, GE2_MODE_TRAIN, t.rg.batch, 0);
            const ge2_key_view pk = ge2_program_key_view(t.zero, 0);
            ck_assert(!((count_fence *)pk.fence[pk.next_staging])->pending);
            int after_feed_buffers = staging_waits(t.zero);
            ck_assert_int_eq(ge2_program_step(t.zero, GE2_MODE_TRAIN, t.zfeeds, n), GE2_OK);
            ck_assert_int_eq(staging_waits(t.zero), after_feed_buffers); /* the step did not wait again */
            ck_assert_int_eq(ge2_program_step(t.copy, GE2_MODE_TRAIN, t.feeds, n), GE2_OK);
        } else {
            int n = rg_feeds(&t.rg, t.rg.batch, &t.rng, t.x, t.label, t.feeds);
            ck_assert_int_eq(ge2_program_step(t.zero, GE2_MODE_TRAIN, t.feeds, n), GE2_OK);
            ck_assert_int_eq(ge2_program_step(t.copy, GE2_MODE_TRAIN, t.feeds, n), GE2_OK);
        }
        /* A buffer is waited for only from its second use on, once. */
        ck_assert_int_eq(staging_waits(t.zero) - waits, s >= GE2_STAGING_BUFFERS ? 1 : 0);
        expect_same_loss(&t, GE2_MODE_TRAIN, in_place ? "fenced, in place" : "fenced, copied");
    }
    ck_assert_int_eq(steps_checked, 12);
    twin_free(&t);
    fenced = NULL;
}
END_TEST

int main(void)
{
    const TTest *tests[] = {
        test_zero_copy_matches_copying,
        test_no_host_allocation_zero_copy,
        test_feed_buffers_builds_key_and_repeats,
        test_feed_buffers_errors,
        test_staging_pointers_misused,
        test_staging_waits_once_per_reuse,
    };
    return planner_run_tests("feed_buffers", tests, (int)(sizeof tests / sizeof tests[0]), 240);
}
