/* The shared trainer (trainer.h): flags, the training loop, evaluation,
 * checkpoints and reports; the model comes from the trainer_spec. */
#include "graph/clock.h"
#include "examples/trainer.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "data/dataset.h"
#include "examples/cli.h"
#include "ge2/dist.h"
#include "optim/optim.h"
#include "optim/optimizer_math.h"

/* The job of this run (--distributed), for messages and aborts; NULL alone. */
static ge2_dist *job;

int trainer_fail(const trainer_spec *spec, int code, const char *fmt, ...)
{
    /* One write of the whole line: under mpirun, what the launcher prints
     * when the job aborts must not land inside it. */
    char what[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (job && ge2_dist_world(job) > 1)
        fprintf(stderr, "%s: rank %d: %s\n", spec->name, ge2_dist_rank(job), what);
    else /* (under mpirun, before the job is joined: the rank from the launcher) */
        fprintf(stderr, "%s: %s%s\n", spec->name, job ? "" : cli_rank_prefix(), what);
    /* End every rank now: the others may wait in a collective for this
     * one, and freeing the program first would wait for the device, where
     * an all-reduce may never finish. */
    if (job && ge2_dist_world(job) > 1)
        ge2_dist_abort(job, code);
    return code;
}

static int fail_ge2(const trainer_spec *spec)
{
    return trainer_fail(spec, 1, "%s", ge2_last_error());
}

static void usage(const trainer_spec *spec, FILE *out)
{
    char weight_decay[64] = "the optimizer's default: adamw 0.01, else 0";
    if (spec->default_weight_decay >= 0)
        snprintf(weight_decay, sizeof weight_decay, "%g", spec->default_weight_decay);
    fprintf(out,
            "usage: %s [flags]\n"
            "%s\n"
            "  --device cpu|cuda|auto   where to run (auto)\n"
            "  --data DIR               Fashion-MNIST IDX files, plain or .gz (/usr/share/datasets/fashion-mnist)\n"
            "%s"
            "  --batch N                examples per step (64)\n"
            "  --epochs N               passes over the training set (%lld)\n"
            "  --steps N                stop after N optimizer steps in this run (no limit)\n"
            "  --optimizer NAME         sgd|adam|adamw (%s)\n"
            "  --lr X                   learning rate (the optimizer's PyTorch default: adam/adamw 0.001, sgd 0.01)\n"
            "  --momentum X             SGD momentum (0)\n"
            "  --weight-decay X         weight decay (%s)\n"
            "  --label-smoothing X      the cross-entropy's, in [0, 1) as PyTorch's (%g)\n"
            "  --schedule NAME          constant|cosine: the learning rate over the epochs (%s)\n"
            "  --min-lr X               cosine: the learning rate it ends at (0)\n"
            "  --seed N                 seed of the initial weights and the data order (1)\n"
            "  --no-shuffle             batches are consecutive slices of the training set from image 0\n"
            "  --init FILE              initial parameters from a safetensors file (%s)\n"
            "  --save FILE              write a checkpoint (safetensors) when training stops\n"
            "  --resume FILE            continue from a checkpoint, including the data order\n"
            "  --log-interval N         a progress line every N steps (default: 100 on the CPU; on CUDA 0, a line\n"
            "                           per epoch); on a terminal the line updates in place\n"
            "  --log-file FILE          write the training curve (each log line and the test evaluation) to FILE:\n"
            "                           CSV when FILE ends in .csv, else JSON lines; tools/plot_log draws it\n"
            "  --plan-report            print the memory plan report and write plan.svg\n"
            "  --kernel-report          print which kernel each node of the train and eval steps ran\n"
            "                           (GPU GEMMs: cuBLASLt algorithm or ge2's tiled GEMM, tuned once per shape)\n"
            "  --precision P            the GEMMs' arithmetic: fp32 (default), tf32 (CUDA), bf16 or fp16 (operands\n"
            "                           rounded to bf16 or fp16, fp32 sums; fp16 with dynamic loss scaling;\n"
            "                           docs/mixed-precision.md)\n"
            "  --no-capture             CUDA: run every step eagerly instead of replaying a captured graph\n"
            "  --disable-fusions LIST   fusion patterns to leave out: %s (none)\n"
            "  --no-autotune            CUDA: take cuBLASLt's first heuristic GEMM instead of timing candidates\n"
            "  --kernel-cache FILE      where tuned GEMM choices are kept (~/.cache/ge2/kernels.txt; '': none)\n"
            "  --dump-passes            print each compile pass's result (verify, fuse, kernels, schedule, plan)\n"
            "  --time-launches          time each launch (CUDA: eager steps); the kernel report gives their mean\n"
            "                           us per step (use with --steps, so the last train key is the full batch)\n"
            "  --distributed            data parallel over the ranks mpirun starts, one per GPU:\n"
            "                           mpirun -np 2 %s --distributed ... (--batch is per rank)\n"
            "  --bucket-mb MB           --distributed: gradient MiB one all-reduce gathers (25, DDP's bucket_cap_mb)\n"
            "  --dist-timeout S         --distributed: seconds a rank waits for the others before it fails (300)\n"
            "  --steps-per-launch K     train K steps per call over the training set the program keeps\n"
            "                           (ge2_program_run; 0, the default: an epoch; 1: the batcher feeds each\n"
            "                           step); the same batches and results either way\n"
            "  --device-loop            CUDA: run each call's full batches in one launch (a loop in the\n"
            "                           captured graph, batches gathered on the device)\n"
            "  --help                   this text\n",
            spec->name, spec->summary, spec->model_usage ? spec->model_usage : "", (long long)spec->default_epochs,
            ge2_optimizer_name(spec->default_optimizer), weight_decay, spec->default_label_smoothing,
            spec->default_schedule == GE2_SCHEDULE_COSINE ? "cosine" : "constant", spec->init_names,
            spec->fusion_names, spec->name);
}

/* ------------------------------------------------------------------ flags */

/* steps_per_epoch: the cosine schedule spans every step of --epochs, so a
 * run cut short by --steps and resumed follows the same curve. */
static ge2_optimizer_config optimizer_config(const trainer_options *o, int64_t steps_per_epoch)
{
    ge2_optimizer_config c = ge2_optimizer_defaults(o->optimizer);
    if (o->lr >= 0)
        c.lr = o->lr;
    if (o->weight_decay >= 0)
        c.weight_decay = o->weight_decay;
    c.momentum = o->momentum;
    c.data_parallel = o->distributed;
    c.bucket_bytes = (int64_t)(o->bucket_mb * (double)(1 << 20));
    /* fp16 trains with a GradScaler's dynamic loss scaling, as PyTorch's autocast-fp16 does */
    c.loss_scaling.dynamic = o->compile.precision == GE2_PRECISION_FP16;
    if (o->schedule == GE2_SCHEDULE_COSINE) {
        c.schedule.kind = GE2_SCHEDULE_COSINE;
        c.schedule.total_steps = o->epochs * steps_per_epoch;
        c.schedule.min_lr = o->min_lr;
    }
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
    OPT_TIME_LAUNCHES,
    OPT_SCHEDULE,
    OPT_MIN_LR,
    OPT_DISTRIBUTED,
    OPT_BUCKET_MB,
    OPT_PRECISION,
    OPT_LABEL_SMOOTHING,
    OPT_LOG_INTERVAL,
    OPT_LOG_FILE,
    OPT_DIST_TIMEOUT,
    OPT_STEPS_PER_LAUNCH,
    OPT_DEVICE_LOOP,
    OPT_HELP
};

/* 0: run; -1: --help printed; 2: bad flag (message printed). */
static int parse_args(int argc, char **argv, const trainer_spec *spec, trainer_options *o)
{
    *o = (trainer_options){.device = GE2_DEVICE_AUTO,
                   .data = "/usr/share/datasets/fashion-mnist",
                   .batch = 64,
                   .epochs = spec->default_epochs,
                   .schedule = spec->default_schedule,
                   .steps = -1,
                   .optimizer = spec->default_optimizer,
                   .lr = -1,
                   .momentum = 0,
                   .weight_decay = spec->default_weight_decay,
                   .label_smoothing = spec->default_label_smoothing,
                   .seed = 1,
                   .shuffle = true,
                   .compile = ge2_compile_defaults(),
                   .log_interval = -1,
                   .world = 1};
    static const struct option common[] = {
        {"device", required_argument, NULL, 'd'},   {"data", required_argument, NULL, 'D'},
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
        {"time-launches", no_argument, NULL, OPT_TIME_LAUNCHES},
        {"schedule", required_argument, NULL, OPT_SCHEDULE},
        {"min-lr", required_argument, NULL, OPT_MIN_LR},
        {"distributed", no_argument, NULL, OPT_DISTRIBUTED},
        {"bucket-mb", required_argument, NULL, OPT_BUCKET_MB},
        {"precision", required_argument, NULL, OPT_PRECISION},
        {"label-smoothing", required_argument, NULL, OPT_LABEL_SMOOTHING},
        {"log-interval", required_argument, NULL, OPT_LOG_INTERVAL},
        {"log-file", required_argument, NULL, OPT_LOG_FILE},
        {"dist-timeout", required_argument, NULL, OPT_DIST_TIMEOUT},
        {"steps-per-launch", required_argument, NULL, OPT_STEPS_PER_LAUNCH},
        {"device-loop", no_argument, NULL, OPT_DEVICE_LOOP},
        {"help", no_argument, NULL, OPT_HELP}};
    enum { N_COMMON = sizeof common / sizeof common[0], MAX_FLAGS = 64 };
    struct option longopts[MAX_FLAGS];
    int n = 0;
    for (int i = 0; i < N_COMMON; i++)
        longopts[n++] = common[i];
    for (int i = 0; spec->model_flags && spec->model_flags[i].name && n < MAX_FLAGS - 1; i++)
        longopts[n++] = spec->model_flags[i];
    longopts[n] = (struct option){NULL, 0, NULL, 0};
    opterr = 0; /* our own one-line messages */
    int c, index;
    while ((c = getopt_long(argc, argv, ":", longopts, &index)) != -1) {
        const char *flag = c == '?' || c == ':' ? argv[optind - 1] : NULL;
        int64_t i64;
        switch (c) {
        case 'd':
            if (ge2_device_parse(optarg, &o->device) != GE2_OK)
                return trainer_fail(spec, 2, "--device: expected cpu, cuda or auto, got '%s'", optarg);
            break;
        case 'D':
            o->data = optarg;
            break;
        case 'b':
        case 'e':
        case 's':
            if (!cli_parse_i64(optarg, c == 's' ? 0 : 1, INT32_MAX, &i64))
                return trainer_fail(spec, 2, "--%s: expected a %s integer, got '%s'", longopts[index].name,
                            c == 's' ? "non-negative" : "positive", optarg);
            *(c == 'b' ? &o->batch : c == 'e' ? &o->epochs : &o->steps) = i64;
            break;
        case 'o':
            if (ge2_optimizer_parse(optarg, &o->optimizer) != GE2_OK)
                return trainer_fail(spec, 2, "--optimizer: expected sgd, adam or adamw, got '%s'", optarg);
            break;
        case 'l':
        case 'm':
        case OPT_WEIGHT_DECAY:
            if (!cli_parse_f64(optarg, 0, 1e30, c == 'l' ? &o->lr : c == 'm' ? &o->momentum : &o->weight_decay))
                return trainer_fail(spec, 2, "--%s: expected a non-negative number, got '%s'", longopts[index].name,
                                    optarg);
            break;
        case 'S':
            if (!cli_parse_i64(optarg, 0, INT64_MAX, &i64))
                return trainer_fail(spec, 2, "--seed: expected a non-negative integer, got '%s'", optarg);
            o->seed = (uint64_t)i64;
            break;
        case OPT_SCHEDULE:
            if (!strcmp(optarg, "constant"))
                o->schedule = GE2_SCHEDULE_CONSTANT;
            else if (!strcmp(optarg, "cosine"))
                o->schedule = GE2_SCHEDULE_COSINE;
            else
                return trainer_fail(spec, 2, "--schedule: expected constant or cosine, got '%s'", optarg);
            break;
        case OPT_MIN_LR:
            if (!cli_parse_f64(optarg, 0, 1e30, &o->min_lr))
                return trainer_fail(spec, 2, "--min-lr: expected a non-negative number, got '%s'", optarg);
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
        case OPT_TIME_LAUNCHES:
            o->compile.time_launches = true;
            o->kernel_report = true;
            break;
        case OPT_DISTRIBUTED:
            o->distributed = true;
            break;
        case OPT_PRECISION:
            if (ge2_precision_parse(optarg, &o->compile.precision) != GE2_OK)
                return trainer_fail(spec, 2, "--precision: expected fp32, tf32, bf16 or fp16, got '%s'", optarg);
            break;
        case OPT_BUCKET_MB:
            if (!cli_parse_f64(optarg, 1.0 / 1048576.0, 1e6, &o->bucket_mb))
                return trainer_fail(spec, 2, "--bucket-mb: expected a number of MiB (at least a byte), got '%s'",
                                    optarg);
            break;
        case OPT_LABEL_SMOOTHING:
            if (!cli_parse_f64(optarg, 0, 1, &o->label_smoothing) || !(o->label_smoothing < 1))
                return trainer_fail(spec, 2, "--label-smoothing: expected a number in [0, 1), got '%s'", optarg);
            break;
        case OPT_LOG_INTERVAL:
            if (!cli_parse_i64(optarg, 0, INT32_MAX, &o->log_interval))
                return trainer_fail(spec, 2, "--log-interval: expected a non-negative integer (0: a line per epoch), "
                                    "got '%s'", optarg);
            break;
        case OPT_LOG_FILE:
            o->log_file = optarg;
            break;
        case OPT_DIST_TIMEOUT:
            if (!cli_parse_f64(optarg, 0.001, 1e6, &o->dist_timeout_s))
                return trainer_fail(spec, 2, "--dist-timeout: expected seconds in [0.001, 1e6], got '%s'", optarg);
            break;
        case OPT_STEPS_PER_LAUNCH:
            if (!cli_parse_i64(optarg, 0, INT32_MAX, &o->steps_per_launch))
                return trainer_fail(spec, 2, "--steps-per-launch: expected a non-negative integer (0: an epoch), "
                                    "got '%s'", optarg);
            break;
        case OPT_DEVICE_LOOP:
            o->compile.device_loop = true;
            break;
        case OPT_HELP:
            usage(spec, stdout);
            return -1;
        default:
            if (c >= TRAINER_MODEL_FLAG && spec->parse_flag) {
                int code = spec->parse_flag(spec->model, c, optarg);
                if (code)
                    return code;
                break;
            }
            if (c == ':')
                return trainer_fail(spec, 2, "%s needs a value (see --help)", flag);
            return trainer_fail(spec, 2, "unknown flag '%s' (see --help)", flag);
        }
    }
    if (optind < argc)
        return trainer_fail(spec, 2, "unexpected argument '%s' (see --help)", argv[optind]);
    if (o->init && o->resume)
        return trainer_fail(spec, 2, "--init and --resume both set parameters: give one");
    if (o->momentum != 0 && o->optimizer != GE2_OPT_SGD)
        return trainer_fail(spec, 2, "--momentum applies to --optimizer sgd only");
    if (o->bucket_mb > 0 && !o->distributed)
        return trainer_fail(spec, 2, "--bucket-mb applies to --distributed only");
    if (o->dist_timeout_s > 0 && !o->distributed)
        return trainer_fail(spec, 2, "--dist-timeout applies to --distributed only");
    ge2_optimizer_config oc = optimizer_config(o, 1);
    if (ge2_opt_validate(&oc) != GE2_OK)
        return trainer_fail(spec, 2, "%s", ge2_last_error());
    return 0;
}

/* --------------------------------------------------------------- training */

typedef struct run {
    const trainer_options *o;
    const ge2_optimizer_config *oc;
    ge2_program *program;
    trainer_model *m;
    ge2_resume_state pos; /* where the next training batch comes from */
    int64_t steps_done;   /* optimizer steps in this run */
    int64_t first_step;   /* optimizer steps before this run (a --resume's) */
    int64_t arrived;      /* steps of this run whose loss has come back */
    int64_t log_interval; /* resolved: > 0 a line every that many steps, 0 a line per epoch */
    cli_log *log;         /* --log-file, or NULL */
    ge2_metrics interval; /* what has arrived since the last log line (across epochs) */
    double interval_start;
    const char *name;     /* the trainer's, for notes */
    bool said_per_step[GE2_MODE_COUNT]; /* each mode's note on why its runs take a launch a step is out */
} run;


/* Metrics of the epoch so far: whatever has been read back. */
typedef struct progress {
    ge2_metrics sum;
    double start, last_draw;
    bool tty;
} progress;

static bool is_rank0(void)
{
    return !job || ge2_dist_rank(job) == 0;
}

/* Says once, on stderr, why the program's runs of mode take a launch a
 * step where the device could loop (ge2_program_run_per_step). */
static void note_per_step(run *r, ge2_mode mode)
{
    const char *why = ge2_program_run_per_step(r->program, mode);
    /* unasked (no --device-loop), CUDA going a launch a step is no news */
    if (why && r->o->compile.device_loop && !r->said_per_step[mode] && is_rank0()) {
        fprintf(stderr, "%s: note: each %s step is its own launch: %s\n", r->name,
                mode == GE2_MODE_EVAL ? "evaluation" : "training", why);
        r->said_per_step[mode] = true;
    }
}

/* Takes what has arrived, without waiting; a loss that is not finite stops
 * the run, naming the step (or the steps, when several arrived at once). */
static ge2_status progress_take(run *r, progress *p)
{
    ge2_metrics m;
    TRY(ge2_program_take_metrics(r->program, GE2_MODE_TRAIN, &m));
    if (m.first_nonfinite) /* the program's train steps are this run's */
        TRY(cli_check_loss(m.loss_sum, r->first_step + m.first_nonfinite, 1));
    TRY(cli_check_loss(m.loss_sum, r->first_step + r->arrived + 1, m.steps));
    r->arrived += m.steps;
    ge2_metrics *to[2] = {&p->sum, &r->interval};
    for (int i = 0; i < 2; i++) {
        to[i]->steps += m.steps;
        to[i]->loss_sum += m.loss_sum;
        to[i]->metric_sum += m.metric_sum;
        to[i]->examples += m.examples;
    }
    return GE2_OK;
}

/* --distributed: the epoch's figures over every rank (each rank's loss is
 * its shard's mean, so the job's is their mean). Every rank calls it at the
 * same point, the epoch's end. */
static ge2_status progress_gather(progress *p)
{
    double v[3] = {p->sum.loss_sum, p->sum.metric_sum, (double)p->sum.examples};
    TRY(ge2_dist_sum(job, v, 3));
    p->sum.loss_sum = v[0] / ge2_dist_world(job);
    p->sum.metric_sum = v[1];
    p->sum.examples = (int64_t)v[2];
    return GE2_OK;
}

static double mean_loss(const ge2_metrics *m) { return m->steps ? m->loss_sum / (double)m->steps : 0.0; }
static double accuracy(const ge2_metrics *m) { return m->examples ? m->metric_sum / (double)m->examples : 0.0; }

/* The epoch's live line (a terminal) or its closing line; figures of the
 * epoch so far. */
static void progress_print(const progress *p, int64_t epoch, int64_t epochs, int64_t batch, int64_t batches,
                           bool done)
{
    if (!is_rank0())
        return;
    double secs = ge2_now_s() - p->start;
    double rate = secs > 0 ? (double)p->sum.examples / secs : 0.0;
    if (p->tty) {
        enum { WIDTH = 30 };
        int fill = batches ? (int)(WIDTH * batch / batches) : WIDTH;
        char bar[WIDTH + 1];
        for (int i = 0; i < WIDTH; i++)
            bar[i] = i < fill ? '=' : ' ';
        bar[WIDTH] = '\0';
        printf("\repoch %lld/%lld [%s] loss %.4f acc %.4f %.0f ex/s", (long long)epoch + 1, (long long)epochs, bar,
               mean_loss(&p->sum), accuracy(&p->sum), rate);
        if (done)
            printf(" %.1f s\n", secs);
        fflush(stdout);
    } else if (done) {
        printf("epoch %lld/%lld: loss %.4f train accuracy %.4f %.0f examples/s %.1f s\n", (long long)epoch + 1,
               (long long)epochs, mean_loss(&p->sum), accuracy(&p->sum), rate, secs);
        fflush(stdout);
    }
}

/* A --log-file row of training steps m (this rank's), which took secs. */
static ge2_status log_train_row(const run *r, const ge2_metrics *m, double secs)
{
    const int64_t step = r->first_step + r->steps_done;
    cli_log_row row = cli_log_row_of(step, "train");
    row.loss = mean_loss(m);
    row.accuracy = accuracy(m);
    row.lr = ge2_schedule_lr(&r->oc->schedule, (float)r->oc->lr, step - 1);
    row.rate = secs > 0 ? (double)m->examples * r->o->world / secs : 0.0;
    return cli_log_write(r->log, &row);
}

/* A log line of the steps since the last one: every step of them arrived
 * (after a sync), so its loss is theirs (rank 0's, with several ranks). On
 * a terminal the epoch's line is redrawn instead; --log-file gets a row
 * either way. */
static ge2_status log_interval_line(run *r, progress *p, int64_t epoch, int64_t batch, int64_t batches)
{
    TRY(ge2_program_sync(r->program));
    TRY(progress_take(r, p));
    const double secs = ge2_now_s() - r->interval_start;
    const int64_t step = r->first_step + r->steps_done;
    if (is_rank0()) {
        if (p->tty)
            progress_print(p, epoch, r->o->epochs, batch, batches, false);
        else {
            printf("step %lld (epoch %lld/%lld, batch %lld/%lld): loss %.4f train accuracy %.4f%s lr %.3g %.0f "
                   "examples/s\n",
                   (long long)step, (long long)epoch + 1, (long long)r->o->epochs, (long long)batch,
                   (long long)batches, mean_loss(&r->interval), accuracy(&r->interval),
                   r->o->world > 1 ? " (rank 0's)" : "",
                   ge2_schedule_lr(&r->oc->schedule, (float)r->oc->lr, step - 1),
                   secs > 0 ? (double)r->interval.examples * r->o->world / secs : 0.0);
            fflush(stdout);
        }
        TRY(log_train_row(r, &r->interval, secs));
    }
    memset(&r->interval, 0, sizeof r->interval);
    r->interval_start = ge2_now_s();
    p->last_draw = r->interval_start;
    return GE2_OK;
}

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
    ge2_shape images = ge2_tensor_shape(r->m->x);
    images.dim[0] = size;
    ge2_feed feeds[2] = {{r->m->x, NULL, images}, {r->m->labels, NULL, ge2_shape1(size)}};
    void *buf[2];
    TRY(ge2_program_feed_buffers(r->program, mode, feeds, 2, buf));
    ge2_batcher_next_into(b, buf[0], buf[1], batch);
    feeds[0].data = buf[0];
    feeds[1].data = buf[1];
    return ge2_program_step(r->program, mode, feeds, 2);
}

/* Keeps a data set in the program for mode's ge2_program_run: the pixels
 * as bytes when the loader kept them (a quarter of the floats), shuffled
 * as the batcher would (the training set under --seed and --no-shuffle;
 * the test set in its order). */
static ge2_status keep_set(run *r, ge2_mode mode, const ge2_dataset *set, bool shuffle)
{
    const ge2_dataset_field fields[2] = {
        {r->m->labels, set->labels, GE2_I32, 0.0f},
        set->pixels ? (ge2_dataset_field){r->m->x, set->pixels, GE2_U8, GE2_PIXEL_DIVISOR}
                    : (ge2_dataset_field){r->m->x, set->images, GE2_F32, 0.0f}};
    const ge2_dataset_desc desc = {set->n, fields, 2, shuffle, r->pos.data_seed, 0};
    return ge2_program_set_dataset(r->program, mode, &desc);
}

/* Steps to the next stop of this epoch's loop, from batch `at` of
 * `batches`: --steps-per-launch (0: the epoch's rest), cut at the epoch's
 * end, --steps' limit and the next log line, so a run's end is where one
 * step at a time would print or stop. */
static int64_t launch_steps(const run *r, int64_t at, int64_t batches)
{
    int64_t k = batches - at;
    if (r->o->steps_per_launch > 0 && r->o->steps_per_launch < k)
        k = r->o->steps_per_launch;
    if (r->o->steps >= 0 && r->o->steps - r->steps_done < k)
        k = r->o->steps - r->steps_done;
    if (r->log_interval > 0 && r->log_interval - r->steps_done % r->log_interval < k)
        k = r->log_interval - r->steps_done % r->log_interval;
    return k;
}

/* How the training set is cut: this rank's shard of each epoch's order, in
 * batches of --batch, the last one partial */
static ge2_batcher_options train_batching(const trainer_options *o, uint64_t data_seed)
{
    return (ge2_batcher_options){.batch_size = o->batch, .shuffle = o->shuffle, .seed = data_seed,
                                 .drop_last = false, .rank = o->rank, .world = o->world};
}

/* The epoch's next steps from batch *at: one fed by the batcher, or (the
 * program keeping the training set) a run of launch_steps; *done of them
 * ran, 0 once the epoch is exhausted, and *at moves past them. */
static ge2_status next_steps(run *r, ge2_batcher *b, int64_t epoch, int64_t batches, int64_t *at, int64_t *done)
{
    *done = 0;
    if (r->o->steps_per_launch == 1) {
        ge2_batch batch;
        TRY(step_next_batch(r, b, GE2_MODE_TRAIN, &batch));
        *done = batch.size > 0;
        *at += *done;
        return GE2_OK;
    }
    if (*at >= batches)
        return GE2_OK;
    ge2_run launch = {.batch = r->o->batch, .epoch = epoch, .batch_in_epoch = *at, .steps = launch_steps(r, *at, batches)};
    const ge2_status st = ge2_program_run(r->program, GE2_MODE_TRAIN, &launch);
    note_per_step(r, GE2_MODE_TRAIN);
    /* the steps before a failed one ran */
    *done = launch.epoch > epoch ? batches - *at : launch.batch_in_epoch - *at;
    *at += *done;
    return st;
}

static ge2_status train(run *r, const ge2_dataset *train_set)
{
    const trainer_options *o = r->o;
    ge2_batcher_options bo = train_batching(o, r->pos.data_seed);
    ge2_batcher *b;
    ge2_status st = ge2_batcher_new(train_set, &bo, &b);
    r->interval_start = ge2_now_s();
    if (st == GE2_OK && o->steps_per_launch != 1)
        st = keep_set(r, GE2_MODE_TRAIN, train_set, o->shuffle);
    if (st != GE2_OK) {
        ge2_batcher_free(b);
        return st;
    }
    int64_t batches = ge2_batcher_batches_per_epoch(b);
    for (int64_t epoch = r->pos.epoch; epoch < o->epochs && st == GE2_OK && !step_limit_hit(r); epoch++) {
        int64_t at = epoch == r->pos.epoch ? r->pos.batch_in_epoch : 0;
        st = ge2_batcher_seek(b, epoch, at);
        /* the live bar reads metrics whenever it redraws: alone only, as
         * ranks must gather theirs at the same points */
        progress p = {.start = ge2_now_s(), .tty = isatty(STDOUT_FILENO) && o->world == 1};
        int64_t ran = 0;
        while (st == GE2_OK && !step_limit_hit(r)) {
            int64_t done;
            st = next_steps(r, b, epoch, batches, &at, &done);
            if (done == 0)
                break;
            r->steps_done += done;
            ran += done;
            if (st == GE2_OK) /* what has arrived, unwaited: a non-finite loss stops the run early */
                st = progress_take(r, &p);
            if (st == GE2_OK && r->log_interval > 0 && r->steps_done % r->log_interval == 0)
                st = log_interval_line(r, &p, epoch, at, batches);
            else if (st == GE2_OK && p.tty && ge2_now_s() - p.last_draw > 0.1) {
                progress_print(&p, epoch, o->epochs, at, batches, false);
                p.last_draw = ge2_now_s();
            }
        }
        r->pos.epoch = epoch; /* an epoch run to its end stays there: (epoch, batches) */
        r->pos.batch_in_epoch = at;
        if (st == GE2_OK && ran > 0) {
            st = ge2_program_sync(r->program);
            if (st == GE2_OK)
                st = progress_take(r, &p);
            if (st == GE2_OK && r->log_interval == 0 && is_rank0()) /* the epoch line is the log line */
                st = log_train_row(r, &p.sum, ge2_now_s() - p.start);
            if (st == GE2_OK)
                st = progress_gather(&p);
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
    if (st == GE2_OK && r->o->steps_per_launch != 1) {
        /* the test set kept too, in its order: one run over all of it */
        st = keep_set(r, GE2_MODE_EVAL, test_set, false);
        ge2_run pass = {.batch = r->o->batch, .steps = ge2_batcher_batches_per_epoch(b)};
        if (st == GE2_OK)
            st = ge2_program_run(r->program, GE2_MODE_EVAL, &pass);
        note_per_step(r, GE2_MODE_EVAL);
        *steps = st == GE2_OK ? pass.steps : 0;
    }
    while (st == GE2_OK && r->o->steps_per_launch == 1) {
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

/* A checkpoint's position in its epoch, in this run's steps: examples of
 * the one-process order over the examples a step of this run takes (batch
 * x ranks), which must divide them (a checkpoint from 2 ranks at batch 64
 * resumes on 1 at 128, or at 64 after twice the steps). Files without the
 * examples count keep their batch_in_epoch. */
static int resume_position(const trainer_spec *spec, const trainer_options *o, ge2_resume_state *pos)
{
    const int64_t per_step = o->batch * o->world;
    if (pos->examples_in_epoch == 0)
        return 0;
    if (pos->examples_in_epoch % per_step)
        return trainer_fail(spec, 2,
                            "--resume %s: the checkpoint stopped %lld examples into epoch %lld, not a whole number "
                            "of this run's steps of %lld (--batch %lld x %d rank(s))",
                            o->resume, (long long)pos->examples_in_epoch, (long long)pos->epoch + 1,
                            (long long)per_step, (long long)o->batch, o->world);
    pos->batch_in_epoch = pos->examples_in_epoch / per_step;
    return 0;
}

/* --distributed: every rank was given the same model and plan (a rank with
 * other flags would train another model, or fail on a mismatched message
 * much later). */
static ge2_status check_same_run(const trainer_spec *spec, const trainer_options *o, const ge2_optimizer_config *oc,
                                 int64_t examples)
{
    char model[256] = "", precision[16], batch[32], epochs[32], steps[32], optimizer[256], seed[32], order[16],
         data[32];
    FILE *f = fmemopen(model, sizeof model - 1, "w");
    if (f) {
        spec->describe(spec->model, f);
        fclose(f);
    }
    snprintf(precision, sizeof precision, "%s", ge2_precision_name(o->compile.precision));
    snprintf(batch, sizeof batch, "%lld", (long long)o->batch);
    snprintf(epochs, sizeof epochs, "%lld", (long long)o->epochs);
    snprintf(steps, sizeof steps, "%lld", (long long)o->steps);
    /* everything that decides the update and the all-reduces' sizes */
    snprintf(optimizer, sizeof optimizer,
             "%s lr %.9g momentum %.9g weight decay %.9g schedule %d over %lld steps to %.9g, clip %.9g, buckets of "
             "%lld bytes, loss scaling %d",
             ge2_optimizer_name(oc->kind), oc->lr, oc->momentum, oc->weight_decay, (int)oc->schedule.kind,
             (long long)oc->schedule.total_steps, oc->schedule.min_lr, oc->clip_norm, (long long)oc->bucket_bytes,
             (int)oc->loss_scaling.dynamic);
    snprintf(data, sizeof data, "%lld training examples", (long long)examples);
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)o->seed);
    snprintf(order, sizeof order, "%s", o->shuffle ? "shuffled" : "--no-shuffle");
    const char *const names[] = {"the model", "--precision", "--batch", "--epochs", "--steps", "the optimizer",
                                 "--seed", "the data order", "the data set"};
    const char *const values[] = {model, precision, batch, epochs, steps, optimizer, seed, order, data};
    return ge2_dist_check_same(job, names, values, (int)(sizeof names / sizeof names[0]));
}

/* Batches each rank takes per epoch, as the training batcher will cut them */
static int64_t steps_per_epoch(const trainer_options *o, int64_t examples)
{
    const ge2_batcher_options bo = train_batching(o, 0);
    return ge2_batcher_epoch_batches(examples, &bo);
}

/* Everything after flag parsing; returns the exit code. */
static int train_and_test(const trainer_spec *spec, const trainer_options *o, ge2_context *ctx,
                          const ge2_dataset *train_set, const ge2_dataset *test_set)
{
    ge2_optimizer_config oc = optimizer_config(o, steps_per_epoch(o, train_set->n));
    trainer_model m = {0};
    ge2_program *program = NULL;
    run r = {.o = o, .oc = &oc, .m = &m, .pos = {0, 0, o->seed, 0}, .name = spec->name};
    int code = 0;
    ge2_compile_options co = o->compile;
    co.collective = ge2_dist_collective(job);
    if (spec->build(spec->model, o, &oc, &m) != GE2_OK || ge2_compile(ctx, m.graph, &co, &program) != GE2_OK) {
        code = fail_ge2(spec);
        goto done;
    }
    r.program = program;
    if (job && check_same_run(spec, o, &oc, train_set->n) != GE2_OK) {
        code = fail_ge2(spec);
        goto done;
    }
    r.log_interval = o->log_interval >= 0 ? o->log_interval : ge2_context_device(ctx) == GE2_DEVICE_CPU ? 100 : 0;
    /* every rank reads the same files (a shared file system across
     * machines); rank 0's state then reaches all, whatever their seeds */
    if ((o->init && ge2_checkpoint_load_parameters(program, o->init) != GE2_OK) ||
        (o->resume && ge2_checkpoint_load(program, o->resume, &r.pos) != GE2_OK) ||
        (job && ge2_dist_broadcast_state(job, program) != GE2_OK)) {
        code = fail_ge2(spec);
        goto done;
    }
    if (o->resume && (code = resume_position(spec, o, &r.pos)) != 0)
        goto done;
    /* the steps of --epochs the checkpoint has not done: negative when it is past them (a damaged epoch
     * count would otherwise train nothing without a word) */
    const int64_t per_epoch = steps_per_epoch(o, train_set->n);
    const int64_t steps_left = (o->epochs - r.pos.epoch) * per_epoch - r.pos.batch_in_epoch;
    if (o->resume && (r.pos.epoch > o->epochs || steps_left < 0)) {
        code = trainer_fail(spec, 2, "--resume %s: the checkpoint is at epoch %lld, batch %lld, past --epochs %lld",
                            o->resume, (long long)r.pos.epoch + 1, (long long)r.pos.batch_in_epoch,
                            (long long)o->epochs);
        goto done;
    }
    if (o->resume && ge2_program_step_count(program, &r.first_step) != GE2_OK) {
        code = fail_ge2(spec);
        goto done;
    }
    if (o->log_file && is_rank0() &&
        cli_log_open(o->log_file, "examples_per_s", &r.log) != GE2_OK) {
        code = fail_ge2(spec);
        goto done;
    }
    if (is_rank0()) {
        printf("%s: %s, ", spec->name, ge2_device_name(ge2_context_device(ctx)));
        spec->describe(spec->model, stdout);
        printf(", %s lr %g%s, batch %lld", ge2_optimizer_name(oc.kind), oc.lr,
               oc.schedule.kind == GE2_SCHEDULE_COSINE ? " cosine" : "", (long long)o->batch);
        if (o->distributed)
            printf(" x %d rank(s)", o->world);
        printf(", %lld epochs", (long long)o->epochs);
        if (o->label_smoothing > 0)
            printf(", label smoothing %g", o->label_smoothing);
        printf("\n");
        if (o->resume && steps_left == 0)
            printf("nothing to train: the checkpoint finished all %lld epochs (raise --epochs to go on)\n",
                   (long long)o->epochs);
    }
    ge2_status st = train(&r, train_set);
    r.pos.examples_in_epoch = r.pos.batch_in_epoch * o->batch * o->world;
    if (st == GE2_OK && o->save && is_rank0())
        st = ge2_checkpoint_save(program, o->save, &r.pos);
    if (st != GE2_OK) {
        code = fail_ge2(spec);
        goto done;
    }
    if (!is_rank0()) /* rank 0 evaluates and reports; the eval key has no collective */
        goto done;
    ge2_metrics em;
    int64_t eval_steps;
    if (evaluate(&r, test_set, &em, &eval_steps) != GE2_OK) {
        code = fail_ge2(spec);
        goto done;
    }
    if (em.steps != eval_steps || em.examples != test_set->n) {
        code = trainer_fail(spec, 1, "evaluation metrics cover %lld of %lld steps, %lld of %lld examples",
                            (long long)em.steps, (long long)eval_steps, (long long)em.examples,
                            (long long)test_set->n);
        goto done;
    }
    if (o->plan_report) {
        if (ge2_program_plan_report(program, stdout) != GE2_OK ||
            ge2_program_plan_svg(program, GE2_MODE_TRAIN, "plan.svg") != GE2_OK) {
            code = fail_ge2(spec);
            goto done;
        }
        printf("plan svg: plan.svg\n");
    }
    /* The train key exists only if this run trained (--steps 0 evaluates only). */
    if (o->kernel_report &&
        ((ge2_program_launch_count(program, GE2_MODE_TRAIN) > 0 &&
          ge2_program_kernel_report(program, GE2_MODE_TRAIN, stdout) != GE2_OK) ||
         ge2_program_kernel_report(program, GE2_MODE_EVAL, stdout) != GE2_OK)) {
        code = fail_ge2(spec);
        goto done;
    }
    if (oc.loss_scaling.dynamic) {
        double scale;
        int64_t skipped;
        if (ge2_program_loss_scale(program, &scale, &skipped) != GE2_OK) {
            code = fail_ge2(spec);
            goto done;
        }
        printf("loss scale: %g, %lld step(s) skipped for inf or NaN gradients\n", scale, (long long)skipped);
    }
    int64_t correct = (int64_t)(em.metric_sum + 0.5);
    cli_log_row row = cli_log_row_of(r.first_step + r.steps_done, "test");
    row.loss = em.steps ? em.loss_sum / (double)em.steps : NAN;
    row.accuracy = (double)correct / (double)test_set->n;
    if (cli_log_write(r.log, &row) != GE2_OK) {
        code = fail_ge2(spec);
        goto done;
    }
    printf("test accuracy: %.4f (%lld/%lld)\n", (double)correct / (double)test_set->n, (long long)correct,
           (long long)test_set->n);
done:
    cli_log_close(r.log);
    ge2_program_free(program);
    ge2_graph_free(m.graph);
    return code;
}

int trainer_main(int argc, char **argv, const trainer_spec *spec)
{
    /* `bazel run` starts us in the runfiles tree: resolve the user's relative
     * paths (--data, --save, plan.svg, ...) from where they ran it. */
    const char *cwd = getenv("BUILD_WORKING_DIRECTORY");
    if (cwd && chdir(cwd) != 0)
        return trainer_fail(spec, 1, "cannot enter %s: %s", cwd, strerror(errno));
    trainer_options o;
    int parsed = parse_args(argc, argv, spec, &o);
    if (parsed)
        return parsed < 0 ? 0 : parsed;
    /* before any CUDA call: the job gives this process its GPU */
    if (o.distributed) {
        ge2_dist_options dopt = ge2_dist_defaults();
        dopt.timeout_s = o.dist_timeout_s > 0 ? o.dist_timeout_s : CLI_DIST_TIMEOUT_S;
        if (ge2_dist_init(&argc, &argv, &dopt, &job) != GE2_OK)
            return fail_ge2(spec);
        o.rank = ge2_dist_rank(job);
        o.world = ge2_dist_world(job);
    }
    ge2_dataset *train_set = NULL, *test_set = NULL;
    ge2_context *ctx = NULL;
    int code;
    if (ge2_dataset_load_fashion_mnist(o.data, GE2_SPLIT_TRAIN, &train_set) != GE2_OK ||
        ge2_dataset_load_fashion_mnist(o.data, GE2_SPLIT_TEST, &test_set) != GE2_OK ||
        cli_context_new(o.device, &ctx) != GE2_OK)
        code = fail_ge2(spec);
    else if (o.batch > test_set->n)
        code = trainer_fail(spec, 2, "--batch %lld exceeds the %lld test examples", (long long)o.batch,
                            (long long)test_set->n);
    else
        code = train_and_test(spec, &o, ctx, train_set, test_set);
    ge2_context_free(ctx);
    ge2_dataset_free(train_set);
    ge2_dataset_free(test_set);
    ge2_dist_free(job); /* (a failing rank of several has ended the job in trainer_fail) */
    job = NULL;
    return code;
}
