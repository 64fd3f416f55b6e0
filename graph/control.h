/* The control block: every value that changes from step to step.
 *
 * A captured CUDA Graph freezes kernel arguments, so anything a replay must
 * see change (learning rate, step count, Adam's bias corrections, the clip
 * factor, the loss scale, the RNG offset) is read by kernels through a pointer
 * to this struct instead. It lives in device memory on CUDA and host memory
 * on the CPU. The host writes only base_lr, between steps; everything else is
 * updated by the kernels themselves, so a replay reads no host value.
 */
#ifndef GE2_GRAPH_CONTROL_H
#define GE2_GRAPH_CONTROL_H

#include <stdint.h>

#include "ge2/ge2.h"

/* Most blocks a single-launch cross-block reduction may use (ge2_control.partials). */
#define GE2_CONTROL_PARTIALS 1024

/* How far each train step moves ge2_control.rng_offset. ge2's own draws
 * need only a new value (the offset is part of every counter, graph/
 * philox.h); cuDNN's attention dropout reads the offset as a position in
 * its Philox streams, from which each of its threads takes consecutive
 * numbers, so two steps' offsets must lie further apart than any thread
 * draws in a step (TransformerEngine moves it 16 per launch). */
#define GE2_RNG_OFFSET_STRIDE ((uint64_t)1 << 20)

/* Untrusted per-step values that index memory: a class label (cross-
 * entropy, accuracy), a token id (embedding) or a place in a key-value
 * cache (attention_cached). One outside its range is
 * never used as an index. A CPU kernel fails the step at once; a CUDA
 * kernel cannot, so it counts it here and records the first, and each step
 * copies the count back with its results: the host fails the step's
 * program when the count has grown (capture/program_step.c). */
typedef enum ge2_bad_index_kind {
    GE2_BAD_LABEL,
    GE2_BAD_ID,
    GE2_BAD_POSITION,
    GE2_BAD_INDEX_KIND_COUNT
} ge2_bad_index_kind;

typedef struct ge2_bad_index {
    int64_t count;    /* out-of-range values read since the program was made; never reset */
    int64_t position; /* the first one's element in its tensor */
    int64_t bound;    /* the range it missed: [0, bound) */
    int32_t node;     /* the node that read it */
    int32_t kind;     /* ge2_bad_index_kind */
    int32_t value;
    int32_t unused;
} ge2_bad_index;

/* The message for an out-of-range value: "ge2_<op> (node N): labels[37] is 7,
 * outside [0, 5)". The CPU kernels and the program's check of the CUDA
 * count say it alike. Returns GE2_ERR_INVALID_ARGUMENT. */
#ifdef __cplusplus
extern "C"
#endif
ge2_status ge2_bad_index_error(const char *op_name, int node, ge2_bad_index_kind kind, int64_t position, int32_t value,
                        int64_t bound);

typedef struct ge2_control {
    /* written by the host between steps (ge2_set_lr) */
    float base_lr;
    /* What the backward's seed (LOSS_SCALE) and the cross-entropy's
     * gradient are multiplied by: 1, or under dynamic loss scaling
     * (ge2_loss_scaling) its scale, which the program sets when it is made
     * and the optimizer's commit moves (optim/optimizer_math.h) */
    float loss_scale;
    uint64_t rng_seed;
    /* written once, when the program is made: the ranks of its process
     * group (ge2_compile_options.collective), whose summed gradients the
     * update averages; 0 or 1: this process trains alone */
    int32_t ranks;

    /* written by the optimizer kernels */
    int64_t step;           /* optimizer updates completed */
    int32_t micro_step;     /* gradient accumulation: micro-batches since the last update */
    int32_t updates_done;   /* OPTIMIZER_UPDATE nodes finished in this step; 0 between steps */
    float lr;               /* lr of the last update (after the schedule) */
    float bias_correction1; /* 1 - beta1^step of the last update */
    float bias_correction2; /* 1 - beta2^step */
    float grad_norm;        /* global L2 norm of the gradients, before clipping */
    float clip_factor;      /* min(1, clip_norm / (grad_norm + 1e-6)); 1 without clipping */
    uint64_t rng_offset;    /* advanced by the optimizer's commit every train step; read by kernels that draw random numbers (dropout) */
    /* dynamic loss scaling: GRAD_NORM sets found_inf when this step's
     * gradients hold an inf or a NaN; the commit clears it, counts the
     * clean steps since the scale last moved and the steps skipped */
    int32_t found_inf;
    int32_t scale_good_steps;
    int64_t skipped_steps;

    /* labels and ids outside their range, counted by the CUDA kernels that read them */
    ge2_bad_index bad_index;

    /* scratch for kernels that finish a reduction across blocks in one launch */
    uint32_t blocks_done;
    /* One partial result per block of such a reduction. The launch's last block
     * sums them in block order, so the result does not depend on which block
     * finished first (float atomics would make it vary from run to run). */
    float partials[GE2_CONTROL_PARTIALS];
} ge2_control;

#endif /* GE2_GRAPH_CONTROL_H */
