/* What ge2's Fashion-MNIST trainers share (train_mlp, train_cnn): the
 * common flags, the training loop, evaluation with the eval key,
 * checkpoints and reports. A trainer supplies its model through a
 * trainer_spec: its own flags, how to build the graph, a one-line
 * description.
 *
 * The loop never reads the loss synchronously: metrics arrive through
 * ge2_program_take_metrics, and the host waits only at epoch ends. The last
 * line printed is exactly "test accuracy: 0.XXXX (N/10000)". Errors are one
 * line on stderr; exit 2 for a bad flag, 1 for anything else.
 *
 * With --distributed (under mpirun, one process per GPU) every rank trains
 * on its shard of each epoch and the gradients are averaged inside the
 * step (ge2/dist.h); rank 0 prints the job's training figures and its own
 * evaluation (the parameters are every rank's), and writes the checkpoint.
 * An error on any rank ends every rank, with the rank named. */
#ifndef GE2_EXAMPLES_TRAINER_H
#define GE2_EXAMPLES_TRAINER_H

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>

#include "ge2/ge2.h"

/* Returns a failing ge2 call's status from the enclosing function. */
#define TRY(call)                        \
    do {                                 \
        ge2_status try_ = (call);        \
        if (try_ != GE2_OK)              \
            return try_;                 \
    } while (0)

/* getopt vals of a trainer's own flags start here */
#define TRAINER_MODEL_FLAG 1000
#define TRAINER_FEATURES 784 /* 28 × 28 pixels / 255 */
#define TRAINER_CLASSES 10

/* The flags every trainer takes. */
typedef struct trainer_options {
    ge2_device device;
    const char *data;
    int64_t batch, epochs, steps; /* steps -1: no limit; 0: evaluate only */
    ge2_optimizer_kind optimizer;
    double lr, momentum, weight_decay; /* < 0: the optimizer's default */
    double label_smoothing;            /* the loss's, as PyTorch's CrossEntropyLoss(label_smoothing=) */
    /* CONSTANT, or COSINE from lr to min_lr over every step of --epochs */
    ge2_schedule_kind schedule;
    double min_lr;
    uint64_t seed;
    bool shuffle, plan_report, kernel_report;
    const char *init, *save, *resume;
    ge2_compile_options compile; /* --precision, --no-capture, --disable-fusions, --no-autotune, --kernel-cache, --dump-passes */
    /* --distributed: data parallel over the ranks mpirun started; --batch
     * is each rank's, the job's batch is batch x ranks */
    bool distributed;
    double bucket_mb; /* --bucket-mb: the all-reduce buckets' MiB; 0: the optimizer's default */
    int rank, world;  /* 0 and 1 without --distributed */
    /* --log-interval: a progress line every N steps; 0: one per epoch; -1
     * (not given): 100 on the CPU, 0 on CUDA */
    int64_t log_interval;
    const char *log_file; /* --log-file: the training curve (examples/cli.h) */
    double dist_timeout_s; /* --dist-timeout; 0: CLI_DIST_TIMEOUT_S */
    /* --steps-per-launch: steps per ge2_program_run over the training set
     * the program keeps; 0: the rest of the epoch; 1: the batcher feeds
     * each step (ge2_program_step) */
    int64_t steps_per_launch;
} trainer_options;

/* What a trainer's build gives back. x holds a batch of images in any
 * shape whose first dim is the batch ([B, 784], [B, 1, 28, 28]); the loop
 * feeds the images in their stored order. */
typedef struct trainer_model {
    ge2_graph *graph;
    ge2_tensor *x;
    ge2_tensor *labels; /* [B] i32 */
    ge2_tensor *loss;   /* mean cross-entropy */
    ge2_tensor *correct; /* the accuracy metric, a marked output */
} trainer_model;

typedef struct trainer_spec {
    const char *name;    /* the program's name, in messages */
    const char *summary; /* usage's second line */
    /* usage lines of the model's flags, and what --init and
     * --disable-fusions take, in the trainer's words */
    const char *model_usage, *init_names, *fusion_names;
    int64_t default_epochs;
    ge2_schedule_kind default_schedule;
    ge2_optimizer_kind default_optimizer;
    double default_weight_decay; /* < 0: the optimizer's own default */
    double default_label_smoothing;
    const struct option *model_flags; /* NULL-terminated; their vals >= TRAINER_MODEL_FLAG */
    void *model;                      /* the trainer's own settings, handed back below */
    /* One model flag: 0 taken, 2 bad (message printed by trainer_fail). */
    int (*parse_flag)(void *model, int flag, const char *arg);
    /* The training graph, its backward and its optimizer. */
    ge2_status (*build)(const void *model, const trainer_options *o, const ge2_optimizer_config *opt,
                        trainer_model *m);
    /* "model 784-256-128-10 relu" and the like. */
    void (*describe)(const void *model, FILE *out);
} trainer_spec;

/* One line on stderr ("<name>: ..."); returns code so callers can `return trainer_fail(...)`. */
int trainer_fail(const trainer_spec *spec, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Parses argv, loads the data, trains, evaluates; returns the exit code. */
int trainer_main(int argc, char **argv, const trainer_spec *spec);

#endif /* GE2_EXAMPLES_TRAINER_H */
