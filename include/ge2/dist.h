/* ge2 data parallel: one process per GPU (or per CPU rank), started by
 * Open MPI's mpirun, every rank running the same compiled program on its own
 * shard of each batch.
 *
 *   mpirun -np 2 train_mlp --distributed ...
 *
 * ge2_dist_init joins the job (MPI bootstraps it; without mpirun it is a job
 * of one rank) and, on a machine with GPUs, makes GPU local_rank % count
 * this process's device. Its process group (ge2_dist_collective) goes into
 * ge2_compile_options.collective; an optimizer config with data_parallel
 * then sums every gradient over the ranks inside the step (NCCL on CUDA,
 * enqueued on the step's stream and captured in its CUDA Graph; MPI on the
 * CPU backend) and the update averages them, so the ranks' parameters stay
 * identical with no broadcast per step.
 *
 * The rest is what a trainer around it needs: parameters from rank 0 at the
 * start (ge2_dist_broadcast_state), global figures (ge2_dist_sum), and an
 * exit of every rank when one fails (ge2_dist_abort). Host collectives,
 * and a program's waits for the device, that take longer than the timeout
 * fail instead of hanging, naming the rank; NCCL's set-up calls that wait
 * for every peer end the process when they take longer.
 *
 * Several machines: the same command with mpirun's --hostfile;
 * docs/data-parallel.md lists the NCCL environment a cluster needs.
 */
#ifndef GE2_DIST_H
#define GE2_DIST_H

#include "ge2/extension.h"
#include "ge2/ge2.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ge2_dist ge2_dist;

typedef struct ge2_dist_options {
    /* A collective (host or device) that has not completed after this many
     * seconds fails with a message naming the rank; the trainer then aborts
     * the job. 0: 600 s. */
    double timeout_s;
} ge2_dist_options;

ge2_dist_options ge2_dist_defaults(void);

/* Joins the MPI job this process belongs to (initializing MPI unless the
 * caller did; argc/argv may be NULL). options NULL: the defaults. */
ge2_status ge2_dist_init(int *argc, char ***argv, const ge2_dist_options *options, ge2_dist **out);
/* Leaves the job: the device communicator, then MPI if ge2_dist_init
 * initialized it. Every rank calls it. */
void ge2_dist_free(ge2_dist *dist);

int ge2_dist_rank(const ge2_dist *dist);
int ge2_dist_world(const ge2_dist *dist);
/* This rank's index among the ranks of its machine (its GPU). */
int ge2_dist_local_rank(const ge2_dist *dist);

/* The process group for ge2_compile_options.collective; it lives as long
 * as dist. */
const ge2_collective *ge2_dist_collective(ge2_dist *dist);

/* Rank 0's parameters, persistent buffers and optimizer state into every
 * rank's program (a collective: every rank calls it, between steps), so
 * ranks agree however they were initialised. */
ge2_status ge2_dist_broadcast_state(ge2_dist *dist, ge2_program *program);

/* Whether every rank runs with the same settings: names[i] is a field
 * ("--precision", "model") and values[i] this rank's value as text (up to
 * 255 characters). A collective: every rank makes the same calls, before
 * the state broadcast (which calls it too, for the pools' sizes).
 * Ranks given other flags would otherwise fail later on a mismatched
 * message size, or train different models. On a difference every rank
 * fails: the one that differs naming the field and both values, the others
 * naming that rank and the field. */
ge2_status ge2_dist_check_same(ge2_dist *dist, const char *const *names, const char *const *values, int n);
/* values[0, n) summed over the ranks, in place, the same on every rank; a
 * NULL dist (one process, as ge2_dist_rank and ge2_dist_world take it)
 * leaves them as they are. */
ge2_status ge2_dist_sum(ge2_dist *dist, double *values, int n);

/* Ends every rank of the job with exit code `code` (MPI_Abort): what a
 * rank does after printing its error, so the others, perhaps waiting in a
 * collective for it, exit too instead of hanging. */
void ge2_dist_abort(ge2_dist *dist, int code) __attribute__((noreturn));

#ifdef __cplusplus
}
#endif

#endif /* GE2_DIST_H */
