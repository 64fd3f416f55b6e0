/* train_mlp: a Fashion-MNIST multi-layer perceptron, trained end to end with ge2.
 *
 *   bazel run //examples:train_mlp -- --device cpu --epochs 10
 *
 * Model: fc1..fcK linear layers (fcI.weight [out, in], fcI.bias [out], the
 * names and layout of a PyTorch nn.Linear stack, so --save/--init files
 * round-trip with safetensors.torch), the activation fused into every layer
 * but the last, mean cross-entropy, and an accuracy metric. Inputs are
 * pixel / 255, flattened to 784.
 *
 * The loop never reads the loss synchronously: metrics arrive through
 * ge2_program_take_metrics, and the host waits only at epoch ends. The last
 * line printed is exactly "test accuracy: 0.XXXX (N/10000)". Errors are one
 * line on stderr; exit 2 for a bad flag, 1 for anything else.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "data/dataset.h"
#include "ge2/ge2.h"
#include "optim/optim.h"

/* Returns a failing ge2 call's status from the enclosing function. */
#define TRY(call)                        \
    do {                                 \
        ge2_status try_ = (call);        \
        if (try_ != GE2_OK)              \
            return try_;                 \
    } while (0)

#define MAX_LAYERS 8
#define N_FEATURES 784
#define N_CLASSES 10

typedef struct options {
    ge2_device device;
    const char *data;
    int n_hidden;
    int64_t hidden[MAX_LAYERS - 1];
    ge2_activation act;
    int64_t batch, epochs, steps; /* steps -1: no limit; 0: evaluate only */
    ge2_optimizer_kind optimizer;
    double lr, momentum, weight_decay; /* < 0: the optimizer's default */
    uint64_t seed;
    bool shuffle, plan_report, kernel_report;
    const char *init, *save, *resume;
    ge2_compile_options compile; /* --no-capture, --disable-fusions, --no-autotune, --kernel-cache, --dump-passes */
} options;

static const char *const progname = "train_mlp";

/* One line on stderr; returns code so callers can `return fail(...)`. */
static int fail(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", progname);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return code;
}

static int fail_ge2(void)
{
    return fail(1, "%s", ge2_last_error());
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: %s [flags]\n"
            "Trains an MLP on Fashion-MNIST and prints its test accuracy.\n"
            "  --device cpu|cuda|auto   where to run (auto)\n"
            "  --data DIR               Fashion-MNIST IDX files, plain or .gz (/usr/share/datasets/fashion-mnist)\n"
            "  --hidden LIST            hidden layer widths, comma-separated (256,128)\n"
            "  --act NAME               relu|tanh|gelu|sigmoid after each hidden layer (relu)\n"
            "  --batch N                examples per step (64)\n"
            "  --epochs N               passes over the training set (10)\n"
            "  --steps N                stop after N optimizer steps in this run (no limit)\n"
            "  --optimizer NAME         sgd|adam|adamw (adam)\n"
            "  --lr X                   learning rate (the optimizer's PyTorch default: adam/adamw 0.001, sgd 0.01)\n"
            "  --momentum X             SGD momentum (0)\n"
            "  --weight-decay X         weight decay (the optimizer's default: adamw 0.01, else 0)\n"
            "  --seed N                 seed of the initial weights and the data order (1)\n"
            "  --no-shuffle             batches are consecutive slices of the training set from image 0\n"
            "  --init FILE              initial parameters from a safetensors file (fcI.weight, fcI.bias)\n"
            "  --save FILE              write a checkpoint (safetensors) when training stops\n"
            "  --resume FILE            continue from a checkpoint, including the data order\n"
            "  --plan-report            print the memory plan report and write plan.svg\n"
            "  --kernel-report          print which kernel each node of the train and eval steps ran\n"
            "                           (GPU GEMMs: cuBLASLt algorithm or ge2's tiled GEMM, tuned once per shape)\n"
            "  --no-capture             CUDA: run every step eagerly instead of replaying a captured graph\n"
            "  --disable-fusions LIST   fusion patterns to leave out: mlp_step,head,tail_copies (none)\n"
            "  --no-autotune            CUDA: take cuBLASLt's first heuristic GEMM instead of timing candidates\n"
            "  --kernel-cache FILE      where tuned GEMM choices are kept (~/.cache/ge2/kernels.txt; '': none)\n"
            "  --dump-passes            print each compile pass's result (verify, fuse, kernels, schedule, plan)\n"
            "  --help                   this text\n",
            progname);
}

/* ------------------------------------------------------------------ flags */

static bool parse_i64(const char *s, int64_t lo, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno || v < lo)
        return false;
    *out = v;
    return true;
}

static bool parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !(v >= 0) || v > 1e30)
        return false;
    *out = v;
    return true;
}

static bool parse_hidden(const char *s, options *o)
{
    o->n_hidden = 0;
    if (!*s)
        return true;
    char buf[256];
    if (strlen(s) >= sizeof buf)
        return false;
    strcpy(buf, s);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (o->n_hidden == MAX_LAYERS - 1 || !parse_i64(tok, 1, &o->hidden[o->n_hidden]) ||
            o->hidden[o->n_hidden] > (1 << 20))
            return false;
        o->n_hidden++;
    }
    return true;
}

static ge2_optimizer_config optimizer_config(const options *o)
{
    ge2_optimizer_config c = ge2_optimizer_defaults(o->optimizer);
    if (o->lr >= 0)
        c.lr = o->lr;
    if (o->weight_decay >= 0)
        c.weight_decay = o->weight_decay;
    c.momentum = o->momentum;
    return c;
}

enum {
    OPT_NO_SHUFFLE = 256,
    OPT_PLAN_REPORT,
    OPT_KERNEL_REPORT,
    OPT_WEIGHT_DECAY,
    OPT_NO_CAPTURE,
    OPT_DISABLE_FUSIONS,
    OPT_NO_AUTOTUNE,
    OPT_KERNEL_CACHE,
    OPT_DUMP_PASSES,
    OPT_HELP
};

/* 0: run; -1: --help printed; 2: bad flag (message printed). */
static int parse_args(int argc, char **argv, options *o)
{
    *o = (options){.device = GE2_DEVICE_AUTO,
                   .data = "/usr/share/datasets/fashion-mnist",
                   .n_hidden = 2,
                   .hidden = {256, 128},
                   .act = GE2_ACT_RELU,
                   .batch = 64,
                   .epochs = 10,
                   .steps = -1,
                   .optimizer = GE2_OPT_ADAM,
                   .lr = -1,
                   .momentum = 0,
                   .weight_decay = -1,
                   .seed = 1,
                   .shuffle = true,
                   .compile = ge2_compile_defaults()};
    static const struct option longopts[] = {
        {"device", required_argument, NULL, 'd'},   {"data", required_argument, NULL, 'D'},
        {"hidden", required_argument, NULL, 'h'},   {"act", required_argument, NULL, 'a'},
        {"batch", required_argument, NULL, 'b'},    {"epochs", required_argument, NULL, 'e'},
        {"steps", required_argument, NULL, 's'},    {"optimizer", required_argument, NULL, 'o'},
        {"lr", required_argument, NULL, 'l'},       {"momentum", required_argument, NULL, 'm'},
        {"weight-decay", required_argument, NULL, OPT_WEIGHT_DECAY},
        {"seed", required_argument, NULL, 'S'},     {"no-shuffle", no_argument, NULL, OPT_NO_SHUFFLE},
        {"init", required_argument, NULL, 'i'},     {"save", required_argument, NULL, 'w'},
        {"resume", required_argument, NULL, 'r'},   {"plan-report", no_argument, NULL, OPT_PLAN_REPORT},
        {"kernel-report", no_argument, NULL, OPT_KERNEL_REPORT},
        {"no-capture", no_argument, NULL, OPT_NO_CAPTURE},
        {"disable-fusions", required_argument, NULL, OPT_DISABLE_FUSIONS},
        {"no-autotune", no_argument, NULL, OPT_NO_AUTOTUNE},
        {"kernel-cache", required_argument, NULL, OPT_KERNEL_CACHE},
        {"dump-passes", no_argument, NULL, OPT_DUMP_PASSES},
        {"help", no_argument, NULL, OPT_HELP},      {NULL, 0, NULL, 0}};
    opterr = 0; /* our own one-line messages */
    int c, index;
    while ((c = getopt_long(argc, argv, ":", longopts, &index)) != -1) {
        const char *flag = c == '?' || c == ':' ? argv[optind - 1] : NULL;
        int64_t i64;
        switch (c) {
        case 'd':
            if (!strcmp(optarg, "cpu"))
                o->device = GE2_DEVICE_CPU;
            else if (!strcmp(optarg, "cuda"))
                o->device = GE2_DEVICE_CUDA;
            else if (!strcmp(optarg, "auto"))
                o->device = GE2_DEVICE_AUTO;
            else
                return fail(2, "--device: expected cpu, cuda or auto, got '%s'", optarg);
            break;
        case 'D':
            o->data = optarg;
            break;
        case 'h':
            if (!parse_hidden(optarg, o))
                return fail(2, "--hidden: expected up to %d comma-separated widths in [1, 1048576], got '%s'",
                            MAX_LAYERS - 1, optarg);
            break;
        case 'a':
            if (ge2_activation_parse(optarg, &o->act) != GE2_OK || o->act == GE2_ACT_NONE)
                return fail(2, "--act: expected relu, tanh, gelu or sigmoid, got '%s'", optarg);
            break;
        case 'b':
        case 'e':
        case 's':
            if (!parse_i64(optarg, c == 's' ? 0 : 1, &i64) || i64 > INT32_MAX)
                return fail(2, "--%s: expected a %s integer, got '%s'", longopts[index].name,
                            c == 's' ? "non-negative" : "positive", optarg);
            *(c == 'b' ? &o->batch : c == 'e' ? &o->epochs : &o->steps) = i64;
            break;
        case 'o':
            if (ge2_optimizer_parse(optarg, &o->optimizer) != GE2_OK)
                return fail(2, "--optimizer: expected sgd, adam or adamw, got '%s'", optarg);
            break;
        case 'l':
        case 'm':
        case OPT_WEIGHT_DECAY:
            if (!parse_double(optarg, c == 'l' ? &o->lr : c == 'm' ? &o->momentum : &o->weight_decay))
                return fail(2, "--%s: expected a non-negative number, got '%s'", longopts[index].name, optarg);
            break;
        case 'S':
            if (!parse_i64(optarg, 0, &i64))
                return fail(2, "--seed: expected a non-negative integer, got '%s'", optarg);
            o->seed = (uint64_t)i64;
            break;
        case OPT_NO_SHUFFLE:
            o->shuffle = false;
            break;
        case 'i':
            o->init = optarg;
            break;
        case 'w':
            o->save = optarg;
            break;
        case 'r':
            o->resume = optarg;
            break;
        case OPT_PLAN_REPORT:
            o->plan_report = true;
            break;
        case OPT_KERNEL_REPORT:
            o->kernel_report = true;
            break;
        case OPT_NO_CAPTURE:
            o->compile.disable_capture = true;
            break;
        case OPT_DISABLE_FUSIONS:
            o->compile.disable_fusions = optarg;
            break;
        case OPT_NO_AUTOTUNE:
            o->compile.autotune = false;
            break;
        case OPT_KERNEL_CACHE:
            o->compile.kernel_cache = optarg;
            break;
        case OPT_DUMP_PASSES:
            o->compile.dump = stdout;
            break;
        case OPT_HELP:
            usage(stdout);
            return -1;
        default:
            if (c == ':')
                return fail(2, "%s needs a value (see --help)", flag);
            return fail(2, "unknown flag '%s' (see --help)", flag);
        }
    }
    if (optind < argc)
        return fail(2, "unexpected argument '%s' (see --help)", argv[optind]);
    if (o->init && o->resume)
        return fail(2, "--init and --resume both set parameters: give one");
    if (o->momentum != 0 && o->optimizer != GE2_OPT_SGD)
        return fail(2, "--momentum applies to --optimizer sgd only");
    ge2_optimizer_config oc = optimizer_config(o);
    if (ge2_opt_validate(&oc) != GE2_OK)
        return fail(2, "%s", ge2_last_error());
    return 0;
}

/* ------------------------------------------------------------------ model */

typedef struct mlp {
    ge2_graph *graph;
    ge2_tensor *x;      /* [B, 784] */
    ge2_tensor *labels; /* [B] i32 */
    ge2_tensor *loss, *correct;
} mlp;

static ge2_status build_mlp(const options *o, const ge2_optimizer_config *opt, mlp *m)
{
    TRY(ge2_graph_new(&m->graph));
    TRY(ge2_graph_set_seed(m->graph, o->seed));
    TRY(ge2_input(m->graph, "x", GE2_F32, ge2_shape2(o->batch, N_FEATURES), &m->x));
    TRY(ge2_label(m->graph, "labels", GE2_I32, ge2_shape1(o->batch), &m->labels));
    ge2_tensor *h = m->x;
    int64_t in = N_FEATURES;
    for (int layer = 0; layer <= o->n_hidden; layer++) {
        bool last = layer == o->n_hidden;
        int64_t out = last ? N_CLASSES : o->hidden[layer];
        char wname[32], bname[32];
        snprintf(wname, sizeof wname, "fc%d.weight", layer + 1);
        snprintf(bname, sizeof bname, "fc%d.bias", layer + 1);
        ge2_tensor *w, *b;
        TRY(ge2_parameter(m->graph, wname, GE2_F32, ge2_shape2(out, in),
                          (ge2_init){GE2_INIT_LINEAR_DEFAULT, 0, 0, 0}, &w));
        TRY(ge2_parameter(m->graph, bname, GE2_F32, ge2_shape1(out), (ge2_init){GE2_INIT_LINEAR_DEFAULT, 0, 0, in},
                          &b));
        TRY(ge2_linear(m->graph, h, w, b, last ? GE2_ACT_NONE : o->act, 0.0f, &h));
        in = out;
    }
    TRY(ge2_cross_entropy(m->graph, h, m->labels, 0.0f, &m->loss));
    TRY(ge2_accuracy(m->graph, h, m->labels, &m->correct));
    TRY(ge2_mark_output(m->graph, m->correct));
    TRY(ge2_backward(m->graph, m->loss));
    TRY(ge2_optimizer(m->graph, opt));
    return GE2_OK;
}

/* --------------------------------------------------------------- progress */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Metrics of the epoch so far: whatever has been read back. */
typedef struct progress {
    ge2_metrics sum;
    double start, last_draw;
    bool tty;
} progress;

static ge2_status progress_take(ge2_program *program, progress *p)
{
    ge2_metrics m;
    TRY(ge2_program_take_metrics(program, GE2_MODE_TRAIN, &m));
    p->sum.steps += m.steps;
    p->sum.loss_sum += m.loss_sum;
    p->sum.metric_sum += m.metric_sum;
    p->sum.examples += m.examples;
    return GE2_OK;
}

static void progress_print(const progress *p, int64_t epoch, int64_t epochs, int64_t batch, int64_t batches,
                           bool done)
{
    double loss = p->sum.steps ? p->sum.loss_sum / (double)p->sum.steps : 0.0;
    double acc = p->sum.examples ? p->sum.metric_sum / (double)p->sum.examples : 0.0;
    double secs = now_s() - p->start;
    double rate = secs > 0 ? (double)p->sum.examples / secs : 0.0;
    if (p->tty) {
        enum { WIDTH = 30 };
        int fill = batches ? (int)(WIDTH * batch / batches) : WIDTH;
        char bar[WIDTH + 1];
        for (int i = 0; i < WIDTH; i++)
            bar[i] = i < fill ? '=' : ' ';
        bar[WIDTH] = '\0';
        printf("\repoch %lld/%lld [%s] loss %.4f acc %.4f %.0f ex/s", (long long)epoch + 1, (long long)epochs, bar,
               loss, acc, rate);
        if (done)
            printf(" %.1f s\n", secs);
        fflush(stdout);
    } else if (done) {
        printf("epoch %lld/%lld: loss %.4f train accuracy %.4f %.0f examples/s %.1f s\n", (long long)epoch + 1,
               (long long)epochs, loss, acc, rate, secs);
        fflush(stdout);
    }
}

/* --------------------------------------------------------------- training */

typedef struct run {
    const options *o;
    ge2_program *program;
    mlp *m;
    ge2_resume_state pos; /* where the next training batch comes from */
    int64_t steps_done;   /* optimizer steps in this run */
} run;

static bool step_limit_hit(const run *r)
{
    return r->o->steps >= 0 && r->steps_done >= r->o->steps;
}

/* One step of mode on the batcher's next batch, gathered straight into the
 * program's feed buffers: the batch is copied once, from the data set, and
 * the step uploads it without copying. batch->size is 0, and nothing runs,
 * once the epoch is exhausted. */
static ge2_status step_next_batch(run *r, ge2_batcher *b, ge2_mode mode, ge2_batch *batch)
{
    int64_t size = ge2_batcher_next_size(b);
    batch->size = 0;
    if (size == 0)
        return GE2_OK;
    ge2_feed feeds[2] = {{r->m->x, NULL, ge2_shape2(size, N_FEATURES)}, {r->m->labels, NULL, ge2_shape1(size)}};
    void *buf[2];
    TRY(ge2_program_feed_buffers(r->program, mode, feeds, 2, buf));
    ge2_batcher_next_into(b, buf[0], buf[1], batch);
    feeds[0].data = buf[0];
    feeds[1].data = buf[1];
    return ge2_program_step(r->program, mode, feeds, 2);
}

static ge2_status train(run *r, const ge2_dataset *train_set)
{
    const options *o = r->o;
    ge2_batcher_options bo = {.batch_size = o->batch, .shuffle = o->shuffle, .seed = r->pos.data_seed,
                              .drop_last = false};
    ge2_batcher *b;
    ge2_status st = ge2_batcher_new(train_set, &bo, &b);
    if (st != GE2_OK)
        return st;
    int64_t batches = ge2_batcher_batches_per_epoch(b);
    for (int64_t epoch = r->pos.epoch; epoch < o->epochs && st == GE2_OK && !step_limit_hit(r); epoch++) {
        st = ge2_batcher_seek(b, epoch, epoch == r->pos.epoch ? r->pos.batch_in_epoch : 0);
        progress p = {.start = now_s(), .tty = isatty(STDOUT_FILENO)};
        ge2_batch batch;
        int64_t ran = 0;
        while (st == GE2_OK && !step_limit_hit(r)) {
            st = step_next_batch(r, b, GE2_MODE_TRAIN, &batch);
            if (batch.size == 0)
                break;
            r->steps_done++;
            ran++;
            if (st == GE2_OK && p.tty && now_s() - p.last_draw > 0.1) {
                st = progress_take(r->program, &p);
                progress_print(&p, epoch, o->epochs, batch.index + 1, batches, false);
                p.last_draw = now_s();
            }
        }
        ge2_batcher_position(b, &r->pos.epoch, &r->pos.batch_in_epoch);
        if (st == GE2_OK && ran > 0) {
            st = ge2_program_sync(r->program);
            if (st == GE2_OK)
                st = progress_take(r->program, &p);
            if (st == GE2_OK)
                progress_print(&p, epoch, o->epochs, r->pos.batch_in_epoch, batches, true);
        }
    }
    ge2_batcher_free(b);
    return st;
}

/* Test-set accuracy under the EVAL mode; the last partial batch gets its own
 * key. *steps and *examples say what the read-back metrics cover. */
static ge2_status evaluate(run *r, const ge2_dataset *test_set, ge2_metrics *m, int64_t *steps)
{
    ge2_batcher_options bo = {.batch_size = r->o->batch, .shuffle = false, .drop_last = false};
    ge2_batcher *b;
    ge2_status st = ge2_batcher_new(test_set, &bo, &b);
    if (st == GE2_OK)
        st = ge2_program_take_metrics(r->program, GE2_MODE_EVAL, m); /* start from zero */
    ge2_batch batch;
    *steps = 0;
    while (st == GE2_OK) {
        st = step_next_batch(r, b, GE2_MODE_EVAL, &batch);
        if (batch.size == 0)
            break;
        (*steps)++;
    }
    ge2_batcher_free(b);
    if (st == GE2_OK)
        st = ge2_program_sync(r->program);
    if (st == GE2_OK)
        st = ge2_program_take_metrics(r->program, GE2_MODE_EVAL, m);
    return st;
}

static void describe(const options *o, const ge2_optimizer_config *c, ge2_device device)
{
    printf("%s: %s, model 784", progname, ge2_device_name(device));
    for (int i = 0; i < o->n_hidden; i++)
        printf("-%lld", (long long)o->hidden[i]);
    printf("-10 %s, %s lr %g, batch %lld, %lld epochs\n", ge2_activation_name(o->act), ge2_optimizer_name(c->kind),
           c->lr, (long long)o->batch, (long long)o->epochs);
}

/* Everything after flag parsing; returns the exit code. */
static int train_and_test(const options *o, ge2_context *ctx, const ge2_dataset *train_set,
                          const ge2_dataset *test_set)
{
    ge2_optimizer_config oc = optimizer_config(o);
    mlp m = {0};
    ge2_program *program = NULL;
    int code = 0;
    ge2_compile_options co = o->compile;
    if (build_mlp(o, &oc, &m) != GE2_OK || ge2_compile(ctx, m.graph, &co, &program) != GE2_OK) {
        code = fail_ge2();
        goto done;
    }
    run r = {.o = o, .program = program, .m = &m, .pos = {0, 0, o->seed}};
    if ((o->init && ge2_checkpoint_load_parameters(program, o->init) != GE2_OK) ||
        (o->resume && ge2_checkpoint_load(program, o->resume, &r.pos) != GE2_OK)) {
        code = fail_ge2();
        goto done;
    }
    describe(o, &oc, ge2_context_device(ctx));
    if (train(&r, train_set) != GE2_OK ||
        (o->save && ge2_checkpoint_save(program, o->save, &r.pos) != GE2_OK)) {
        code = fail_ge2();
        goto done;
    }
    ge2_metrics em;
    int64_t eval_steps;
    if (evaluate(&r, test_set, &em, &eval_steps) != GE2_OK) {
        code = fail_ge2();
        goto done;
    }
    if (em.steps != eval_steps || em.examples != test_set->n) {
        code = fail(1, "evaluation metrics cover %lld of %lld steps, %lld of %lld examples", (long long)em.steps,
                    (long long)eval_steps, (long long)em.examples, (long long)test_set->n);
        goto done;
    }
    if (o->plan_report) {
        if (ge2_program_plan_report(program, stdout) != GE2_OK ||
            ge2_program_plan_svg(program, GE2_MODE_TRAIN, "plan.svg") != GE2_OK) {
            code = fail_ge2();
            goto done;
        }
        printf("plan svg: plan.svg\n");
    }
    /* The train key exists only if this run trained (--steps 0 evaluates only). */
    if (o->kernel_report &&
        ((ge2_program_launch_count(program, GE2_MODE_TRAIN) > 0 &&
          ge2_program_kernel_report(program, GE2_MODE_TRAIN, stdout) != GE2_OK) ||
         ge2_program_kernel_report(program, GE2_MODE_EVAL, stdout) != GE2_OK)) {
        code = fail_ge2();
        goto done;
    }
    int64_t correct = (int64_t)(em.metric_sum + 0.5);
    printf("test accuracy: %.4f (%lld/%lld)\n", (double)correct / (double)test_set->n, (long long)correct,
           (long long)test_set->n);
done:
    ge2_program_free(program);
    ge2_graph_free(m.graph);
    return code;
}

int main(int argc, char **argv)
{
    /* `bazel run` starts us in the runfiles tree: resolve the user's relative
     * paths (--data, --save, plan.svg, ...) from where they ran it. */
    const char *cwd = getenv("BUILD_WORKING_DIRECTORY");
    if (cwd && chdir(cwd) != 0)
        return fail(1, "cannot enter %s: %s", cwd, strerror(errno));
    options o;
    int parsed = parse_args(argc, argv, &o);
    if (parsed)
        return parsed < 0 ? 0 : parsed;
    ge2_dataset *train_set = NULL, *test_set = NULL;
    ge2_context *ctx = NULL;
    int code;
    if (ge2_dataset_load_fashion_mnist(o.data, GE2_SPLIT_TRAIN, &train_set) != GE2_OK ||
        ge2_dataset_load_fashion_mnist(o.data, GE2_SPLIT_TEST, &test_set) != GE2_OK ||
        ge2_context_new(o.device, &ctx) != GE2_OK)
        code = fail_ge2();
    else if (o.batch > test_set->n)
        code = fail(2, "--batch %lld exceeds the %lld test examples", (long long)o.batch, (long long)test_set->n);
    else
        code = train_and_test(&o, ctx, train_set, test_set);
    ge2_context_free(ctx);
    ge2_dataset_free(train_set);
    ge2_dataset_free(test_set);
    return code;
}
