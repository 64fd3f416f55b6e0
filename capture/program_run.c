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
 * equals its steps made one at a time, by construction.
 *
 * The run's full batches go through a loop of the backend instead
 * (capture/program_loop.c, graph/step_loop.h): the CPU's in C over the
 * kept rows; CUDA's, with ge2_compile_options.device_loop, many steps a
 * launch once the key is captured (by its first step), the data set
 * copied to the device once. Each iteration gathers, steps and sums with
 * the same order and arithmetic, so the bits stay those of the steps one
 * at a time. A partial last batch (its own key) still goes alone. */
#include <math.h>
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
    size_t bytes;        /* of data */
    void *device;        /* its copy for device loops; NULL until one needs it */
} kept_field;

struct ge2_kept_dataset {
    int64_t examples;
    bool shuffle;
    uint64_t seed;
    int n_fields;
    kept_field field[GE2_MAX_FEEDS];
};

_Static_assert(GE2_MAX_FEEDS <= GE2_LOOP_MAX_FIELDS, "a device loop gathers every feed");

static void dataset_release(ge2_program *program, struct ge2_kept_dataset *d)
{
    for (int f = 0; f < d->n_fields; f++) {
        ge2_free(d->field[f].data);
        if (d->field[f].device)
            program->backend->free(program->bctx, d->field[f].device);
    }
    ge2_free(d);
}

void ge2_program_dataset_free(ge2_program *program, ge2_mode mode)
{
    struct ge2_kept_dataset *d = program->dataset[mode];
    if (!d)
        return;
    dataset_release(program, d);
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
    kf->bytes = *bytes;
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
        *kf = (kept_field){k->feed_ids[f], desc->fields[i].dtype, false, desc->fields[i].divisor, 0, NULL, 0, NULL};
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
        dataset_release(program, d);
        return st;
    }
    ge2_program_dataset_free(program, mode);
    program->dataset[mode] = d;
    program->dataset_generation[mode]++;
    program->per_step_why[mode][0] = '\0'; /* the reasons were the old data set's */
    program->loops_off[mode] = false;
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

/* A kept field as a loop gathers it: from `rows` (the host's or the
 * device's copy) into `feed`. */
static ge2_loop_field loop_field_of(const kept_field *kf, const void *rows, void *feed)
{
    return (ge2_loop_field){rows, feed, kf->row, (int32_t)ge2_dtype_size(kf->dtype), kf->widen, kf->divisor};
}

/* Field f's rows of the shard's positions [start, start + size) into dst,
 * each copied as a loop copies it (graph/step_loop.h). */
static void gather(const struct ge2_kept_dataset *d, int f, const ge2_epoch_order *order, int rank, int world,
                   int64_t start, int64_t size, void *dst)
{
    const ge2_loop_field fd = loop_field_of(&d->field[f], d->field[f].data, dst);
    for (int64_t i = 0; i < size; i++)
        ge2_loop_copy_row(&fd, ge2_epoch_shard_at(order, d->shuffle, rank, world, (uint64_t)(start + i)), i, 0, 1);
}

void ge2_program_lr_table_free(ge2_program *program)
{
    ge2_free(program->lr_table);
    if (program->lr_table_device)
        program->backend->free(program->bctx, program->lr_table_device);
    program->lr_table = program->lr_table_device = NULL;
    program->lr_entries = 0;
}

ge2_status ge2_program_set_lr_table(ge2_program *program, const double *lrs, int64_t entries, int64_t steps_each)
{
    if (!program || entries < 0 || (entries > 0 && (!lrs || steps_each < 1)))
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_program_set_lr_table: program, and %lld learning rates with "
                         "steps_each >= 1 (got %lld)", (long long)entries, (long long)steps_each);
    for (int64_t i = 0; i < entries; i++)
        if (!isfinite(lrs[i]) || lrs[i] < 0)
            return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_program_set_lr_table: lrs[%lld] is %g; a learning rate "
                             "must be finite and >= 0", (long long)i, lrs[i]);
    if ((uint64_t)entries > SIZE_MAX / 2 / sizeof(float))
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_program_set_lr_table: %lld learning rates", (long long)entries);
    GE2_TRY(program->backend->sync(program->bctx)); /* no loop reads the old table any more */
    ge2_program_lr_table_free(program);
    program->dataset_generation[GE2_MODE_TRAIN]++; /* a captured train loop holds the old table's address */
    if (entries == 0)
        return GE2_OK;
    const size_t bytes = (size_t)entries * sizeof(float);
    float *table = ge2_malloc(bytes);
    if (!table)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_program_set_lr_table: %lld learning rates", (long long)entries);
    for (int64_t i = 0; i < entries; i++)
        table[i] = (float)lrs[i]; /* as ge2_set_lr stores one */
    void *device = NULL;
    ge2_status st = GE2_OK;
    if (program->device != GE2_DEVICE_CPU) {
        st = program->backend->alloc(program->bctx, bytes, &device);
        if (st == GE2_OK)
            st = program->backend->upload(program->bctx, device, table, bytes);
        if (st == GE2_OK)
            st = program->backend->sync(program->bctx); /* the upload read the host table */
    }
    if (st != GE2_OK) {
        if (device)
            program->backend->free(program->bctx, device);
        ge2_free(table);
        return st;
    }
    program->lr_table = table;
    program->lr_table_device = device;
    program->lr_entries = entries;
    program->lr_steps_each = steps_each;
    return GE2_OK;
}

/* Before a train step of a run: its learning rate from the table, as
 * ge2_set_lr would set it (nothing without a table). */
static ge2_status set_step_lr(ge2_program *program, ge2_mode mode)
{
    if (mode != GE2_MODE_TRAIN || !program->lr_table)
        return GE2_OK;
    return ge2_set_lr(program, ge2_lr_table_at(program->lr_table, program->lr_entries, program->lr_steps_each,
                                                program->steps_issued[GE2_MODE_TRAIN]));
}

/* Full batches in a row from the run's position, at most `steps`: every
 * one when the batch divides the shard, else those before the epoch's
 * partial last batch. */
static int64_t full_batches_ahead(const ge2_run *run, int64_t steps, int64_t batches, int64_t shard)
{
    if (shard % run->batch == 0)
        return steps;
    const int64_t before_partial = batches - 1 - run->batch_in_epoch;
    return steps < before_partial ? steps : before_partial;
}

/* The kept data set in device memory, copied on a device loop's first
 * need. It may take at most half the device's free memory, leaving as much
 * again for the keys made later (a partial batch, evaluation); where it
 * does not fit, or its memory cannot be had, *ok is false and the mode's
 * loops are off, with the reason. */
static ge2_status copy_to_device(ge2_program *program, ge2_mode mode, struct ge2_kept_dataset *d, bool *ok)
{
    *ok = true;
    if (program->device == GE2_DEVICE_CPU) /* the loop reads the kept rows themselves */
        return GE2_OK;
    size_t total = 0;
    for (int f = 0; f < d->n_fields; f++)
        total += d->field[f].device ? 0 : d->field[f].bytes;
    if (total == 0)
        return GE2_OK;
    char what[96];
    snprintf(what, sizeof what, "the kept %s data set (twice its %.1f MiB: as much again for later keys)",
             ge2_program_mode_name(mode), (double)total / 1048576.0);
    ge2_status st = ge2_program_check_memory(program, "ge2_program_run", 2.0 * (double)total, what);
    for (int f = 0; st == GE2_OK && f < d->n_fields; f++) {
        kept_field *kf = &d->field[f];
        if (!kf->device && (st = program->backend->alloc(program->bctx, kf->bytes ? kf->bytes : 1, &kf->device)) ==
                               GE2_OK)
            st = program->backend->upload(program->bctx, kf->device, kf->data, kf->bytes);
    }
    if (st != GE2_OK) {
        ge2_program_loops_off(program, mode, ge2_last_error());
        for (int f = 0; f < d->n_fields; f++) {
            if (d->field[f].device)
                program->backend->free(program->bctx, d->field[f].device);
            d->field[f].device = NULL;
        }
        *ok = false;
    }
    return GE2_OK;
}

/* Runs up to `full` full-batch steps from the run's position in one device
 * launch; *took: how many moved the position (0 and no error: the caller
 * steps one at a time). */
static ge2_status try_loop(ge2_program *program, ge2_mode mode, struct ge2_kept_dataset *d, const ge2_run *run,
                           int64_t full, int rank, int world, int64_t batches, int64_t *took)
{
    *took = 0;
    if (!program->backend->exec_loop || !program->backend->loop_ready || program->loops_off[mode])
        return GE2_OK;
    if (!program->backend->loop_ready(program->bctx, NULL)) {
        ge2_program_loops_off(program, mode, program->device == GE2_DEVICE_CUDA ?
                              "device loops are off (ge2_compile_options.device_loop), capture is off, or launches are "
                              "timed" : "launches are timed");
        return GE2_OK;
    }
    if (mode == GE2_MODE_TRAIN && program->options.o.collective) {
        ge2_program_loops_off(program, mode, "data parallel training steps run a launch each (their collectives stay outside "
                                 "device loops)");
        return GE2_OK;
    }
    ge2_feed feeds[GE2_MAX_FEEDS];
    int feed_ids[GE2_MAX_FEEDS];
    for (int f = 0; f < d->n_fields; f++) {
        const ge2_tensor *t = program->graph->tensors[d->field[f].tensor];
        feeds[f] = (ge2_feed){t, NULL, t->shape};
        feeds[f].shape.dim[0] = run->batch;
        feed_ids[f] = t->id;
    }
    ge2_program_key *pk;
    int index;
    GE2_TRY(ge2_program_key_of(program, mode, feeds, d->n_fields, "ge2_program_run", &pk, &index));
    if (!program->backend->loop_ready(program->bctx, &pk->exec)) {
        /* CUDA: its first step (after it was prepared, again when the
         * shared arena grew) captures it; one that has run since and is
         * still not ready stays so, which the runs say (other keys of the
         * mode may still loop) */
        if (pk->ran_since_prepare && !program->per_step_why[mode][0])
            snprintf(program->per_step_why[mode], sizeof program->per_step_why[mode],
                     "the %s steps of batch %lld run eagerly (their capture failed)", ge2_program_mode_name(mode),
                     (long long)run->batch);
        return GE2_OK;
    }
    bool ok;
    GE2_TRY(copy_to_device(program, mode, d, &ok));
    if (!ok)
        return GE2_OK;
    ge2_step_loop loop;
    memset(&loop, 0, sizeof loop);
    loop.n_fields = d->n_fields;
    for (int f = 0; f < d->n_fields; f++) {
        const kept_field *kf = &d->field[f];
        loop.field[f] = loop_field_of(kf, program->device == GE2_DEVICE_CPU ? kf->data : kf->device, NULL);
    }
    loop.batch = run->batch;
    loop.batches = batches;
    loop.seed = d->seed;
    loop.examples = (uint64_t)d->examples;
    loop.shuffle = d->shuffle;
    loop.rank = rank;
    loop.world = world;
    if (mode == GE2_MODE_TRAIN && program->lr_table) {
        loop.lr_table = program->device == GE2_DEVICE_CPU ? program->lr_table : program->lr_table_device;
        loop.lr_entries = program->lr_entries;
        loop.lr_steps_each = program->lr_steps_each;
        loop.base_lr = &program->control->base_lr;
        GE2_TRY(set_step_lr(program, mode)); /* the first step's; the loop sets the others' */
    }
    const ge2_status st = ge2_program_loop(program, pk, index, &loop, feed_ids, full, run->epoch, run->batch_in_epoch,
                                           took);
    if (loop.lr_table) /* the mirror ge2_get_lr reads: what the loop left for the next step */
        program->control_host->base_lr = ge2_lr_table_at(program->lr_table, program->lr_entries,
                                                         program->lr_steps_each, program->steps_issued[mode]);
    return st;
}

const char *ge2_program_run_per_step(const ge2_program *program, ge2_mode mode)
{
    if (!program || (unsigned)mode >= GE2_MODE_COUNT || !program->per_step_why[mode][0])
        return NULL;
    return program->per_step_why[mode];
}

ge2_status ge2_program_run(ge2_program *program, ge2_mode mode, ge2_run *run)
{
    if (!program || !run || (unsigned)mode >= GE2_MODE_COUNT)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_program_run: program, a mode and run are required");
    struct ge2_kept_dataset *d = program->dataset[mode];
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
    run->device_loop_steps = 0;
    for (int64_t s = 0; s < run->steps; s++) {
        /* the full batches ahead in one launch where the backend loops */
        const int64_t full = full_batches_ahead(run, run->steps - s, batches, shard);
        int64_t took = 0;
        const ge2_status looped = full >= 2 ? try_loop(program, mode, d, run, full, rank, world, batches, &took)
                                            : GE2_OK;
        if (took > 0) { /* the position past the steps that counted, even when one then failed */
            s += took - 1;
            run->device_loop_steps += took;
            const int64_t at = run->batch_in_epoch + took;
            run->epoch += at / batches;
            run->batch_in_epoch = at % batches;
            order = ge2_epoch_order_of(d->seed, (uint64_t)run->epoch, (uint64_t)d->examples);
        }
        GE2_TRY(looped);
        if (took > 0)
            continue;
        const int64_t start = run->batch_in_epoch * run->batch;
        const int64_t size = shard - start < run->batch ? shard - start : run->batch;
        for (int f = 0; f < d->n_fields; f++) {
            const ge2_tensor *t = program->graph->tensors[d->field[f].tensor];
            feeds[f] = (ge2_feed){t, NULL, t->shape};
            feeds[f].shape.dim[0] = size;
        }
        GE2_TRY(set_step_lr(program, mode));
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
