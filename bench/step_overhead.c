/* step_overhead: ge2's own host time per ge2_program_step, without a GPU.
 *
 * The benchmark's small MLP (784-256-128-10, batch 64, Adam) compiled for the
 * CPU backend, whose kernels and copies are then replaced by no-ops: what is
 * left of a step is ge2's bookkeeping (argument and feed checks, the graph
 * key and its lookup, staging, folding a finished step's metrics), the part
 * no backend call hides. Printed per way of feeding, median over many steps, in ns:
 *   copying     ge2_program_step(feeds from the caller's buffers): staging memcpy included
 *   zero-copy   ge2_program_feed_buffers, then ge2_program_step on those buffers
 * On CUDA each step adds its five driver calls to these figures: the feeds'
 * copy to the device staging on the feed stream, its event and the step
 * stream's wait for it, the graph launch (which holds the results' copy
 * back), and the fence record.
 *
 *   bazel run -c opt //bench:step_overhead
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "graph/clock.h"
#include "capture/program_inspect.h"
#include "graph/error.h"

#define BATCH 64
#define FEATURES 784
#define STEPS 20000

static ge2_status nop_run(ge2_backend_ctx *ctx, ge2_exec *exec, int slot)
{
    (void)ctx;
    (void)exec;
    (void)slot;
    return GE2_OK;
}

static double now_ns(void) { return 1e9 * ge2_now_s(); }

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

static ge2_status build(ge2_graph *g, ge2_tensor **x, ge2_tensor **y)
{
    static const int64_t dims[] = {FEATURES, 256, 128, 10};
    GE2_TRY(ge2_input(g, "x", GE2_F32, ge2_shape2(BATCH, FEATURES), x));
    GE2_TRY(ge2_label(g, "y", GE2_I32, ge2_shape1(BATCH), y));
    ge2_tensor *h = *x, *loss;
    for (int l = 0; l < 3; l++) {
        char name[32];
        ge2_tensor *w, *b;
        ge2_init init = {GE2_INIT_LINEAR_DEFAULT, 0, 0, dims[l]};
        snprintf(name, sizeof name, "fc%d.weight", l + 1);
        GE2_TRY(ge2_parameter(g, name, GE2_F32, ge2_shape2(dims[l + 1], dims[l]), init, &w));
        snprintf(name, sizeof name, "fc%d.bias", l + 1);
        GE2_TRY(ge2_parameter(g, name, GE2_F32, ge2_shape1(dims[l + 1]), init, &b));
        GE2_TRY(ge2_linear(g, h, w, b, l == 2 ? GE2_ACT_NONE : GE2_ACT_RELU, 0.0f, &h));
    }
    GE2_TRY(ge2_cross_entropy(g, h, *y, 0.0f, &loss));
    GE2_TRY(ge2_backward(g, loss));
    ge2_optimizer_config adam = ge2_optimizer_defaults(GE2_OPT_ADAM);
    return ge2_optimizer(g, &adam);
}

static ge2_status measure(ge2_program *prog, ge2_feed *feeds, bool zero_copy, double *step_ns, double *feed_ns)
{
    static double step[STEPS], feed[STEPS];
    for (int i = 0; i < STEPS; i++) {
        ge2_feed f[2] = {feeds[0], feeds[1]};
        double t0 = now_ns();
        if (zero_copy) {
            void *buf[2];
            GE2_TRY(ge2_program_feed_buffers(prog, GE2_MODE_TRAIN, f, 2, buf));
            f[0].data = buf[0];
            f[1].data = buf[1];
        }
        double t1 = now_ns();
        GE2_TRY(ge2_program_step(prog, GE2_MODE_TRAIN, f, 2));
        step[i] = now_ns() - t1;
        feed[i] = t1 - t0;
    }
    *step_ns = median(step, STEPS);
    *feed_ns = median(feed, STEPS);
    return GE2_OK;
}

int main(void)
{
    static float x[BATCH * FEATURES];
    static int32_t y[BATCH];
    ge2_graph *g = NULL;
    ge2_context *ctx = NULL;
    ge2_program *prog = NULL;
    ge2_tensor *tx, *ty;
    ge2_status st = ge2_graph_new(&g);
    if (st == GE2_OK)
        st = build(g, &tx, &ty);
    if (st == GE2_OK)
        st = ge2_context_new(GE2_DEVICE_CPU, &ctx);
    if (st == GE2_OK)
        st = ge2_compile(ctx, g, NULL, &prog);
    ge2_backend nop;
    if (st == GE2_OK) {
        nop = ge2_backend_cpu;
        nop.exec_run = nop_run; /* the step's copies are part of its run */
        ge2_program_swap_backend(prog, &nop);
    }
    ge2_feed feeds[2] = {{tx, x, ge2_shape2(BATCH, FEATURES)}, {ty, y, ge2_shape1(BATCH)}};
    double copy_step, copy_feed, zero_step, zero_feed;
    if (st == GE2_OK)
        st = measure(prog, feeds, false, &copy_step, &copy_feed); /* the first step plans the key */
    if (st == GE2_OK)
        st = measure(prog, feeds, false, &copy_step, &copy_feed);
    if (st == GE2_OK)
        st = measure(prog, feeds, true, &zero_step, &zero_feed);
    if (st == GE2_OK) {
        printf("step_overhead: MLP 784-256-128-10, batch %d, CPU backend with no-op kernels and copies; "
               "median of %d steps\n",
               BATCH, STEPS);
        printf("copying    ge2_program_step %8.0f ns\n", copy_step);
        printf("zero-copy  ge2_program_step %8.0f ns  (+ ge2_program_feed_buffers %.0f ns)\n", zero_step,
               zero_feed);
    } else {
        fprintf(stderr, "step_overhead: %s\n", ge2_last_error());
    }
    ge2_program_free(prog);
    ge2_context_free(ctx);
    ge2_graph_free(g);
    return st == GE2_OK ? 0 : 1;
}
