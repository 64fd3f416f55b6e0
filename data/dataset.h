/* In-memory classification data sets and the batcher that walks them.
 *
 * Not part of the public ge2 API (include/ge2/ge2.h): the trainer and the
 * benchmarks include it. A data set is images as f32 rows (pixel / 255,
 * flattened) and i32 labels. The batcher's order is a pure function of
 * (seed, epoch), one position at a time (graph/epoch_order.h), so training
 * resumes at (epoch, batch_in_epoch) without replaying anything, and a
 * program that gathers batches itself takes the same examples.
 */
#ifndef GE2_DATA_DATASET_H
#define GE2_DATA_DATASET_H

#include <stdbool.h>
#include <stdint.h>

#include "ge2/ge2.h"

typedef enum ge2_split {
    GE2_SPLIT_TRAIN,
    GE2_SPLIT_TEST,
    GE2_SPLIT_COUNT
} ge2_split;

typedef struct ge2_dataset {
    int64_t n;        /* examples */
    int64_t features; /* values per example (784 for 28x28 images) */
    int64_t rows, cols; /* the images' shape when the file gave one ([n, rows, cols]); 0 for [n, features] */
    char source[512];   /* the images file it came from, for messages ("" when made in memory) */
    int n_classes;    /* labels are in [0, n_classes) */
    float *images;    /* [n, features] */
    int32_t *labels;  /* [n] */
    /* [n, features] the bytes the images came from (images = (float)byte /
     * GE2_PIXEL_DIVISOR), so a program can keep a quarter of the memory
     * (ge2_program_set_dataset); NULL for a data set made in memory */
    uint8_t *pixels;
} ge2_dataset;

/* What a loaded pixel byte is divided by: its f32 value is (float)byte / this. */
#define GE2_PIXEL_DIVISOR 255.0f

/* Zero-filled data set for the caller to fill (tests, synthetic data). */
ge2_status ge2_dataset_new(int64_t n, int64_t features, int n_classes, ge2_dataset **out);
void ge2_dataset_free(ge2_dataset *ds);

/* An image IDX file ([n, rows, cols] or [n, features], u8) and a label IDX
 * file ([n], u8, each < n_classes); the counts must agree. */
ge2_status ge2_dataset_load_idx(const char *images_path, const char *labels_path, int n_classes,
                                ge2_dataset **out);
/* dir holds {train,t10k}-{images-idx3,labels-idx1}-ubyte, each optionally
 * .gz; the images must be 28x28, as Fashion-MNIST's are (errors name the file). */
ge2_status ge2_dataset_load_fashion_mnist(const char *dir, ge2_split split, ge2_dataset **out);
/* The data set fits a model that takes `features` values per example (and,
 * when rows > 0, images of rows x cols): else an error naming the file and
 * both shapes, before any batch is copied into feeds of the model's size. */
ge2_status ge2_dataset_expect(const ge2_dataset *ds, const char *model, int64_t features, int64_t rows, int64_t cols);

/* ---------------------------------------------------------------- batcher */

typedef struct ge2_batcher_options {
    int64_t batch_size;
    bool shuffle;   /* off: batches are consecutive slices from example 0 */
    uint64_t seed;  /* shuffle order = f(seed, epoch) */
    bool drop_last; /* drop the last partial batch of an epoch instead of returning it */
    /* Data parallel (PyTorch's DistributedSampler): the epoch's order, the
     * same on every rank, padded by its first examples to a multiple of
     * world, and this rank takes positions rank, rank + world, ... so the
     * shards are disjoint but for the padding and cover the data set. world
     * 0 or 1: one process, the whole order. */
    int rank, world;
} ge2_batcher_options;

typedef struct ge2_batch {
    const float *images;   /* [size, features] */
    const int32_t *labels; /* [size] */
    int64_t size;
    int64_t epoch;
    int64_t index; /* batch_in_epoch of this batch */
} ge2_batch;

typedef struct ge2_batcher ge2_batcher;

/* The data set must outlive the batcher. Starts at epoch 0, batch 0. */
ge2_status ge2_batcher_new(const ge2_dataset *ds, const ge2_batcher_options *options, ge2_batcher **out);
void ge2_batcher_free(ge2_batcher *b);
int64_t ge2_batcher_batches_per_epoch(const ge2_batcher *b);
/* The same before a batcher exists: the batches per epoch a batcher over n
 * examples with these options would give (0 for a batch size below 1). */
int64_t ge2_batcher_epoch_batches(int64_t n, const ge2_batcher_options *options);
/* Positions the batcher so the next batch is (epoch, batch_in_epoch). */
ge2_status ge2_batcher_seek(ge2_batcher *b, int64_t epoch, int64_t batch_in_epoch);
/* The next batch of the current epoch; false once the epoch is exhausted
 * (seek to epoch + 1 to go on). The batch's pointers stay valid until the
 * next call. */
bool ge2_batcher_next(ge2_batcher *b, ge2_batch *out);
/* Examples in the next batch (the last of an epoch may be smaller); 0 once
 * the epoch is exhausted. What to ask ge2_program_feed_buffers for. */
int64_t ge2_batcher_next_size(const ge2_batcher *b);
/* Like ge2_batcher_next, but the batch is written into the caller's
 * images [size, features] and labels [size] (shuffled or not), e.g. a
 * program's feed buffers, so it is copied once, straight into the staging
 * that ge2_program_step uploads. The batch's pointers are those. */
bool ge2_batcher_next_into(ge2_batcher *b, float *images, int32_t *labels, ge2_batch *out);
/* Where the next batch would come from. */
void ge2_batcher_position(const ge2_batcher *b, int64_t *epoch, int64_t *batch_in_epoch);
/* Examples in this rank's shard of an epoch (the data set's size for one process). */
int64_t ge2_batcher_shard_size(const ge2_batcher *b);
/* Example index at position i of this rank's order for the epoch (one
 * process: the permutation itself); -1 outside the shard. */
int64_t ge2_batcher_example(const ge2_batcher *b, int64_t i);

#endif /* GE2_DATA_DATASET_H */
