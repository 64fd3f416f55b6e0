/* What the example programs' command lines share: number parsing, the
 * context a user's --device asks for, messages before a distributed job is
 * joined, and the training curve a --log-file records. */
#ifndef GE2_EXAMPLES_CLI_H
#define GE2_EXAMPLES_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include "ge2/ge2.h"

/* A whole decimal integer in [lo, hi]; false for anything else. */
bool cli_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
/* A finite number in [lo, hi]; false for anything else. */
bool cli_parse_f64(const char *s, double lo, double hi, double *out);

/* ge2_context_new, with the message a command-line user needs when there
 * is no CUDA device (--device cpu, not the C API's GE2_DEVICE_CPU). */
ge2_status cli_context_new(ge2_device device, ge2_context **ctx);

/* --dist-timeout's default: how long a rank waits for the others, far
 * longer than any step's collective and far shorter than a stalled job
 * should hold its cores. */
#define CLI_DIST_TIMEOUT_S 300.0

/* "rank N: " when mpirun started this process (Open MPI's environment),
 * else "": flag errors come before the job is joined, but every rank
 * prints them. */
const char *cli_rank_prefix(void);

/* Whether a training loss sum that just arrived is finite; if not, an
 * error naming the step (first_step, 1-based, and the count of steps that
 * arrived together) and what to try. */
ge2_status cli_check_loss(double loss_sum, int64_t first_step, int64_t steps);

/* --log-file: the training curve, a row per log line and per evaluation,
 * written and flushed as it goes. PATH ending in ".csv" is CSV with a
 * header (step,kind,loss,accuracy,lr,RATE); anything else JSON lines
 * ({"step": 10, "kind": "train", "loss": 0.5, ...}). A value that is NaN
 * is left out (an empty CSV field). tools/plot_log draws either. */
typedef struct cli_log cli_log;
typedef struct cli_log_row {
    int64_t step;     /* optimizer steps done */
    const char *kind; /* "train" (the mean over the steps since the last row), "val", "test", "train_eval" */
    double loss, accuracy, lr, rate; /* rate: the unit cli_log_open named, per second */
} cli_log_row;
/* rate_name: "examples_per_s" or "tokens_per_s". */
ge2_status cli_log_open(const char *path, const char *rate_name, cli_log **out);
ge2_status cli_log_write(cli_log *log, const cli_log_row *row);
/* NULL-safe; closes the file. */
void cli_log_close(cli_log *log);

/* The row of a log: all NaN but the step and kind. */
cli_log_row cli_log_row_of(int64_t step, const char *kind);

#endif /* GE2_EXAMPLES_CLI_H */
