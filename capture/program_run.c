/* Many steps per call over a data set the program keeps
 * (ge2_program_set_dataset, ge2_program_run; include/ge2/ge2.h).
 *
 * The program keeps each field's rows as given (bytes stay bytes) and
 * makes every batch itself: the epoch's order (graph/epoch_order.h), this
 * rank's positions of it (ge2_epoch_shard_at), each example's row gathered
 * straight into the staging slot the step then reads without a copy
 * (ge2_program_feed_buffers), a byte widened to f32 on the way as the
 * trainers' loader widens a pixel. Each step is an ordinary
 * ge2_program_step: the same key, staging, metrics and checks, so a run
 * equals its steps made one at a time, by construction. */
#include <string.h>

#include "capture/program_internal.h"
#include "graph/alloc.h"
#include "graph/epoch_order.h"
#include "graph/error.h"

/* The default bound on a kept copy (ge2_dataset_desc.max_bytes 0). */
#define DEFAULT_MAX_BYTES ((size_t)2 << 30)

/* One feed's rows, in the program's feed order. */
typedef struct kept_field {
    int tensor;
    ge2_dtype dtype; /* as kept: the feed's, or GE2_U8 into an f32 feed */
    bool widen;      /* bytes into an f32 feed: (float)byte / divisor */
    float divisor;
    int64_t row;     /* elements per example */
    unsigned char *data; /* [examples][row] of dtype */
} kept_field;

struct ge2_kept_dataset {
    int64_t examples;
    bool shuffle;
    uint64_t seed;
    int n_fields;
    kept_field field[GE2_MAX_FEEDS];
};

void ge2_program_dataset_free(ge2_program *program, ge2_mode mode)
{
    struct ge2_kept_dataset *d = program->dataset[mode];
    if (!d)
        return;
    for (int f = 0; f < d->n_fields; f++)
        ge2_free(d->field[f].data);
    ge2_free(d);
    program->dataset[mode] = NULL;
}

/* The key's feed index of field i's tensor; an error naming the field when
 * it is no input or label of the program, or one an earlier field gave. */
static ge2_status field_slot(const ge2_program *program, const ge2_dataset_desc *desc, int i, const bool *taken,
                             int *slot)
{
    const ge2_tensor *t = desc->fields[i].feed;
    if (!t)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_program_set_dataset: field %d has no feed tensor", i);
    if (!ge2_program_has_tensor(program, t))
        return ge2_error(GE2_ERR_GRAPH, "ge2_program_set_dataset: field %d's tensor '%s' belongs to another graph", i,
                         t->name);
    const ge2_key *k = &program->feed_key;
    for (int f = 0; f < k->n_feeds; f++)
        if (k->feed_ids[f] == t->id) {
            if (taken[f])
                return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_program_set_dataset: fields %d and an earlier one "
                                 "both feed '%s'", i, t->name);
            *slot = f;
            return GE2_OK;
        }
    return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_program_set_dataset: field %d's tensor '%s' is a %s, not an input "
                     "or label of the graph", i, t->name, ge2_role_name(t->role));
}

/* Checks field i against its feed and sizes its copy in *bytes. */
static ge2_status field_bytes(const ge2_dataset_desc *desc, int i, const ge2_tensor *t, kept_field *kf,
                              size_t *bytes)
{
    const ge2_dataset_field *fd = &desc->fields[i];
    char shape[64];
    if (t->shape.ndim < 1 || t->shape.dim[0] < 1)
        return ge2_error(GE2_ERR_SHAPE, "ge2_program_set_dataset: feed '%s' %s has no batch dim to fill", t->name,
                         ge2_shape_str(t->shape, shape, sizeof shape));
    const bool widened = fd->dtype == GE2_U8 && t->dtype == GE2_F32;
    if (fd->dtype != t->dtype && !widened)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_program_set_dataset: field %d for '%s' is %s; the feed is %s "
                         "(or bytes for an f32 feed)", i, t->name, ge2_dtype_name(fd->dtype),
                         ge2_dtype_name(t->dtype));
    if (widened && !(fd->divisor > 0 && fd->divisor < 1e30f))
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_program_set_dataset: field %d for '%s': bytes need a "
                         "divisor > 0, not %g", i, t->name, (double)fd->divisor);
    if (!fd->data)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_program_set_dataset: field %d for '%s' has no data", i,
                         t->name);
    kf->widen = widened;
    kf->row = ge2_shape_numel(t->shape) / t->shape.dim[0];
    const size_t row_bytes = (size_t)kf->row * ge2_dtype_size(fd->dtype);
    if ((uint64_t)desc->examples > SIZE_MAX / 4 / (row_bytes ? row_bytes : 1))
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_program_set_dataset: %lld examples of '%s' rows (%zu bytes "
                         "each) do not fit in memory", (long long)desc->examples, t->name, row_bytes);
    *bytes = (size_t)desc->examples * row_bytes;
    return GE2_OK;
}

/* The rank and world mode's runs are cut for: training runs take a rank's
 * shard of each epoch; eval runs, whose keys have no collective, the whole
 * data set on every rank (rank 0 of 1). */
static void run_group(const ge2_program *program, ge2_mode mode, int *rank, int *world)
{
    const ge2_collective *group = mode == GE2_MODE_TRAIN ? program->options.o.collective : NULL;
    *world = group && group->world > 1 ? group->world : 1;
    *rank = *world > 1 ? group->rank : 0;
}

ge2_status ge2_program_set_dataset(ge2_program *program, ge2_mode mode, const ge2_dataset_desc *desc)
{
    if (!program || !desc || (unsigned)mode >= GE2_MODE_COUNT)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_program_set_dataset: program, a mode and desc are required");
    const ge2_key *k = &program->feed_key;
    if (desc->examples < 1 || desc->n_fields != k->n_feeds || (desc->n_fields > 0 && !desc->fields))
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_program_set_dataset: %lld examples in %d field(s); the graph "
                         "has %d input(s) and label(s), each needs one, and at least one example",
                         (long long)desc->examples, desc->n_fields, k->n_feeds);
    int rank, world;
    run_group(program, mode, &rank, &world);
    if (desc->examples < world)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_program_set_dataset: %lld examples for %d ranks",
                         (long long)desc->examples, world);
    struct ge2_kept_dataset *d = ge2_calloc(1, sizeof *d);
    if (!d)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_program_set_dataset: out of host memory");
    *d = (struct ge2_kept_dataset){desc->examples, desc->shuffle, desc->seed, k->n_feeds, {{0}}};
    bool taken[GE2_MAX_FEEDS] = {false};
    size_t bytes[GE2_MAX_FEEDS], total = 0;
    const size_t limit = desc->max_bytes ? desc->max_bytes : DEFAULT_MAX_BYTES;
    ge2_status st = GE2_OK;
    for (int i = 0; st == GE2_OK && i < desc->n_fields; i++) {
        int f = -1;
        st = field_slot(program, desc, i, taken, &f);
        if (st != GE2_OK)
            break;
        taken[f] = true;
        kept_field *kf = &d->field[f];
        *kf = (kept_field){k->feed_ids[f], desc->fields[i].dtype, false, desc->fields[i].divisor, 0, NULL};
        st = field_bytes(desc, i, program->graph->tensors[kf->tensor], kf, &bytes[f]);
        total += st == GE2_OK ? bytes[f] : 0;
        if (st == GE2_OK && total > limit)
            st = ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_program_set_dataset: the %s data set takes %.1f MiB by field "
                           "%d, over its limit of %.1f MiB (ge2_dataset_desc.max_bytes)", ge2_program_mode_name(mode),
                           (double)total / 1048576.0, i, (double)limit / 1048576.0);
        if (st == GE2_OK && !(kf->data = ge2_malloc(bytes[f] ? bytes[f] : 1)))
            st = ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_program_set_dataset: %.1f MiB for field %d ('%s') of the %s "
                           "data set", (double)bytes[f] / 1048576.0, i, program->graph->tensors[kf->tensor]->name,
                           ge2_program_mode_name(mode));
        if (st == GE2_OK)
            memcpy(kf->data, desc->fields[i].data, bytes[f]);
    }
    if (st != GE2_OK) {
        for (int f = 0; f < d->n_fields; f++)
            ge2_free(d->field[f].data);
        ge2_free(d);
        return st;
    }
    ge2_program_dataset_free(program, mode);
    program->dataset[mode] = d;
    return GE2_OK;
}

/* This rank's examples per epoch of mode's runs, and its rank and world */
static int64_t shard_of(const ge2_program *program, ge2_mode mode, const struct ge2_kept_dataset *d, int *rank,
                        int *world)
{
    run_group(program, mode, rank, world);
    return (d->examples + *world - 1) / *world;
}

int64_t ge2_program_run_batches(const ge2_program *program, ge2_mode mode, int64_t batch)
{
    if (!program || (unsigned)mode >= GE2_MODE_COUNT || !program->dataset[mode] || batch < 1)
        return 0;
    int rank, world;
    const int64_t shard = shard_of(program, mode, program->dataset[mode], &rank, &world);
    return batch >= shard ? 1 : (shard + batch - 1) / batch;
}

/* Field f's rows of the shard's positions [start, start + size) into dst. */
static void gather(const struct ge2_kept_dataset *d, int f, const ge2_epoch_order *order, int rank, int world,
                   int64_t start, int64_t size, void *dst)
{
    const kept_field *kf = &d->field[f];
    const size_t row_bytes = (size_t)kf->row * ge2_dtype_size(kf->dtype);
    for (int64_t i = 0; i < size; i++) {
        const uint64_t e = ge2_epoch_shard_at(order, d->shuffle, rank, world, (uint64_t)(start + i));
        const unsigned char *src = kf->data + e * row_bytes;
        if (kf->widen) {
            float *out = (float *)dst + i * kf->row;
            for (int64_t j = 0; j < kf->row; j++)
                out[j] = (float)src[j] / kf->divisor;
        } else {
            memcpy((unsigned char *)dst + (size_t)i * row_bytes, src, row_bytes);
        }
    }
}

ge2_status ge2_program_run(ge2_program *program, ge2_mode mode, ge2_run *run)
{
    if (!program || !run || (unsigned)mode >= GE2_MODE_COUNT)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_program_run: program, a mode and run are required");
    const struct ge2_kept_dataset *d = program->dataset[mode];
    if (!d)
        return ge2_error(GE2_ERR_STATE, "ge2_program_run: no %s data set (ge2_program_set_dataset)",
                         ge2_program_mode_name(mode));
    int rank, world;
    const int64_t shard = shard_of(program, mode, d, &rank, &world);
    if (run->batch < 1 || run->batch > shard)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_program_run: batch %lld; the %s data set has %lld examples%s",
                         (long long)run->batch, ge2_program_mode_name(mode), (long long)shard, world > 1 ? " a rank" : "");
    const int64_t batches = (shard + run->batch - 1) / run->batch;
    if (run->epoch < 0 || run->batch_in_epoch < 0 || run->batch_in_epoch >= batches || run->steps < 0)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_program_run: %lld steps from batch %lld of epoch %lld; an "
                         "epoch has %lld batches of %lld", (long long)run->steps, (long long)run->batch_in_epoch,
                         (long long)run->epoch, (long long)batches, (long long)run->batch);
    ge2_epoch_order order = ge2_epoch_order_of(d->seed, (uint64_t)run->epoch, (uint64_t)d->examples);
    ge2_feed feeds[GE2_MAX_FEEDS];
    void *slots[GE2_MAX_FEEDS];
    for (int64_t s = 0; s < run->steps; s++) {
        const int64_t start = run->batch_in_epoch * run->batch;
        const int64_t size = shard - start < run->batch ? shard - start : run->batch;
        for (int f = 0; f < d->n_fields; f++) {
            const ge2_tensor *t = program->graph->tensors[d->field[f].tensor];
            feeds[f] = (ge2_feed){t, NULL, t->shape};
            feeds[f].shape.dim[0] = size;
        }
        GE2_TRY(ge2_program_feed_buffers(program, mode, feeds, d->n_fields, slots));
        for (int f = 0; f < d->n_fields; f++) {
            gather(d, f, &order, rank, world, start, size, slots[f]);
            feeds[f].data = slots[f];
        }
        GE2_TRY(ge2_program_step(program, mode, feeds, d->n_fields));
        if (++run->batch_in_epoch == batches) {
            run->batch_in_epoch = 0;
            order = ge2_epoch_order_of(d->seed, (uint64_t)++run->epoch, (uint64_t)d->examples);
        }
    }
    return GE2_OK;
}
