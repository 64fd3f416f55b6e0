/* The planned program on the CPU against the naive executor (every tensor its
 * own buffer): bitwise the same loss and gradients on random graphs, for
 * several graph keys sharing one arena and one parameter pool; plus the
 * step path's promises (no host allocation after a key's first step,
 * metrics, learning rate, feed validation). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture/program_inspect.h"
#include "graph/alloc.h"
#include "graph/error.h"
#include "tests/planner/random_graph.h"
#include "tests/planner/suite.h"
#include "check/naive.h"

#define CORPUS 120

typedef struct feeds {
    float *x;
    void *label;
    ge2_feed feed[2];
    int n;
} feeds;

static void make_feeds(const rg_graph *g, int64_t b, uint64_t *rng, feeds *f)
{
    f->x = malloc(sizeof(float) * (size_t)(b * rg_x_row(g)));
    f->label = malloc(4 * (size_t)(b * (rg_label_row(g) ? rg_label_row(g) : 1)));
    f->n = rg_feeds(g, b, rng, f->x, f->label, f->feed);
}

static void free_feeds(feeds *f)
{
    free(f->x);
    free(f->label);
}

static ge2_program *compile_cpu(ge2_graph *g, bool separate, ge2_context **ctx)
{
    ge2_compile_options o = ge2_compile_defaults();
    o.separate_arenas = separate;
    ge2_program *prog;
    ck_assert_int_eq(ge2_context_new(GE2_DEVICE_CPU, ctx), GE2_OK);
    ck_assert_msg(ge2_compile(*ctx, g, &o, &prog) == GE2_OK, "%s", ge2_last_error());
    return prog;
}

static size_t tensor_bytes(const ge2_tensor *t, ge2_shape shape)
{
    return (size_t)ge2_shape_numel(shape) * ge2_dtype_size(ge2_tensor_dtype(t));
}

/* One train step (no optimizer: parameters stay) and one eval step of this
 * batch; loss, every parameter gradient and x's gradient must equal the
 * naive run's bit for bit. */
static void check_step_matches_naive(ge2_program *prog, const rg_graph *rg, int64_t b, uint64_t *rng)
{
    const ge2_graph *g = rg->graph;
    feeds f;
    make_feeds(rg, b, rng, &f);
    ge2_naive *ref;
    ck_assert_msg(ge2_naive_run(g, f.feed, f.n, &ref) == GE2_OK, "%s", ge2_last_error());
    ck_assert_msg(ge2_program_step(prog, GE2_MODE_TRAIN, f.feed, f.n) == GE2_OK, "%s", ge2_last_error());

    unsigned char loss[8], want[8];
    size_t lb = tensor_bytes(rg->loss, ge2_shape0());
    ck_assert_int_eq(ge2_program_read_output(prog, GE2_MODE_TRAIN, rg->loss, loss, lb), GE2_OK);
    memcpy(want, ge2_naive_data(ref, rg->loss), lb);
    ck_assert_msg(memcmp(loss, want, lb) == 0, "loss differs at batch %lld", (long long)b);

    ge2_flat_pools pools = ge2_program_pools(prog);
    const ge2_layout *layout = ge2_program_layout(prog);
    for (int i = 0; i < g->n_tensors; i++) {
        const ge2_tensor *p = g->tensors[i];
        if (p->role != GE2_ROLE_PARAMETER)
            continue;
        const ge2_tensor *grad = ge2_grad(p);
        ck_assert_ptr_nonnull(grad);
        const float *got = pools.grads + layout->offset[i] / sizeof(float);
        ck_assert_msg(memcmp(got, ge2_naive_data(ref, grad), tensor_bytes(p, p->shape)) == 0,
                      "gradient of %s differs at batch %lld", p->name, (long long)b);
    }
    const ge2_tensor *dx = ge2_grad(rg->x);
    if (dx) {
        size_t bytes = tensor_bytes(dx, ref->shape[dx->id]);
        void *got = malloc(bytes);
        ck_assert_int_eq(ge2_program_read_output(prog, GE2_MODE_TRAIN, dx, got, bytes), GE2_OK);
        ck_assert_msg(memcmp(got, ge2_naive_data(ref, dx), bytes) == 0, "dx differs at batch %lld", (long long)b);
        free(got);
    }

    ck_assert_int_eq(ge2_program_step(prog, GE2_MODE_EVAL, f.feed, f.n), GE2_OK);
    ck_assert_int_eq(ge2_program_read_output(prog, GE2_MODE_EVAL, rg->loss, loss, lb), GE2_OK);
    ck_assert_msg(memcmp(loss, want, lb) == 0, "eval loss differs at batch %lld", (long long)b);
    ge2_naive_free(ref);
    free_feeds(&f);
}

/* Every key's launches read parameters from (and write gradients into) the
 * one parameter pool at the layout's offsets: keys share the model. Unless
 * asked otherwise, their arenas are one backing sized to the largest key. */
static void check_keys_share_pools(const ge2_program *prog)
{
    const ge2_graph *g = ge2_program_graph(prog);
    const ge2_flat_pools pools = ge2_program_pools(prog);
    const ge2_layout *layout = ge2_program_layout(prog);
    const char *params = (const char *)pools.params, *grads = (const char *)pools.grads;
    const bool separate = ge2_program_options_of(prog)->o.separate_arenas;
    size_t largest = 0, arena_bytes;
    const void *arena = ge2_program_arena(prog, &arena_bytes);
    for (int k = 0; k < ge2_program_key_count(prog); k++) {
        const ge2_exec *e = ge2_program_key_view(prog, k).exec;
        largest = e->plan->arena_bytes > largest ? e->plan->arena_bytes : largest;
        if (!separate)
            ck_assert_ptr_eq(e->arena, arena); /* one backing for all keys */
        else
            ck_assert_ptr_ne(e->arena, arena);
        for (int l = 0; l < e->n_launches; l++) {
            const ge2_launch *launch = &e->launches[l];
            for (int i = 0; i < launch->n_in; i++) {
                const ge2_tensor *t = g->tensors[launch->node->inputs[i]];
                if (t->role == GE2_ROLE_PARAMETER && launch->in[i].data)
                    ck_assert_ptr_eq(launch->in[i].data, params + layout->offset[t->id]);
            }
            for (int o = 0; o < launch->n_out; o++) {
                const ge2_tensor *t = g->tensors[launch->node->outputs[o]];
                if (t->grad_of >= 0 && g->tensors[t->grad_of]->role == GE2_ROLE_PARAMETER &&
                    g->tensors[t->grad_of]->grad == t->id)
                    ck_assert_ptr_eq(launch->out[o].data, grads + layout->offset[t->grad_of]);
            }
        }
    }
    if (!separate)
        ck_assert_uint_eq(arena_bytes, largest ? largest : 1); /* sized to the largest key */
}

START_TEST(test_random_graphs_match_naive)
{
    for (int i = 0; i < CORPUS; i++) {
        uint64_t seed = 1000 + (uint64_t)i, rng = seed;
        rg_graph rg;
        ck_assert_int_eq(rg_build(seed, true, &rg), GE2_OK);
        ge2_context *ctx;
        ge2_program *prog = compile_cpu(rg.graph, i % 4 == 3, &ctx);
        /* Built batch, a larger one (the shared arena grows and the first key
         * is re-resolved), a smaller one, then the first again. */
        int64_t batches[4] = {rg.batch, rg.batch + 5, rg.batch > 2 ? rg.batch - 1 : 1, rg.batch};
        for (int k = 0; k < 4; k++)
            check_step_matches_naive(prog, &rg, batches[k], &rng);
        ck_assert_int_eq(ge2_program_key_count(prog), 6); /* three batch sizes x {train, eval} */
        check_keys_share_pools(prog);
        ge2_program_free(prog);
        ge2_context_free(ctx);
        rg_free(&rg);
    }
}
END_TEST

/* The CPU backend behind a wrapper that asks for launch scratch as CUDA's
 * bf16 GEMMs and attention do (here every launch with inputs, their bytes
 * and a little more). The program must plan it into the arena and resolve
 * each launch's ge2_launch.scratch at the planned offset; the wrapper's
 * step writes NaN over a launch's scratch before and after the launch
 * runs, so scratch that shares a byte with a tensor live there spoils the
 * loss or a gradient, which must still equal the naive run's bit for bit. */
static int scratch_launches; /* launches that asked for scratch, over a test */

static size_t asking_scratch_bytes(const ge2_backend_ctx *ctx, const ge2_launch *l)
{
    (void)ctx;
    size_t bytes = 0;
    for (int i = 0; i < l->n_in; i++)
        if (l->in[i].data)
            bytes += (size_t)ge2_shape_numel(l->in[i].shape) * ge2_dtype_size(l->in[i].dtype);
    return bytes ? bytes + 100 : 0;
}

static ge2_status asking_exec_prepare(ge2_backend_ctx *ctx, ge2_exec *exec)
{
    const ge2_plan *plan = exec->plan;
    for (int p = 0; p < exec->n_launches; p++) {
        const ge2_launch *l = &exec->launches[p];
        const size_t asked = asking_scratch_bytes(ctx, l);
        ck_assert_uint_eq(l->scratch_bytes, asked);
        if (!asked) {
            ck_assert_ptr_null(l->scratch);
            continue;
        }
        /* inside the key's arena; where in it, the NaN the step writes there tells */
        ck_assert_ptr_nonnull(l->scratch);
        ck_assert((char *)l->scratch >= (char *)exec->arena &&
                  (char *)l->scratch + asked <= (char *)exec->arena + plan->arena_bytes);
        scratch_launches++;
    }
    return ge2_backend_cpu.exec_prepare(ctx, exec);
}

static void spoil_scratch(const ge2_launch *l)
{
    if (l->scratch)
        memset(l->scratch, 0xff, l->scratch_bytes); /* NaN in every f32 */
}

static ge2_status spoiling_exec_run(ge2_backend_ctx *ctx, ge2_exec *exec, int slot)
{
    (void)ctx;
    const ge2_step_io *io = &exec->io[slot];
    ck_assert_uint_eq(io->stage.bytes, 0); /* the CPU stages nothing ahead */
    memcpy(io->upload.dst, io->upload.src, io->upload.bytes);
    for (int i = 0; i < exec->n_launches; i++) {
        spoil_scratch(&exec->launches[i]);
        GE2_TRY(ge2_op_run_cpu(&exec->launches[i]));
        spoil_scratch(&exec->launches[i]);
    }
    for (int r = 0; r < io->n_results; r++)
        memcpy(io->results[r].dst, io->results[r].src, io->results[r].bytes);
    return GE2_OK;
}

/* The corpus of test_random_graphs_match_naive on the asking backend: the
 * shared arena's growth (its keys resolved again) and separate arenas too. */
START_TEST(test_launch_scratch_in_the_arena)
{
    scratch_launches = 0;
    for (int i = 0; i < CORPUS / 4; i++) {
        uint64_t seed = 1000 + (uint64_t)i, rng = seed;
        rg_graph rg;
        ck_assert_int_eq(rg_build(seed, true, &rg), GE2_OK);
        ge2_context *ctx;
        ge2_program *prog = compile_cpu(rg.graph, i % 4 == 3, &ctx);
        ge2_backend asking = ge2_backend_cpu;
        asking.launch_scratch_bytes = asking_scratch_bytes;
        asking.exec_prepare = asking_exec_prepare;
        asking.exec_run = spoiling_exec_run;
        ge2_program_swap_backend(prog, &asking);
        int64_t batches[4] = {rg.batch, rg.batch + 5, rg.batch > 2 ? rg.batch - 1 : 1, rg.batch};
        for (int k = 0; k < 4; k++)
            check_step_matches_naive(prog, &rg, batches[k], &rng);
        check_keys_share_pools(prog);
        ge2_program_swap_backend(prog, &ge2_backend_cpu);
        ge2_program_free(prog);
        ge2_context_free(ctx);
        rg_free(&rg);
    }
    ck_assert_int_gt(scratch_launches, CORPUS / 4);
}
END_TEST

/* A small classifier with SGD for the step-path tests. */
typedef struct net {
    ge2_graph *graph;
    ge2_tensor *x, *y, *w, *loss, *correct;
} net;

static void build_net(net *n, ge2_optimizer_kind kind)
{
    ge2_tensor *h, *w2, *logits;
    ck_assert_int_eq(ge2_graph_new(&n->graph), GE2_OK);
    ck_assert_int_eq(ge2_input(n->graph, "x", GE2_F32, ge2_shape2(16, 12), &n->x), GE2_OK);
    ck_assert_int_eq(ge2_label(n->graph, "y", GE2_I32, ge2_shape1(16), &n->y), GE2_OK);
    ge2_init init = {GE2_INIT_LINEAR_DEFAULT, 0, 0, 0};
    ck_assert_int_eq(ge2_parameter(n->graph, "w", GE2_F32, ge2_shape2(20, 12), init, &n->w), GE2_OK);
    ck_assert_int_eq(ge2_parameter(n->graph, "w2", GE2_F32, ge2_shape2(5, 20), init, &w2), GE2_OK);
    ck_assert_int_eq(ge2_linear(n->graph, n->x, n->w, NULL, GE2_ACT_TANH, 0, &h), GE2_OK);
    ck_assert_int_eq(ge2_linear(n->graph, h, w2, NULL, GE2_ACT_NONE, 0, &logits), GE2_OK);
    ck_assert_int_eq(ge2_cross_entropy(n->graph, logits, n->y, 0, &n->loss), GE2_OK);
    ck_assert_int_eq(ge2_accuracy(n->graph, logits, n->y, &n->correct), GE2_OK);
    ck_assert_int_eq(ge2_mark_output(n->graph, n->correct), GE2_OK);
    ck_assert_int_eq(ge2_backward(n->graph, n->loss), GE2_OK);
    ge2_optimizer_config cfg = ge2_optimizer_defaults(kind);
    ck_assert_int_eq(ge2_optimizer(n->graph, &cfg), GE2_OK);
}

static void net_feeds(const net *n, int64_t b, uint64_t *rng, float *x, int32_t *y, ge2_feed *f)
{
    for (int64_t i = 0; i < b * 12; i++)
        x[i] = rg_uniform(rng);
    for (int64_t i = 0; i < b; i++)
        y[i] = (int32_t)rg_below(rng, 5);
    f[0] = (ge2_feed){n->x, x, ge2_shape2(b, 12)};
    f[1] = (ge2_feed){n->y, y, ge2_shape1(b)};
}

/* Reads a whole small file into buf; false when it cannot be read. */
static bool read_text(const char *path, char *buf, size_t size)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, size - 1, f);
    buf[n] = '\0';
    fclose(f);
    return true;
}

/* The dump options: every pass's result as text, the graph and each key as
 * DOT, the fused head pair a cluster; a pattern switched off says so. */
START_TEST(test_dump_passes)
{
    net n;
    build_net(&n, GE2_OPT_ADAM);
    const char *tmp = getenv("TEST_TMPDIR");
    char prefix[512], path[600];
    snprintf(prefix, sizeof prefix, "%s/ge2_dump", tmp && tmp[0] ? tmp : "/tmp");
    for (int off = 0; off < 2; off++) {
        FILE *dump = tmpfile();
        ck_assert_ptr_nonnull(dump);
        ge2_compile_options o = ge2_compile_defaults();
        o.dump = dump;
        o.dump_dot = prefix;
        o.disable_fusions = off ? "head" : NULL;
        ge2_context *ctx;
        ge2_program *prog;
        ck_assert_int_eq(ge2_context_new(GE2_DEVICE_CPU, &ctx), GE2_OK);
        ck_assert_msg(ge2_compile(ctx, n.graph, &o, &prog) == GE2_OK, "%s", ge2_last_error());
        uint64_t rng = 5;
        float x[16 * 12];
        int32_t y[16];
        ge2_feed f[2];
        net_feeds(&n, 16, &rng, x, y, f);
        ck_assert_int_eq(ge2_program_step(prog, GE2_MODE_TRAIN, f, 2), GE2_OK);
        static char text[1 << 16];
        rewind(dump);
        text[fread(text, 1, sizeof text - 1, dump)] = '\0';
        fclose(dump);
        static const char *const passes[] = {"-- pass verify: ok", "-- pass schedule", "-- pass fuse",
                                             "-- pass plan", "-- pass select kernels"};
        for (size_t k = 0; k < sizeof passes / sizeof passes[0]; k++)
            ck_assert_msg(strstr(text, passes[k]), "dump lacks '%s'", passes[k]);
        ck_assert_ptr_nonnull(strstr(text, off ? "fuse: head: off" : "fuse: head: nodes"));
        char dot[1 << 14];
        snprintf(path, sizeof path, "%s-graph.dot", prefix);
        ck_assert_msg(read_text(path, dot, sizeof dot) && strstr(dot, "digraph"), "%s", path);
        snprintf(path, sizeof path, "%s-key0.dot", prefix);
        ck_assert_msg(read_text(path, dot, sizeof dot) && strstr(dot, "digraph"), "%s", path);
        ck_assert_msg((strstr(dot, "label=\"head\"") != NULL) == !off, "key0.dot, head %s: %s", off ? "off" : "on",
                      dot);
        ge2_program_free(prog);
        ge2_context_free(ctx);
    }
    ge2_graph_free(n.graph);
}
END_TEST

START_TEST(test_no_host_allocation_after_first_step)
{
    net n;
    build_net(&n, GE2_OPT_ADAM);
    ge2_context *ctx;
    ge2_program *prog = compile_cpu(n.graph, false, &ctx);
    uint64_t rng = 3;
    float x[16 * 12];
    int32_t y[16];
    ge2_feed f16[2], f7[2];
    net_feeds(&n, 16, &rng, x, y, f16);
    f7[0] = (ge2_feed){n.x, x, ge2_shape2(7, 12)};
    f7[1] = (ge2_feed){n.y, y, ge2_shape1(7)};
    /* First steps of each key may allocate (plan, launches, buffers). */
    ck_assert_int_eq(ge2_program_step(prog, GE2_MODE_TRAIN, f16, 2), GE2_OK);
    ck_assert_int_eq(ge2_program_step(prog, GE2_MODE_TRAIN, f7, 2), GE2_OK);
    ck_assert_int_eq(ge2_program_step(prog, GE2_MODE_EVAL, f16, 2), GE2_OK);

    ge2_alloc_stats before, after;
    ge2_metrics m;
    ge2_alloc_stats_get(&before);
    for (int s = 0; s < 50; s++) {
        ck_assert_int_eq(ge2_program_step(prog, GE2_MODE_TRAIN, s % 3 ? f16 : f7, 2), GE2_OK);
        ck_assert_int_eq(ge2_program_step(prog, GE2_MODE_EVAL, f16, 2), GE2_OK);
        ck_assert_int_eq(ge2_program_take_metrics(prog, GE2_MODE_TRAIN, &m), GE2_OK);
    }
    ck_assert_int_eq(ge2_program_sync(prog), GE2_OK);
    ge2_alloc_stats_get(&after);
    ck_assert_uint_eq(after.allocations, before.allocations);
    ck_assert_int_eq(ge2_program_key_count(prog), 3);
    ge2_program_free(prog);
    ge2_context_free(ctx);
    ge2_graph_free(n.graph);
}
END_TEST

/* take_metrics sums exactly what read_output showed, per mode, and resets. */
START_TEST(test_metrics_sum_outputs)
{
    net n;
    build_net(&n, GE2_OPT_SGD);
    ge2_context *ctx;
    ge2_program *prog = compile_cpu(n.graph, false, &ctx);
    uint64_t rng = 11;
    float x[16 * 12];
    int32_t y[16];
    ge2_feed f[2];
    double loss_sum = 0, correct_sum = 0;
    int64_t examples = 0;
    for (int s = 0; s < 6; s++) {
        int64_t b = s == 5 ? 9 : 16;
        net_feeds(&n, b, &rng, x, y, f);
        ck_assert_int_eq(ge2_program_step(prog, GE2_MODE_TRAIN, f, 2), GE2_OK);
        float loss, correct;
        ck_assert_int_eq(ge2_program_read_output(prog, GE2_MODE_TRAIN, n.loss, &loss, 4), GE2_OK);
        ck_assert_int_eq(ge2_program_read_output(prog, GE2_MODE_TRAIN, n.correct, &correct, 4), GE2_OK);
        ck_assert(correct >= 0 && correct <= b && correct == floorf(correct));
        loss_sum += loss;
        correct_sum += correct;
        examples += b;
    }
    ge2_metrics m;
    ck_assert_int_eq(ge2_program_take_metrics(prog, GE2_MODE_TRAIN, &m), GE2_OK);
    ck_assert_int_eq(m.steps, 6);
    ck_assert_int_eq(m.examples, examples);
    ck_assert_double_eq_tol(m.loss_sum, loss_sum, 1e-9);
    ck_assert_double_eq_tol(m.metric_sum, correct_sum, 1e-9);
    ck_assert_int_eq(ge2_program_take_metrics(prog, GE2_MODE_TRAIN, &m), GE2_OK);
    ck_assert_int_eq(m.steps, 0);
    ck_assert_int_eq(ge2_program_take_metrics(prog, GE2_MODE_EVAL, &m), GE2_OK);
    ck_assert_int_eq(m.steps, 0);
    ge2_program_free(prog);
    ge2_context_free(ctx);
    ge2_graph_free(n.graph);
}
END_TEST

/* SGD without momentum: w1 = w0 - lr * grad, with the lr set between steps
 * and the gradient from the naive run. Step count follows the updates. */
START_TEST(test_set_lr_reaches_update)
{
    net n;
    build_net(&n, GE2_OPT_SGD);
    ge2_context *ctx;
    ge2_program *prog = compile_cpu(n.graph, false, &ctx);
    double lr;
    ck_assert_int_eq(ge2_get_lr(prog, &lr), GE2_OK);
    ck_assert_double_eq_tol(lr, 0.01, 1e-9); /* SGD default, from the optimizer node */
    ck_assert_int_eq(ge2_set_lr(prog, 0.25), GE2_OK);
    ck_assert_int_eq(ge2_get_lr(prog, &lr), GE2_OK);
    ck_assert_double_eq(lr, 0.25);
    ck_assert_int_eq(ge2_set_lr(prog, NAN), GE2_ERR_INVALID_ARGUMENT);

    uint64_t rng = 5;
    float x[16 * 12], w0[20 * 12], w1[20 * 12];
    int32_t y[16];
    ge2_feed f[2];
    net_feeds(&n, 16, &rng, x, y, f);
    ge2_naive *ref;
    ck_assert_int_eq(ge2_naive_run(n.graph, f, 2, &ref), GE2_OK);
    const float *grad = ge2_naive_data(ref, ge2_grad(n.w));
    ck_assert_int_eq(ge2_program_get_parameter(prog, n.w, w0, sizeof w0), GE2_OK);
    ck_assert_mem_eq(w0, ge2_naive_data(ref, n.w), sizeof w0); /* same initializer */
    ck_assert_int_eq(ge2_program_step(prog, GE2_MODE_TRAIN, f, 2), GE2_OK);
    ck_assert_int_eq(ge2_program_get_parameter(prog, n.w, w1, sizeof w1), GE2_OK);
    for (int i = 0; i < 20 * 12; i++)
        ck_assert_float_eq_tol(w1[i], (float)((double)w0[i] - 0.25 * (double)grad[i]), 1e-6);
    int64_t steps;
    ck_assert_int_eq(ge2_program_step_count(prog, &steps), GE2_OK);
    ck_assert_int_eq(steps, 1);
    ck_assert_int_eq(ge2_program_step(prog, GE2_MODE_EVAL, f, 2), GE2_OK);
    ck_assert_int_eq(ge2_program_step_count(prog, &steps), GE2_OK);
    ck_assert_int_eq(steps, 1); /* eval does not update */

    /* set_parameter round trip, and its size check. */
    for (int i = 0; i < 20 * 12; i++)
        w0[i] = (float)i;
    ck_assert_int_eq(ge2_program_set_parameter(prog, n.w, w0, sizeof w0), GE2_OK);
    ck_assert_int_eq(ge2_program_get_parameter(prog, n.w, w1, sizeof w1), GE2_OK);
    ck_assert_mem_eq(w0, w1, sizeof w0);
    ck_assert_int_eq(ge2_program_set_parameter(prog, n.w, w0, 4), GE2_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "[20,12]"));
    ck_assert_int_eq(ge2_program_get_parameter(prog, n.x, w0, sizeof w0), GE2_ERR_INVALID_ARGUMENT);
    ge2_naive_free(ref);
    ge2_program_free(prog);
    ge2_context_free(ctx);
    ge2_graph_free(n.graph);
}
END_TEST

/* Program gradients of every parameter equal the naive run's, bitwise. */
static void check_grads_equal(ge2_program *prog, const ge2_naive *ref)
{
    const ge2_graph *g = ge2_program_graph(prog);
    for (int i = 0; i < g->n_tensors; i++) {
        const ge2_tensor *p = g->tensors[i];
        if (p->role != GE2_ROLE_PARAMETER)
            continue;
        const float *got = ge2_program_pools(prog).grads + ge2_program_layout(prog)->offset[i] / sizeof(float);
        ck_assert_msg(memcmp(got, ge2_naive_data(ref, ge2_grad(p)), tensor_bytes(p, p->shape)) == 0,
                      "gradient of %s differs", p->name);
    }
}

/* p_next == p - lr * grad for every parameter (SGD, no momentum). */
static void check_sgd_update(ge2_program *prog, const ge2_naive *ref, float **before, double lr)
{
    const ge2_graph *g = ge2_program_graph(prog);
    for (int i = 0, k = 0; i < g->n_tensors; i++) {
        const ge2_tensor *p = g->tensors[i];
        if (p->role != GE2_ROLE_PARAMETER)
            continue;
        const float *grad = ge2_naive_data(ref, ge2_grad(p));
        const float *now = ge2_program_pools(prog).params + ge2_program_layout(prog)->offset[i] / sizeof(float);
        for (int64_t e = 0; e < ge2_shape_numel(p->shape); e++)
            ck_assert_float_eq_tol(now[e], (float)((double)before[k][e] - lr * (double)grad[e]), 1e-6);
        k++;
    }
}

/* Two batch sizes train one model: key B's gradient is taken at the
 * parameters key A's update left in the shared pool. */
START_TEST(test_two_keys_train_one_model)
{
    net n;
    build_net(&n, GE2_OPT_SGD);
    ge2_context *ctx;
    ge2_program *prog = compile_cpu(n.graph, false, &ctx);
    ck_assert_int_eq(ge2_set_lr(prog, 0.1), GE2_OK);
    uint64_t rng = 21;
    float x[16 * 12], *before[2];
    int32_t y[16];
    ge2_feed f[2];
    const ge2_tensor *params[2] = {n.w, ge2_graph_find(n.graph, "w2")};
    for (int k = 0; k < 2; k++)
        before[k] = malloc(tensor_bytes(params[k], params[k]->shape));
    int64_t batches[3] = {16, 7, 16};
    ge2_naive *ref = NULL;
    for (int s = 0; s < 3; s++) {
        net_feeds(&n, batches[s], &rng, x, y, f);
        ck_assert_int_eq(ge2_naive_new(n.graph, f, 2, &ref), GE2_OK);
        for (int k = 0; k < 2; k++) {
            size_t bytes = tensor_bytes(params[k], params[k]->shape);
            ck_assert_int_eq(ge2_program_get_parameter(prog, params[k], before[k], bytes), GE2_OK);
            memcpy(ge2_naive_data(ref, params[k]), before[k], bytes); /* the model as the program has it now */
        }
        ck_assert_int_eq(ge2_naive_exec(ref, true), GE2_OK);
        ck_assert_int_eq(ge2_program_step(prog, GE2_MODE_TRAIN, f, 2), GE2_OK);
        check_grads_equal(prog, ref);
        check_sgd_update(prog, ref, before, 0.1);
        ge2_naive_free(ref);
    }
    ck_assert_int_eq(ge2_program_key_count(prog), 2);
    int64_t steps;
    ck_assert_int_eq(ge2_program_step_count(prog, &steps), GE2_OK);
    ck_assert_int_eq(steps, 3);
    for (int k = 0; k < 2; k++)
        free(before[k]);
    ge2_program_free(prog);
    ge2_context_free(ctx);
    ge2_graph_free(n.graph);
}
END_TEST

/* Growing the shared arena is one path whatever the order keys come in:
 * keys made smallest first (the arena grows, every earlier key is resolved
 * again into the new one) train bit for bit as keys made largest first. */
START_TEST(test_keys_in_any_order_train_alike)
{
    const int64_t made[2][3] = {{7, 12, 16}, {16, 12, 7}}, steps[6] = {16, 7, 12, 7, 16, 12};
    float *after[2];
    size_t arena[2], bytes[2];
    for (int run = 0; run < 2; run++) {
        net n;
        build_net(&n, GE2_OPT_ADAM);
        ge2_context *ctx;
        ge2_program *prog = compile_cpu(n.graph, false, &ctx);
        uint64_t rng = 33;
        float x[16 * 12];
        int32_t y[16];
        ge2_feed f[2];
        void *ptrs[2];
        for (int k = 0; k < 3; k++) { /* the keys, planned and prepared in this run's order */
            net_feeds(&n, made[run][k], &rng, x, y, f);
            ck_assert_int_eq(ge2_program_feed_buffers(prog, GE2_MODE_TRAIN, f, 2, ptrs), GE2_OK);
        }
        ck_assert_int_eq(ge2_program_key_count(prog), 3);
        rng = 44;
        for (int s = 0; s < 6; s++) {
            net_feeds(&n, steps[s], &rng, x, y, f);
            ck_assert_msg(ge2_program_step(prog, GE2_MODE_TRAIN, f, 2) == GE2_OK, "%s", ge2_last_error());
        }
        ck_assert_int_eq(ge2_program_sync(prog), GE2_OK);
        bytes[run] = tensor_bytes(n.w, n.w->shape);
        after[run] = malloc(bytes[run]);
        ck_assert_int_eq(ge2_program_get_parameter(prog, n.w, after[run], bytes[run]), GE2_OK);
        ge2_program_arena(prog, &arena[run]);
        ge2_program_free(prog);
        ge2_context_free(ctx);
        ge2_graph_free(n.graph);
    }
    ck_assert_uint_eq(arena[0], arena[1]);
    ck_assert_uint_eq(bytes[0], bytes[1]);
    ck_assert_msg(memcmp(after[0], after[1], bytes[0]) == 0, "keys made smallest first trained another model");
    free(after[0]);
    free(after[1]);
}
END_TEST

/* The CPU backend behind a wrapper that fails chosen exec_prepare calls and,
 * like CUDA, refuses to run an exec that is not prepared. */
static int prepare_failures; /* the next this many prepares fail */
static int prepared_token;

static ge2_status flaky_exec_prepare(ge2_backend_ctx *ctx, ge2_exec *exec)
{
    if (prepare_failures > 0) {
        prepare_failures--;
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "flaky backend: injected prepare failure");
    }
    GE2_TRY(ge2_backend_cpu.exec_prepare(ctx, exec));
    exec->backend_data = &prepared_token;
    return GE2_OK;
}

static ge2_status flaky_exec_run(ge2_backend_ctx *ctx, ge2_exec *exec, int slot)
{
    if (exec->backend_data != &prepared_token)
        return ge2_error(GE2_ERR_STATE, "flaky backend: exec run before exec_prepare");
    return ge2_backend_cpu.exec_run(ctx, exec, slot);
}

static void flaky_exec_release(ge2_backend_ctx *ctx, ge2_exec *exec)
{
    exec->backend_data = NULL;
    ge2_backend_cpu.exec_release(ctx, exec);
}

/* A train step of batch b whose gradients must equal the naive run's at the
 * program's current parameters. */
static void check_train_step(ge2_program *prog, net *n, int64_t b, uint64_t *rng)
{
    float x[16 * 12];
    int32_t y[16];
    ge2_feed f[2];
    net_feeds(n, b, rng, x, y, f);
    ge2_naive *ref = NULL;
    ck_assert_int_eq(ge2_naive_new(n->graph, f, 2, &ref), GE2_OK);
    const ge2_graph *g = ge2_program_graph(prog);
    for (int i = 0; i < g->n_tensors; i++) {
        const ge2_tensor *p = g->tensors[i];
        if (p->role == GE2_ROLE_PARAMETER)
            ck_assert_int_eq(ge2_program_get_parameter(prog, p, ge2_naive_data(ref, p), tensor_bytes(p, p->shape)),
                             GE2_OK);
    }
    ck_assert_int_eq(ge2_naive_exec(ref, true), GE2_OK);
    ck_assert_msg(ge2_program_step(prog, GE2_MODE_TRAIN, f, 2) == GE2_OK, "batch %lld: %s", (long long)b,
                  ge2_last_error());
    check_grads_equal(prog, ref);
    ge2_naive_free(ref);
}

/* A prepare that fails while the shared arena grows must not strand the
 * other keys: each is re-resolved into the new arena, and one left
 * unprepared is prepared on its next step. */
START_TEST(test_failed_prepare_during_arena_growth)
{
    net n;
    build_net(&n, GE2_OPT_SGD);
    ge2_context *ctx;
    ge2_program *prog = compile_cpu(n.graph, false, &ctx);
    ge2_backend flaky = ge2_backend_cpu;
    flaky.exec_prepare = flaky_exec_prepare;
    flaky.exec_run = flaky_exec_run;
    flaky.exec_release = flaky_exec_release;
    ge2_program_swap_backend(prog, &flaky);
    uint64_t rng = 33;
    check_train_step(prog, &n, 2, &rng);
    check_train_step(prog, &n, 4, &rng);
    size_t small, grown;
    ge2_program_arena(prog, &small);
    /* Batch 16 grows the arena: key 2's re-prepare fails, key 4's must
     * still happen, and the step reports the failure. */
    prepare_failures = 1;
    float x[16 * 12];
    int32_t y[16];
    ge2_feed f[2];
    net_feeds(&n, 16, &rng, x, y, f);
    ck_assert_int_eq(ge2_program_step(prog, GE2_MODE_TRAIN, f, 2), GE2_ERR_OUT_OF_MEMORY);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "injected"));
    const void *arena = ge2_program_arena(prog, &grown);
    ck_assert_uint_gt(grown, small);
    ck_assert_int_eq(prepare_failures, 0);
    for (int k = 0; k < ge2_program_key_count(prog); k++)
        ck_assert_ptr_eq(ge2_program_key_view(prog, k).exec->arena, arena);
    check_train_step(prog, &n, 4, &rng);
    check_train_step(prog, &n, 2, &rng);
    check_train_step(prog, &n, 16, &rng);
    ck_assert_int_eq(ge2_program_key_count(prog), 3);
    ge2_program_swap_backend(prog, &ge2_backend_cpu);
    ge2_program_free(prog);
    ge2_context_free(ctx);
    ge2_graph_free(n.graph);
}
END_TEST

START_TEST(test_feed_errors)
{
    net n, other;
    build_net(&n, GE2_OPT_SGD);
    build_net(&other, GE2_OPT_SGD);
    ge2_context *ctx;
    ge2_program *prog = compile_cpu(n.graph, false, &ctx);
    float x[32 * 12] = {0};
    int32_t y[32] = {0};
    ge2_feed f[3] = {{n.x, x, ge2_shape2(16, 12)}, {n.y, y, ge2_shape1(16)}};

    f[0].shape = ge2_shape2(16, 13);
    expect_error(ge2_program_step(prog, GE2_MODE_TRAIN, f, 2), GE2_ERR_SHAPE, "[16,13]", "[16,12]");
    f[0].shape = ge2_shape3(16, 12, 1);
    expect_error(ge2_program_step(prog, GE2_MODE_TRAIN, f, 2), GE2_ERR_SHAPE, "'x'", "[16,12,1]");
    f[0].shape = ge2_shape2(INT64_MAX / 8, 12);
    expect_error(ge2_program_step(prog, GE2_MODE_TRAIN, f, 2), GE2_ERR_SHAPE, "'x'", "too large");
    f[0].shape = ge2_shape2(16, 12);
    expect_error(ge2_program_step(prog, GE2_MODE_TRAIN, f, 1), GE2_ERR_INVALID_ARGUMENT, "'y'", "not fed");
    f[2] = f[0];
    expect_error(ge2_program_step(prog, GE2_MODE_TRAIN, f, 3), GE2_ERR_INVALID_ARGUMENT, "'x'", "twice");
    f[2] = (ge2_feed){n.w, x, ge2_shape2(20, 12)};
    expect_error(ge2_program_step(prog, GE2_MODE_TRAIN, f, 3), GE2_ERR_INVALID_ARGUMENT, "'w'", "parameter");
    f[2] = (ge2_feed){other.x, x, ge2_shape2(16, 12)};
    expect_error(ge2_program_step(prog, GE2_MODE_TRAIN, f, 3), GE2_ERR_GRAPH, "another graph", NULL);
    f[1].data = NULL;
    expect_error(ge2_program_step(prog, GE2_MODE_TRAIN, f, 2), GE2_ERR_INVALID_ARGUMENT, "'y'", "no data");
    f[1].data = y;
    /* Batch sizes that disagree: the op that meets both says so. */
    f[1].shape = ge2_shape1(15);
    ck_assert_int_eq(ge2_program_step(prog, GE2_MODE_TRAIN, f, 2), GE2_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "[16,5]"));
    ck_assert_int_eq(ge2_program_key_count(prog), 0);
    expect_error(ge2_program_step(prog, (ge2_mode)7, f, 2), GE2_ERR_INVALID_ARGUMENT, "mode", NULL);

    float v;
    expect_error(ge2_program_read_output(prog, GE2_MODE_TRAIN, n.loss, &v, 4), GE2_ERR_STATE, "no train step", NULL);
    f[1].shape = ge2_shape1(16);
    ck_assert_int_eq(ge2_program_step(prog, GE2_MODE_TRAIN, f, 2), GE2_OK);
    expect_error(ge2_program_read_output(prog, GE2_MODE_TRAIN, n.loss, &v, 8), GE2_ERR_INVALID_ARGUMENT,
                 "f32 [] (4 bytes)", "8");
    ck_assert_int_eq(ge2_program_read_output(prog, GE2_MODE_TRAIN, n.loss, &v, 4), GE2_OK);
    ck_assert(isfinite(v) && v > 0);
    /* Growing the graph after compile is caught, not planned with a stale layout. */
    ge2_tensor *extra;
    ck_assert_int_eq(ge2_scale(n.graph, n.loss, 2.0, &extra), GE2_OK);
    expect_error(ge2_program_step(prog, GE2_MODE_TRAIN, f, 2), GE2_ERR_STATE, "changed after ge2_compile", NULL);
    ge2_program_free(prog);
    ge2_context_free(ctx);
    ge2_graph_free(n.graph);
    ge2_graph_free(other.graph);
}
END_TEST

START_TEST(test_context_devices)
{
    ge2_context *ctx;
    ck_assert_int_eq(ge2_context_new(GE2_DEVICE_CPU, &ctx), GE2_OK);
    ck_assert_int_eq(ge2_context_device(ctx), GE2_DEVICE_CPU);
    ge2_context_free(ctx);
    bool gpu = ge2_cuda_available();
    ck_assert_int_eq(ge2_cuda_available(), gpu); /* cached, stable */
    ck_assert_int_eq(ge2_context_new(GE2_DEVICE_AUTO, &ctx), GE2_OK);
    ck_assert_int_eq(ge2_context_device(ctx), gpu ? GE2_DEVICE_CUDA : GE2_DEVICE_CPU);
    ge2_context_free(ctx);
    ge2_status st = ge2_context_new(GE2_DEVICE_CUDA, &ctx);
    if (gpu) {
        ck_assert_int_eq(st, GE2_OK);
        ge2_context_free(ctx);
    } else {
        expect_error(st, GE2_ERR_NO_DEVICE, "CUDA", NULL);
        ck_assert_ptr_null(ctx);
    }
    expect_error(ge2_context_new((ge2_device)9, &ctx), GE2_ERR_INVALID_ARGUMENT, "device", NULL);
}
END_TEST

/* GE2_DISABLE_CAPTURE is read once, by ge2_compile, with one rule (set,
 * non-empty, not "0"); the backend sees only the option. */
START_TEST(test_disable_capture_env_rule)
{
    static const struct {
        const char *value; /* NULL: unset */
        bool disabled;
    } cases[] = {{NULL, false}, {"", false}, {"0", false}, {"1", true}, {"yes", true}, {"2", true}};
    net n;
    build_net(&n, GE2_OPT_SGD);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cases[i].value)
            setenv("GE2_DISABLE_CAPTURE", cases[i].value, 1);
        else
            unsetenv("GE2_DISABLE_CAPTURE");
        ge2_context *ctx;
        ge2_program *prog = compile_cpu(n.graph, false, &ctx);
        ck_assert_msg(ge2_program_options_of(prog)->o.disable_capture == cases[i].disabled, "GE2_DISABLE_CAPTURE=%s",
                      cases[i].value ? cases[i].value : "(unset)");
        ge2_program_free(prog);
        ge2_context_free(ctx);
    }
    unsetenv("GE2_DISABLE_CAPTURE");
    ge2_graph_free(n.graph);
}
END_TEST

/* A vocabulary-wide head (1,100 columns, the last 10 padding): its
 * cross-entropy writes the logits' gradient over the logits
 * (ge2_op_def.over_output), in the plan and in the step, and the loss and
 * every gradient still equal the naive run's (its own buffer each) bit for
 * bit; with 100 columns the two keep buffers of their own. */
static void check_head_gradient_over_logits(int64_t cols, bool over)
{
    enum { B = 24, IN = 40 };
    ge2_graph *g;
    ge2_tensor *x, *labels, *w, *logits, *loss;
    ck_assert_int_eq(ge2_graph_new(&g), GE2_OK);
    ck_assert_int_eq(ge2_input(g, "x", GE2_F32, ge2_shape2(B, IN), &x), GE2_OK);
    ck_assert_int_eq(ge2_require_grad(g, x), GE2_OK);
    ck_assert_int_eq(ge2_label(g, "labels", GE2_I32, ge2_shape1(B), &labels), GE2_OK);
    ck_assert_int_eq(ge2_parameter(g, "head.weight", GE2_F32, ge2_shape2(cols, IN),
                                   (ge2_init){GE2_INIT_UNIFORM, -0.5, 0.5, 0}, &w),
                     GE2_OK);
    ck_assert_int_eq(ge2_linear(g, x, w, NULL, GE2_ACT_NONE, 0, &logits), GE2_OK);
    ck_assert_int_eq(ge2_cross_entropy_padded(g, logits, labels, 0.1f, cols - 10, &loss), GE2_OK);
    ck_assert_int_eq(ge2_backward(g, loss), GE2_OK);
    ge2_context *ctx;
    ge2_program *prog = compile_cpu(g, false, &ctx);
    float xd[B * IN];
    int32_t yd[B];
    uint64_t rng = 11;
    for (int i = 0; i < B * IN; i++)
        xd[i] = 2.0f * rg_uniform(&rng);
    for (int i = 0; i < B; i++)
        yd[i] = (int32_t)rg_below(&rng, cols - 10);
    ge2_feed f[2] = {{x, xd, ge2_shape2(B, IN)}, {labels, yd, ge2_shape1(B)}};
    ge2_naive *ref;
    ck_assert_msg(ge2_naive_run(g, f, 2, &ref) == GE2_OK, "%s", ge2_last_error());
    ck_assert_msg(ge2_program_step(prog, GE2_MODE_TRAIN, f, 2) == GE2_OK, "%s", ge2_last_error());
    const ge2_plan *plan = ge2_program_key_view(prog, ge2_program_last_key(prog, GE2_MODE_TRAIN)).plan;
    const int dlogits = ge2_grad(logits)->id;
    ck_assert_msg((plan->tensors[dlogits].reuses == logits->id) == over, "%lld columns: the gradient %s the logits",
                  (long long)cols, plan->tensors[dlogits].reuses == logits->id ? "takes over" : "does not take over");
    float got_loss, got_grad[1100 * IN], got_dx[B * IN];
    ck_assert_int_eq(ge2_program_read_output(prog, GE2_MODE_TRAIN, loss, &got_loss, sizeof got_loss), GE2_OK);
    ck_assert_mem_eq(&got_loss, ge2_naive_data(ref, loss), sizeof got_loss);
    const size_t wbytes = sizeof(float) * (size_t)(cols * IN);
    memcpy(got_grad, ge2_program_pools(prog).grads + ge2_program_layout(prog)->offset[w->id] / sizeof(float), wbytes);
    ck_assert_msg(memcmp(got_grad, ge2_naive_data(ref, ge2_grad(w)), wbytes) == 0, "the head's gradient differs");
    ck_assert_int_eq(ge2_program_read_output(prog, GE2_MODE_TRAIN, ge2_grad(x), got_dx, sizeof got_dx), GE2_OK);
    ck_assert_mem_eq(got_dx, ge2_naive_data(ref, ge2_grad(x)), sizeof got_dx);
    ge2_naive_free(ref);
    ge2_program_free(prog);
    ge2_context_free(ctx);
    ge2_graph_free(g);
}

START_TEST(test_head_gradient_over_logits)
{
    check_head_gradient_over_logits(1100, true);
    check_head_gradient_over_logits(100, false);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {
        test_random_graphs_match_naive,
        test_launch_scratch_in_the_arena,
        test_no_host_allocation_after_first_step,
        test_dump_passes,
        test_metrics_sum_outputs,
        test_two_keys_train_one_model,
        test_keys_in_any_order_train_alike,
        test_failed_prepare_during_arena_growth,
        test_set_lr_reaches_update,
        test_feed_errors,
        test_context_devices,
        test_disable_capture_env_rule,
        test_head_gradient_over_logits,
    };
    return planner_run_tests("program_exec", tests, (int)(sizeof tests / sizeof tests[0]), 240);
}
