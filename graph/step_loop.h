/* A device loop: many steps of one captured graph key in one launch, each
 * step's batch gathered on the device from a data set kept there, each
 * step's results summed there (capture/program_loop.c makes one, the CUDA
 * backend captures and runs it, kernels/cuda/step_loop.cu does the work
 * between the steps).
 *
 * A plain description, for C and CUDA: the backend's addresses and the
 * constants of the epoch order. What moves from step to step lives in the
 * loop's counters in the backend's memory, so a launch of any length
 * replays the same graph. The CPU backend runs the same loop in C with the
 * same helpers (below), so CI tests everything but the CUDA launches.
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

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "graph/epoch_order.h"
#include "graph/host_device.h"

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
    const void *src; /* device; NULL: the key does not compute it, and adds 0 */
    int32_t bytes;   /* of the result (at most 8) */
    int16_t is_f64;  /* read as f64, else as f32 */
    int16_t role;    /* GE2_LOOP_LOSS, GE2_LOOP_METRIC or 0 */
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
    /* A learning rate per train step (ge2_program_set_lr_table), or NULL:
     * after each step the advance sets *base_lr (the control block's) to
     * the next step's, ge2_lr_table_at */
    const float *lr_table; /* device [lr_entries] */
    int64_t lr_entries, lr_steps_each;
    float *base_lr;
} ge2_step_loop;

/* The base LR of the train step numbered `step` (from 0, as the program
 * counts them): entry step / steps_each of the table, the last past its end. */
static inline GE2_HD float ge2_lr_table_at(const float *table, int64_t entries, int64_t steps_each, int64_t step)
{
    const int64_t i = step / steps_each;
    return table[i < entries ? i : entries - 1];
}

/* The example at row i of the batch at the counters' position: the epoch
 * order's, as ge2_program_run and the trainers' batcher take it. */
static inline GE2_HD uint64_t ge2_loop_example(const ge2_step_loop *loop, const ge2_loop_counters *c, int64_t i)
{
    const ge2_epoch_order order = ge2_epoch_order_of(loop->seed, (uint64_t)c->epoch, loop->examples);
    const uint64_t position = (uint64_t)(c->batch_in_epoch * loop->batch + i);
    return ge2_epoch_shard_at(&order, loop->shuffle, loop->rank, loop->world, position);
}

/* Elements first, first + stride, ... of row i of the field's feed from
 * the example's row: bytes widened by the divisor (IEEE division, the
 * same bits everywhere), else the bytes as they are, 4 at a time where
 * both rows and their length allow it. */
static inline GE2_HD void ge2_loop_copy_row(const ge2_loop_field *fd, uint64_t example, int64_t i, int64_t first,
                                            int64_t stride)
{
    if (fd->widen) {
        const unsigned char *src = (const unsigned char *)fd->rows + example * (uint64_t)fd->row;
        float *dst = (float *)fd->feed + i * fd->row;
        for (int64_t j = first; j < fd->row; j += stride)
            dst[j] = (float)src[j] / fd->divisor;
        return;
    }
    const int64_t bytes = fd->row * fd->elem_bytes;
    const unsigned char *src = (const unsigned char *)fd->rows + example * (uint64_t)bytes;
    unsigned char *dst = (unsigned char *)fd->feed + i * bytes;
    if (((uintptr_t)src | (uintptr_t)dst | (uintptr_t)bytes) % 4 == 0) {
        for (int64_t j = first; j < bytes / 4; j += stride)
            ((uint32_t *)dst)[j] = ((const uint32_t *)src)[j];
    } else {
        for (int64_t j = first; j < bytes; j += stride)
            dst[j] = src[j];
    }
}

/* A result's value as the host's fold reads it back: its bytes in a zeroed
 * slot, read as f64 or as f32 (capture/program_step.c's raw_value). */
static inline GE2_HD double ge2_loop_result_value(const ge2_loop_result *res)
{
    unsigned char slot[8] = {0};
    for (int k = 0; res->src && k < res->bytes && k < 8; k++)
        slot[k] = ((const unsigned char *)res->src)[k];
    if (res->is_f64) {
        double d;
        memcpy(&d, slot, sizeof d);
        return d;
    }
    float f;
    memcpy(&f, slot, sizeof f);
    return f;
}

/* After a step: counts it; a step that read an out-of-range label or id
 * ends the loop uncounted, the position at it; else its results go into
 * the sums in result order (as the host folds a step: a result the key
 * does not compute adds 0), the position one batch on and `remaining` one
 * less, and the next step's learning rate set where the loop has a table.
 * Whether another step follows. */
static inline GE2_HD bool ge2_loop_advance(const ge2_step_loop *loop, ge2_loop_counters *c)
{
    const int64_t step = ++c->step_number;
    c->steps_run++;
    const int64_t bad = *loop->bad_index_count;
    if (bad > c->bad_index_count) {
        c->bad_index_count = bad;
        c->failed = 1;
        return false;
    }
    for (int r = 0; r < loop->n_results; r++) {
        const ge2_loop_result *res = &loop->results[r];
        const double v = ge2_loop_result_value(res);
        loop->sums[r] += v;
        if (res->role == GE2_LOOP_LOSS) {
            c->loss_sum += v;
            if (!isfinite(v) && c->first_nonfinite == 0)
                c->first_nonfinite = step;
        } else if (res->role == GE2_LOOP_METRIC) {
            c->metric_sum += v;
        }
    }
    if (++c->batch_in_epoch == loop->batches) {
        c->batch_in_epoch = 0;
        c->epoch++;
    }
    if (loop->lr_table)
        *loop->base_lr = ge2_lr_table_at(loop->lr_table, loop->lr_entries, loop->lr_steps_each, c->step_number);
    return --c->remaining > 0;
}

#endif /* GE2_GRAPH_STEP_LOOP_H */
