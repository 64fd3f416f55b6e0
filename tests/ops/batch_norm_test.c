/* Batch norm through compiled programs on the CPU backend: train steps move
 * the running statistics (checked against float64 recomputations of
 * PyTorch's update rule), eval steps normalize by them and leave them
 * alone, and checkpoints carry them, num_batches_tracked as I64. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "checkpoint/safetensors.h"
#include "ge2/ge2.h"
#include "tests/data/testutil.h"
#include "tests/support/check_main.h"

#define API(call) ck_assert_msg((call) == GE2_OK, "%s: %s", #call, ge2_last_error())

enum { N = 4, C = 3, H = 2, W = 2, M = N * H * W, X = N * C * H * W };
static const double momentum = 0.1, eps = 1e-5;

typedef struct net {
    ge2_context *ctx;
    ge2_graph *graph;
    ge2_program *program;
    ge2_tensor *x, *target, *y, *loss;
} net;

static void net_open(net *n)
{
    memset(n, 0, sizeof *n);
    API(ge2_context_new(GE2_DEVICE_CPU, &n->ctx));
    API(ge2_graph_new(&n->graph));
    API(ge2_input(n->graph, "x", GE2_F32, ge2_shape4(N, C, H, W), &n->x));
    API(ge2_label(n->graph, "target", GE2_F32, ge2_shape4(N, C, H, W), &n->target));
    API(ge2_batch_norm_layer(n->graph, "bn1", n->x, momentum, eps, &n->y));
    API(ge2_mark_output(n->graph, n->y));
    API(ge2_mse_loss(n->graph, n->y, n->target, &n->loss));
    API(ge2_backward(n->graph, n->loss));
    ge2_optimizer_config sgd = ge2_optimizer_defaults(GE2_OPT_SGD);
    sgd.lr = 0.5;
    API(ge2_optimizer(n->graph, &sgd));
    API(ge2_compile(n->ctx, n->graph, NULL, &n->program));
}

static void net_close(net *n)
{
    ge2_program_free(n->program);
    ge2_graph_free(n->graph);
    ge2_context_free(n->ctx);
}

static void batch(int step, float *x, float *target)
{
    for (int i = 0; i < X; i++) {
        x[i] = (float)sin(0.37 * i + 1.3 * step) * (1.0f + (float)(i % C)) + 0.25f * (float)step;
        target[i] = (float)cos(0.11 * i - step);
    }
}

static void step(net *n, ge2_mode mode, const float *x, const float *target)
{
    ge2_feed feeds[2] = {{n->x, x, ge2_shape4(N, C, H, W)}, {n->target, target, ge2_shape4(N, C, H, W)}};
    API(ge2_program_step(n->program, mode, feeds, 2));
    API(ge2_program_sync(n->program));
}

static void get(net *n, const char *name, void *dst, size_t bytes)
{
    ge2_tensor *t = ge2_graph_find(n->graph, name);
    ck_assert_ptr_nonnull(t);
    API(ge2_tensor_role(t) == GE2_ROLE_BUFFER ? ge2_program_get_buffer(n->program, t, dst, bytes)
                                              : ge2_program_get_parameter(n->program, t, dst, bytes));
}

/* channel c's values of a [N, C, H, W] batch */
static double channel_mean(const float *x, int c)
{
    double s = 0;
    for (int k = 0; k < M; k++)
        s += x[((k / (H * W)) * C + c) * H * W + k % (H * W)];
    return s / M;
}

static double channel_var(const float *x, int c, double mean)
{
    double s = 0;
    for (int k = 0; k < M; k++)
        s += pow(x[((k / (H * W)) * C + c) * H * W + k % (H * W)] - mean, 2);
    return s / M;
}

START_TEST(train_steps_move_running_statistics)
{
    net n;
    net_open(&n);
    double rm[C] = {0, 0, 0}, rv[C] = {1, 1, 1};
    float x[X], target[X];
    for (int s = 0; s < 3; s++) {
        batch(s, x, target);
        step(&n, GE2_MODE_TRAIN, x, target);
        for (int c = 0; c < C; c++) {
            double mean = channel_mean(x, c), var = channel_var(x, c, mean);
            rm[c] = (1 - momentum) * rm[c] + momentum * mean;
            rv[c] = (1 - momentum) * rv[c] + momentum * var * M / (M - 1);
        }
    }
    float got_mean[C], got_var[C];
    int64_t count;
    get(&n, "bn1.running_mean", got_mean, sizeof got_mean);
    get(&n, "bn1.running_var", got_var, sizeof got_var);
    get(&n, "bn1.num_batches_tracked", &count, sizeof count);
    for (int c = 0; c < C; c++) {
        ck_assert_msg(fabs(got_mean[c] - rm[c]) <= 1e-6 + 1e-5 * fabs(rm[c]), "mean[%d] %g vs %g", c, got_mean[c], rm[c]);
        ck_assert_msg(fabs(got_var[c] - rv[c]) <= 1e-6 + 1e-5 * fabs(rv[c]), "var[%d] %g vs %g", c, got_var[c], rv[c]);
    }
    ck_assert_int_eq(count, 3);
    net_close(&n);
}
END_TEST

START_TEST(eval_normalizes_by_running_statistics_and_keeps_them)
{
    net n;
    net_open(&n);
    float x[X], target[X], y[X];
    batch(0, x, target);
    step(&n, GE2_MODE_TRAIN, x, target);
    float rm[C], rv[C], w[C], b[C], rm2[C], rv2[C];
    int64_t count;
    get(&n, "bn1.running_mean", rm, sizeof rm);
    get(&n, "bn1.running_var", rv, sizeof rv);
    get(&n, "bn1.weight", w, sizeof w);
    get(&n, "bn1.bias", b, sizeof b);
    /* the step trained weight and bias away from 1 and 0 */
    ck_assert(fabsf(w[0] - 1.0f) > 1e-4f || fabsf(b[0]) > 1e-4f);
    batch(7, x, target);
    step(&n, GE2_MODE_EVAL, x, target);
    API(ge2_program_read_output(n.program, GE2_MODE_EVAL, n.y, y, sizeof y));
    for (int i = 0; i < X; i++) {
        int c = (i / (H * W)) % C;
        double want = (x[i] - rm[c]) / sqrt(rv[c] + eps) * w[c] + b[c];
        ck_assert_msg(fabs(y[i] - want) <= 1e-5 + 1e-5 * fabs(want), "y[%d] %g vs %g", i, y[i], want);
    }
    get(&n, "bn1.running_mean", rm2, sizeof rm2);
    get(&n, "bn1.running_var", rv2, sizeof rv2);
    get(&n, "bn1.num_batches_tracked", &count, sizeof count);
    ck_assert_mem_eq(rm, rm2, sizeof rm);
    ck_assert_mem_eq(rv, rv2, sizeof rv);
    ck_assert_int_eq(count, 1);
    net_close(&n);
}
END_TEST

START_TEST(checkpoints_carry_the_buffers)
{
    net a, b;
    net_open(&a);
    float x[X], target[X];
    for (int s = 0; s < 2; s++) {
        batch(s, x, target);
        step(&a, GE2_MODE_TRAIN, x, target);
    }
    const char *path = tu_path("bn.safetensors");
    API(ge2_checkpoint_save(a.program, path, NULL));

    ge2_st_file f;
    API(ge2_st_read(path, 1 << 20, &f));
    const uint8_t *data;
    int64_t count;
    API(ge2_st_expect(&f, path, "bn1.num_batches_tracked", GE2_I64, ge2_shape0(), &data));
    memcpy(&count, data, sizeof count);
    ck_assert_int_eq(count, 2);
    API(ge2_st_expect(&f, path, "bn1.running_var", GE2_F32, ge2_shape1(C), &data));
    ge2_st_release(&f);

    net_open(&b);
    API(ge2_checkpoint_load(b.program, path, NULL));
    float ma[C], mb[C];
    get(&a, "bn1.running_mean", ma, sizeof ma);
    get(&b, "bn1.running_mean", mb, sizeof mb);
    ck_assert_mem_eq(ma, mb, sizeof ma);
    get(&b, "bn1.num_batches_tracked", &count, sizeof count);
    ck_assert_int_eq(count, 2);
    /* parameters-only loads (--init) take the buffers too */
    net_close(&b);
    net_open(&b);
    API(ge2_checkpoint_load_parameters(b.program, path));
    get(&b, "bn1.running_mean", mb, sizeof mb);
    ck_assert_mem_eq(ma, mb, sizeof ma);
    net_close(&b);
    net_close(&a);
}
END_TEST

START_TEST(running_statistics_must_be_buffers)
{
    ge2_graph *g;
    API(ge2_graph_new(&g));
    ge2_tensor *x, *w, *b, *mean, *var, *y;
    ge2_init ones = {GE2_INIT_CONSTANT, 1, 0, 0}, zeros = {GE2_INIT_ZEROS, 0, 0, 0};
    API(ge2_input(g, "x", GE2_F32, ge2_shape2(4, 3), &x));
    API(ge2_parameter(g, "w", GE2_F32, ge2_shape1(3), ones, &w));
    API(ge2_parameter(g, "b", GE2_F32, ge2_shape1(3), zeros, &b));
    API(ge2_parameter(g, "rm", GE2_F32, ge2_shape1(3), zeros, &mean));
    API(ge2_buffer(g, "rv", GE2_F32, ge2_shape1(3), ones, &var));
    ck_assert_int_eq(ge2_batch_norm(g, x, w, b, mean, var, NULL, 0.1, 1e-5, &y), GE2_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "running_mean 'rm' is a parameter"));
    ge2_tensor *wrong;
    API(ge2_buffer(g, "rm4", GE2_F32, ge2_shape1(4), zeros, &wrong));
    ck_assert_int_eq(ge2_batch_norm(g, x, w, b, wrong, var, NULL, 0.1, 1e-5, &y), GE2_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "running_mean rm4 is [4], expected [3]"));
    ck_assert_int_eq(ge2_buffer(g, "bad", GE2_I32, ge2_shape1(3), zeros, &wrong), GE2_ERR_DTYPE);
    ge2_graph_free(g);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("batch_norm");
    TCase *tc = tcase_create("program");
    tcase_add_checked_fixture(tc, tu_tmpdir_setup, tu_tmpdir_teardown);
    tcase_add_test(tc, train_steps_move_running_statistics);
    tcase_add_test(tc, eval_normalizes_by_running_statistics_and_keeps_them);
    tcase_add_test(tc, checkpoints_carry_the_buffers);
    tcase_add_test(tc, running_statistics_must_be_buffers);
    suite_add_tcase(s, tc);
    return ge2_check_run(s);
}
