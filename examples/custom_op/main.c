/* train_custom_op: a layer ge2 lacks, SwiGLU, added from outside the
 * library (swiglu.c, swiglu_cuda.cu; public headers only), checked the way
 * ge2 checks its own ops, and trained inside the captured step.
 *
 *   1. registers the ops and a second CUDA kernel as a candidate;
 *   2. ge2_check_gradients: its backward against float64 central
 *      differences on the CPU;
 *   3. with a GPU, ge2_check_agreement: CUDA against the CPU, forward and
 *      backward;
 *   4. trains  x -> [W_a x + b_a, W_g x + b_g] -> swiglu -> W_o h + b_o ->
 *      cross-entropy  on a synthetic task (labels from a fixed random
 *      teacher), with Adam, on --device (auto: CUDA when present; on CUDA
 *      every step replays one captured graph), and prints the loss, the
 *      accuracy and the kernel report, where the candidate's timing shows.
 * Exit status 0 when every check passes and training learned. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/cli.h"
#include "ge2/extension.h"
#include "ge2/ge2.h"
#include "swiglu.h"

#define IN 32
#define HIDDEN 64
#define CLASSES 4
#define BATCH 128

static int failed(const char *what)
{
    fprintf(stderr, "train_custom_op: %s: %s\n", what, ge2_last_error());
    return 1;
}

static uint64_t rng = 0x5eedull;
static double uniform(void) /* [-1, 1) */
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

/* Step 2: y = swiglu(a, g), loss = sum(y ⊙ c) in f64, a and g parameters. */
static int check_gradients(void)
{
    ge2_graph *g;
    ge2_tensor *a, *gate, *c, *y, *yc, *loss;
    double cv[3 * 5];
    for (int i = 0; i < 15; i++)
        cv[i] = uniform();
    const ge2_init init = {GE2_INIT_UNIFORM, -2.0, 2.0, 0};
    if (ge2_graph_new(&g) != GE2_OK || ge2_parameter(g, "a", GE2_F64, ge2_shape2(3, 5), init, &a) != GE2_OK ||
        ge2_parameter(g, "g", GE2_F64, ge2_shape2(3, 5), init, &gate) != GE2_OK ||
        ge2_constant(g, "c", GE2_F64, ge2_shape2(3, 5), cv, &c) != GE2_OK || swiglu(g, a, gate, &y) != GE2_OK ||
        ge2_mul(g, y, c, &yc) != GE2_OK || ge2_sum_all(g, yc, &loss) != GE2_OK || ge2_backward(g, loss) != GE2_OK)
        return failed("gradient check graph");
    ge2_tensor *wrt[2] = {a, gate};
    ge2_check_result r;
    if (ge2_check_gradients(g, loss, NULL, 0, wrt, 2, 1e-7, 1e-6, &r) != GE2_OK)
        return failed("ge2_check_gradients");
    printf("gradient check (float64 central differences): %s, worst difference %.2e (its bound %.2e)%s%s\n",
           r.ok ? "pass" : "FAIL", r.worst_difference, r.worst_bound, r.ok ? "" : ": ", r.message);
    ge2_graph_free(g);
    return r.ok ? 0 : 1;
}

/* Step 3: y = swiglu(a, g) and both input gradients, CPU against CUDA;
 * a is a parameter (the same initial values on both), g a fed input. */
static int check_agreement(void)
{
    enum { N = 1001 }; /* not a multiple of 4: the float4 candidate declines, the op's own kernel runs */
    ge2_graph *g;
    ge2_tensor *a, *gate, *y, *loss;
    const ge2_init init = {GE2_INIT_UNIFORM, -3.0, 3.0, 0};
    if (ge2_graph_new(&g) != GE2_OK || ge2_parameter(g, "a", GE2_F32, ge2_shape1(N), init, &a) != GE2_OK ||
        ge2_input(g, "g", GE2_F32, ge2_shape1(N), &gate) != GE2_OK || ge2_require_grad(g, gate) != GE2_OK ||
        swiglu(g, a, gate, &y) != GE2_OK || ge2_sum_all(g, y, &loss) != GE2_OK || ge2_mark_output(g, y) != GE2_OK ||
        ge2_backward(g, loss) != GE2_OK)
        return failed("agreement graph");
    float gv[N];
    for (int i = 0; i < N; i++)
        gv[i] = (float)(3 * uniform());
    ge2_feed feeds[1] = {{gate, gv, ge2_shape1(N)}};
    ge2_tensor *outs[3] = {y, ge2_grad(a), ge2_grad(gate)};
    ge2_check_result r;
    ge2_status st = ge2_check_agreement(g, GE2_MODE_TRAIN, feeds, 1, outs, 3, 1e-6, 1e-5, &r);
    ge2_graph_free(g);
    if (st == GE2_ERR_NO_DEVICE) {
        printf("CPU <-> CUDA agreement: skipped (no GPU)\n");
        return 0;
    }
    if (st != GE2_OK)
        return failed("ge2_check_agreement");
    printf("CPU <-> CUDA agreement (forward, both gradients): %s, worst difference %.2e (its bound %.2e)%s%s\n",
           r.ok ? "pass" : "FAIL", r.worst_difference, r.worst_bound, r.ok ? "" : ": ", r.message);
    return r.ok ? 0 : 1;
}

typedef struct model {
    ge2_graph *graph;
    ge2_tensor *x, *labels, *loss, *correct;
} model;

static ge2_status linear(ge2_graph *g, ge2_tensor *x, const char *name, int64_t in, int64_t out, ge2_tensor **y)
{
    char wname[32], bname[32];
    snprintf(wname, sizeof wname, "%s.weight", name);
    snprintf(bname, sizeof bname, "%s.bias", name);
    ge2_tensor *w, *b;
    ge2_status st = ge2_parameter(g, wname, GE2_F32, ge2_shape2(out, in), (ge2_init){GE2_INIT_LINEAR_DEFAULT, 0, 0, 0}, &w);
    if (st == GE2_OK)
        st = ge2_parameter(g, bname, GE2_F32, ge2_shape1(out), (ge2_init){GE2_INIT_LINEAR_DEFAULT, 0, 0, in}, &b);
    return st == GE2_OK ? ge2_linear(g, x, w, b, GE2_ACT_NONE, 0.0f, y) : st;
}

static ge2_status build(model *m)
{
    ge2_tensor *a, *gate, *h, *logits;
    ge2_status st = ge2_graph_new(&m->graph);
    ge2_graph *g = m->graph;
    if (st == GE2_OK)
        st = ge2_input(g, "x", GE2_F32, ge2_shape2(BATCH, IN), &m->x);
    if (st == GE2_OK)
        st = ge2_label(g, "labels", GE2_I32, ge2_shape1(BATCH), &m->labels);
    if (st == GE2_OK)
        st = linear(g, m->x, "up", IN, HIDDEN, &a);
    if (st == GE2_OK)
        st = linear(g, m->x, "gate", IN, HIDDEN, &gate);
    if (st == GE2_OK)
        st = swiglu(g, a, gate, &h);
    if (st == GE2_OK)
        st = linear(g, h, "down", HIDDEN, CLASSES, &logits);
    if (st == GE2_OK)
        st = ge2_cross_entropy(g, logits, m->labels, 0.0f, &m->loss);
    if (st == GE2_OK)
        st = ge2_accuracy(g, logits, m->labels, &m->correct);
    if (st == GE2_OK)
        st = ge2_mark_output(g, m->correct);
    if (st == GE2_OK)
        st = ge2_backward(g, m->loss);
    ge2_optimizer_config adam = ge2_optimizer_defaults(GE2_OPT_ADAM);
    adam.lr = 3e-3;
    if (st == GE2_OK)
        st = ge2_optimizer(g, &adam);
    return st;
}

/* A batch of the synthetic task: x uniform, the label the argmax of a
 * fixed random linear teacher. */
static void batch(const float *teacher, float *x, int32_t *labels)
{
    for (int r = 0; r < BATCH; r++) {
        for (int i = 0; i < IN; i++)
            x[r * IN + i] = (float)uniform();
        int best = 0;
        double best_v = -1e30;
        for (int c = 0; c < CLASSES; c++) {
            double v = 0;
            for (int i = 0; i < IN; i++)
                v += teacher[c * IN + i] * x[r * IN + i];
            if (v > best_v)
                best_v = v, best = c;
        }
        labels[r] = best;
    }
}

/* Step 4. */
static int train(ge2_device device, int steps)
{
    model m;
    ge2_context *ctx;
    ge2_program *program;
    if (build(&m) != GE2_OK)
        return failed("model");
    if (cli_context_new(device, &ctx) != GE2_OK)
        return failed("--device");
    if (ge2_compile(ctx, m.graph, NULL, &program) != GE2_OK)
        return failed("compile");
    float teacher[CLASSES * IN], x[BATCH * IN];
    int32_t labels[BATCH];
    for (int i = 0; i < CLASSES * IN; i++)
        teacher[i] = (float)uniform();
    double first = 0, last = 0, acc = 0;
    for (int s = 0; s < steps; s++) {
        batch(teacher, x, labels);
        ge2_feed feeds[2] = {{m.x, x, ge2_shape2(BATCH, IN)}, {m.labels, labels, ge2_shape1(BATCH)}};
        if (ge2_program_step(program, GE2_MODE_TRAIN, feeds, 2) != GE2_OK)
            return failed("step");
        if (s == 0 || s == steps - 1 || (s + 1) % 100 == 0) {
            ge2_metrics mt;
            if (ge2_program_sync(program) != GE2_OK || ge2_program_take_metrics(program, GE2_MODE_TRAIN, &mt) != GE2_OK)
                return failed("metrics");
            const double loss = mt.loss_sum / (double)mt.steps, a = mt.metric_sum / (double)mt.examples;
            if (s == 0)
                first = loss;
            last = loss, acc = a;
            printf("step %4d: loss %.4f, accuracy %.3f (mean of the %lld steps since the last line)\n", s + 1, loss, a,
                   (long long)mt.steps);
        }
    }
    printf("trained on %s: loss %.4f -> %.4f, accuracy %.3f, %d step graph(s) captured\n",
           device == GE2_DEVICE_CUDA ? "cuda" : "cpu", first, last, acc, ge2_program_capture_count(program));
    if (ge2_program_kernel_report(program, GE2_MODE_TRAIN, stdout) != GE2_OK)
        return failed("kernel report");
    const bool learned = last < 0.5 * first && acc > 0.8;
    ge2_program_free(program);
    ge2_context_free(ctx);
    ge2_graph_free(m.graph);
    if (!learned)
        fprintf(stderr, "train_custom_op: did not learn (loss %.4f -> %.4f, accuracy %.3f)\n", first, last, acc);
    return learned ? 0 : 1;
}

int main(int argc, char **argv)
{
    ge2_device device = GE2_DEVICE_AUTO;
    int64_t steps = 600;
    for (int i = 1; i < argc; i++) {
        const bool has_value = i + 1 < argc;
        if (!strcmp(argv[i], "--help")) {
            printf("usage: train_custom_op [--device cpu|cuda|auto] [--steps N]\n");
            return 0;
        } else if (!strcmp(argv[i], "--device") && has_value) {
            if (ge2_device_parse(argv[++i], &device) != GE2_OK) {
                fprintf(stderr, "train_custom_op: --device: expected cpu, cuda or auto, got '%s'\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--steps") && has_value) {
            if (!cli_parse_i64(argv[++i], 0, 1000000000, &steps)) {
                fprintf(stderr, "train_custom_op: --steps: expected a non-negative integer, got '%s'\n", argv[i]);
                return 2;
            }
        } else {
            fprintf(stderr, "train_custom_op: %s '%s' (usage: train_custom_op [--device cpu|cuda|auto] [--steps N])\n",
                    !strcmp(argv[i], "--device") || !strcmp(argv[i], "--steps") ? "a value is missing after"
                                                                                  : "unknown flag",
                    argv[i]);
            return 2;
        }
    }
    if (swiglu_register() != GE2_OK)
        return failed("register");
    int bad = check_gradients();
    bad |= check_agreement();
    if (steps > 0)
        bad |= train(device, (int)steps);
    printf("%s\n", bad ? "train_custom_op: FAILED" : "train_custom_op: ok");
    return bad;
}
