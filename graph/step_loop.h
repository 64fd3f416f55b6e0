/* A device loop: many steps of one captured graph key in one launch, each
 * step's batch gathered on the device from a data set kept there, each
 * step's results summed there (capture/program_loop.c makes one, the CUDA
 * backend captures and runs it, kernels/cuda/step_loop.cu does the work
 * between the steps).
 *
 * A plain description, for C and CUDA: device addresses and the constants
 * of the epoch order. What moves from step to step lives in the loop's
 * counters in device memory, so a launch of any length replays the same
 * graph.
 *
 * One iteration, in order: the gather writes the batch at (epoch,
 * batch_in_epoch) into the feeds (every example's row through
 * graph/epoch_order.h, a byte widened to f32 by the divisor, as the CPU
 * does: the same bits); the key's launches run the step; the advance adds
 * the step's results to the sums in the order the host would, counts the
 * step, moves the position and ends the loop when `remaining` reaches 0,
 * or at once after a step that read a label or id out of range (which is
 * then not counted, and the position stays at it, as the host's fold of
 * such a step fails).
 */
#ifndef GE2_GRAPH_STEP_LOOP_H
#define GE2_GRAPH_STEP_LOOP_H

#include <stdint.h>

/* Most feeds a loop gathers (the planner's GE2_MAX_FEEDS). */
#define GE2_LOOP_MAX_FIELDS 16

/* One feed's kept rows and where the step reads the feed. */
typedef struct ge2_loop_field {
    const void *rows; /* [examples][row] elements of elem_bytes (device) */
    void *feed;       /* [batch][row] of the feed's dtype (device): where the key's launches read it */
    int64_t row;      /* elements per example */
    int32_t elem_bytes; /* bytes of a kept element */
    int32_t widen;      /* bytes into an f32 feed: (float)byte / divisor */
    float divisor;
} ge2_loop_field;

/* One step result the loop sums: a one-element tensor of the key's IO
 * buffer (the loss, a marked output). */
typedef struct ge2_loop_result {
    const void *src; /* device: f32, or f64 when is_f64; NULL: the key does not compute it, and adds 0 */
    int32_t is_f64;
    int32_t role;    /* GE2_LOOP_LOSS, GE2_LOOP_METRIC or 0 */
} ge2_loop_result;

enum { GE2_LOOP_LOSS = 1, GE2_LOOP_METRIC = 2 };

/* Device memory, written by the host before a launch and read after it. */
typedef struct ge2_loop_counters {
    int64_t remaining;       /* steps this launch still runs; >= 1 at its start */
    int64_t epoch;           /* the next step's batch: its epoch */
    int64_t batch_in_epoch;  /* and its place in the epoch */
    int64_t step_number;     /* the mode's steps issued before the next one */
    int64_t first_nonfinite; /* the mode's first step whose loss was not finite; 0: none */
    int64_t bad_index_count; /* the control block's count of out-of-range labels and ids after the last step */
    int64_t steps_run;       /* steps this launch ran, a failed one included */
    int64_t failed;          /* the last step read an out-of-range label or id */
    double loss_sum, metric_sum;
} ge2_loop_counters;

typedef struct ge2_step_loop {
    int32_t n_fields;
    ge2_loop_field field[GE2_LOOP_MAX_FIELDS];
    int64_t batch;     /* examples a step; every step of a loop is a full batch */
    int64_t batches;   /* batches an epoch of this rank's shard */
    uint64_t seed;     /* the epoch order's (ge2_epoch_order_of) */
    uint64_t examples; /* in the kept data set */
    int32_t shuffle, rank, world;
    ge2_loop_counters *counters; /* device */
    double *sums;                /* device [n_results]: each result's sum, as the host keeps them */
    const ge2_loop_result *results; /* device [n_results] */
    int32_t n_results;
    const int64_t *bad_index_count; /* device: the control block's count */
} ge2_step_loop;

#endif /* GE2_GRAPH_STEP_LOOP_H */
