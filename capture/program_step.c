/* One step: feeds -> key -> staging slot -> run (upload, launches, result
 * copies) -> the slot's fence; and the metrics those results add up to.
 *
 * After a key's first step nothing here allocates: the key is found in the
 * cache, the feeds go through the key's staging slots, and each step's loss
 * and metric land in its slot's result area, added to the sums when the
 * host next waits on the slot (it must, before refilling its staging) or
 * when ge2_program_take_metrics finds the slot's fence done. A replayed step
 * is then two driver calls: the slot's graph launch and its fence record.
 *
 * Zero-copy feeding: ge2_program_feed_buffers hands out the slots of the
 * staging buffer the key's next step will upload, the caller writes the
 * batch there, and the step recognises each such feed by its address and
 * skips its copy (a batch of 64 x 784 floats was a 200 KB memcpy, nearly all
 * of the step's host time).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "capture/program_internal.h"
#include "graph/control.h"
#include "graph/error.h"

static ge2_status check_mode(ge2_mode mode, const char *fn)
{
    if ((unsigned)mode >= GE2_MODE_COUNT)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "%s: unknown mode %d", fn, (int)mode);
    return GE2_OK;
}

/* Same rank, same dims except dim 0 (the batch), which must be >= 1. fn
 * names the caller; ge2_program_feed_buffers passes need_data false: it
 * hands out the data pointers instead of reading them. */
static ge2_status check_feed(const ge2_program *program, const ge2_feed *feed, int index, const char *fn,
                             bool need_data)
{
    const ge2_tensor *t = feed->tensor;
    if (!t)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "%s: feed %d has no tensor", fn, index);
    if (!ge2_program_has_tensor(program, t))
        return ge2_error(GE2_ERR_GRAPH, "%s: feed %d tensor '%s' belongs to another graph", fn, index, t->name);
    if (t->role != GE2_ROLE_INPUT && t->role != GE2_ROLE_LABEL)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "%s: feed %d tensor '%s' is a %s, not an input or label", fn,
                         index, t->name, ge2_role_name(t->role));
    /* shape strings are formatted on the error paths only: this runs for
     * every feed of every step */
    char built[64], given[64];
    bool ok = feed->shape.ndim == t->shape.ndim && (t->shape.ndim == 0 || feed->shape.dim[0] >= 1);
    for (int d = 1; ok && d < t->shape.ndim; d++)
        ok = feed->shape.dim[d] == t->shape.dim[d];
    if (!ok) {
        ge2_shape_str(t->shape, built, sizeof built);
        if (feed->shape.ndim < 0 || feed->shape.ndim > GE2_MAX_DIMS)
            return ge2_error(GE2_ERR_SHAPE, "%s: feed '%s' has %d dims; it is %s", fn, t->name, feed->shape.ndim,
                             built);
        return ge2_error(GE2_ERR_SHAPE, "%s: feed '%s' is %s but the input is %s (only dim 0, the batch, may differ)",
                         fn, t->name, ge2_shape_str(feed->shape, given, sizeof given), built);
    }
    if (need_data && !feed->data)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "%s: feed '%s' %s has no data", fn, t->name,
                         ge2_shape_str(feed->shape, given, sizeof given));
    /* A batch so large its byte size overflows is a user error, not a wrap-around. */
    int64_t row = t->shape.ndim > 0 ? ge2_shape_numel(t->shape) / t->shape.dim[0] : 1;
    if (t->shape.ndim > 0 && feed->shape.dim[0] > INT64_MAX / 4 / (row * (int64_t)ge2_dtype_size(t->dtype)))
        return ge2_error(GE2_ERR_SHAPE, "%s: feed '%s' %s is too large", fn, t->name,
                         ge2_shape_str(feed->shape, given, sizeof given));
    return GE2_OK;
}

/* The key of these feeds; feed_of[f] is the feed giving the key's feed f. */
static ge2_status key_of_feeds(const ge2_program *program, ge2_mode mode, const ge2_feed *feeds, int n_feeds,
                               const char *fn, bool need_data, ge2_key *key, int *feed_of)
{
    *key = program->feed_key;
    key->mode = mode;
    for (int f = 0; f < key->n_feeds; f++)
        feed_of[f] = -1;
    for (int j = 0; j < n_feeds; j++) {
        GE2_TRY(check_feed(program, &feeds[j], j, fn, need_data));
        for (int f = 0; f < key->n_feeds; f++) {
            if (key->feed_ids[f] != feeds[j].tensor->id)
                continue;
            if (feed_of[f] >= 0)
                return ge2_error(GE2_ERR_INVALID_ARGUMENT, "%s: '%s' is fed twice (feeds %d and %d)", fn,
                                 feeds[j].tensor->name, feed_of[f], j);
            feed_of[f] = j;
            key->feed_shapes[f] = feeds[j].shape;
        }
    }
    for (int f = 0; f < key->n_feeds; f++) {
        if (feed_of[f] < 0) {
            const ge2_tensor *t = program->graph->tensors[key->feed_ids[f]];
            char s[64];
            return ge2_error(GE2_ERR_INVALID_ARGUMENT, "%s: %s '%s' %s was not fed", fn, ge2_role_name(t->role),
                             t->name, ge2_shape_str(t->shape, s, sizeof s));
        }
    }
    ge2_key_rehash(key);
    return GE2_OK;
}

/* ------------------------------------------------------------- metrics */

static double raw_value(const double *slot, ge2_dtype dtype)
{
    if (dtype == GE2_F64)
        return *slot;
    float f;
    memcpy(&f, slot, sizeof f);
    return f;
}

/* Steps finished since the last fold that saw the count counted
 * out-of-range labels or ids on the device (graph/control.h): the fold
 * fails with the first one the program met, said as the CPU kernels say
 * it. A fold covers every step up to the one waited for, so which step
 * read it is not known here; the node, position and value are. */
ge2_status ge2_program_bad_index_found(ge2_program *program, int64_t count)
{
    const int64_t before = program->bad_index_seen;
    program->bad_index_seen = count;
    GE2_TRY(ge2_program_download_control(program));
    const ge2_bad_index *b = &program->control_host->bad_index;
    const ge2_graph *g = program->graph;
    const char *op = b->node >= 0 && b->node < g->n_nodes ? ge2_op_name(g->nodes[b->node].op) : "unknown op";
    ge2_bad_index_error(op, b->node, (ge2_bad_index_kind)b->kind, b->position, b->value, b->bound);
    char first[512];
    snprintf(first, sizeof first, "%s", ge2_last_error());
    return ge2_error(GE2_ERR_INVALID_ARGUMENT, "%s (%s; %lld more out-of-range read(s) counted on the device since "
                     "the last check)",
                     first, before > 0 ? "an earlier step's first" : "the first", (long long)(count - before));
}

/* Slot s's step is done: its results are final. Adds them to the sums of
 * the key's mode, once (the slot is no longer in flight after); fails when
 * the step read a label or id out of range. Only fold_up_to calls it, so
 * steps are added in the order they ran. */
static ge2_status fold_slot(ge2_program *program, ge2_program_key *pk, int s)
{
    pk->in_flight[s] = false;
    const double *results = &pk->results[s * ge2_program_slot_results(program)];
    int64_t bad;
    memcpy(&bad, &results[program->n_results], sizeof bad);
    if (bad > program->bad_index_seen)
        return ge2_program_bad_index_found(program, bad);
    if (program->loss_id < 0)
        return GE2_OK;
    const ge2_graph *g = program->graph;
    ge2_metrics *sums = &program->metrics[pk->key.mode];
    double *each = program->result_sums[pk->key.mode];
    sums->steps++;
    sums->examples += pk->batch;
    for (int r = 0; r < program->n_results; r++) {
        const int id = program->result_ids[r];
        const double v = raw_value(&results[r], g->tensors[id]->dtype);
        each[r] += v;
        if (id == program->loss_id && !isfinite(v) && !sums->first_nonfinite) /* folds come in step order */
            sums->first_nonfinite = pk->step_number[s];
        if (id == program->loss_id)
            sums->loss_sum += v;
        else if (id == program->metric_id)
            sums->metric_sum += v;
    }
    return GE2_OK;
}

/* Folds every step of mode still in flight up to the step numbered `last`,
 * in the order they ran, whichever key ran them: one stream runs the steps
 * in order, so once step `last` is done so are those before it. The sums
 * then take each step's results in step order, as a device loop adds them
 * (capture/program_loop.c), however the host's waits fell. */
static ge2_status fold_up_to(ge2_program *program, ge2_mode mode, int64_t last)
{
    for (;;) {
        ge2_program_key *first = NULL;
        int first_slot = -1;
        for (int k = 0; k < program->n_keys; k++) {
            ge2_program_key *pk = program->keys[k];
            for (int s = 0; pk->key.mode == mode && s < GE2_STAGING_BUFFERS; s++)
                if (pk->in_flight[s] && pk->step_number[s] <= last &&
                    (!first || pk->step_number[s] < first->step_number[first_slot])) {
                    first = pk;
                    first_slot = s;
                }
        }
        if (!first)
            return GE2_OK;
        GE2_TRY(fold_slot(program, first, first_slot));
    }
}

/* Folds the key's slots whose step is done, oldest first, without waiting,
 * and with each the mode's earlier steps of any key (fold_up_to). One
 * stream runs the steps in order, so the first one still running ends the
 * search. */
static ge2_status fold_done(ge2_program *program, ge2_program_key *pk)
{
    for (int i = 0; i < GE2_STAGING_BUFFERS; i++) {
        int s = (pk->next_staging + i) % GE2_STAGING_BUFFERS;
        if (!pk->in_flight[s])
            continue;
        bool done = false;
        GE2_TRY(ge2_program_source_done(program, pk->fence[s], &done));
        if (!done)
            return GE2_OK;
        GE2_TRY(fold_up_to(program, pk->key.mode, pk->step_number[s]));
    }
    return GE2_OK;
}

/* Makes slot s reusable: the step that used it last is done, so its
 * staging may be written and its results are folded. Known after one wait,
 * so ge2_program_feed_buffers and the step after it wait once. */
static ge2_status staging_wait(ge2_program *program, ge2_program_key *pk, int s)
{
    if (!pk->in_flight[s])
        return GE2_OK;
    GE2_TRY(ge2_program_source_wait(program, pk->fence[s]));
    return fold_up_to(program, pk->key.mode, pk->step_number[s]);
}

ge2_status ge2_program_finish_steps(ge2_program *program)
{
    GE2_TRY(program->backend->sync(program->bctx));
    for (int m = 0; m < GE2_MODE_COUNT; m++)
        GE2_TRY(fold_up_to(program, (ge2_mode)m, INT64_MAX));
    return GE2_OK;
}

/* Sums of the steps known done: none is waited for. */
ge2_status ge2_program_take_metrics(ge2_program *program, ge2_mode mode, ge2_metrics *out)
{
    if (!program || !out)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_program_take_metrics: program and out must not be NULL");
    GE2_TRY(check_mode(mode, "ge2_program_take_metrics"));
    for (int k = 0; k < program->n_keys; k++)
        if (program->keys[k]->key.mode == mode)
            GE2_TRY(fold_done(program, program->keys[k]));
    *out = program->metrics[mode];
    memset(&program->metrics[mode], 0, sizeof program->metrics[mode]);
    for (int r = 0; r < program->n_results; r++) {
        program->taken_sums[mode][r] = program->result_sums[mode][r];
        program->result_sums[mode][r] = 0;
    }
    return GE2_OK;
}

ge2_status ge2_program_taken_sum(ge2_program *program, ge2_mode mode, const ge2_tensor *output, double *sum)
{
    if (!program || !output || !sum)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_program_taken_sum: program, output and sum must not be NULL");
    GE2_TRY(check_mode(mode, "ge2_program_taken_sum"));
    for (int r = 0; r < program->n_results; r++)
        if (program->result_ids[r] == output->id && ge2_program_has_tensor(program, output)) {
            *sum = program->taken_sums[mode][r];
            return GE2_OK;
        }
    return ge2_error(GE2_ERR_INVALID_ARGUMENT,
                     "ge2_program_taken_sum: '%s' is not a step result: the loss, or a one-element tensor marked "
                     "with ge2_mark_output before ge2_compile",
                     output->name);
}

/* ------------------------------------------------------- staging slots */

static bool bytes_overlap(const void *a, size_t a_bytes, const void *b, size_t b_bytes)
{
    uintptr_t pa = (uintptr_t)a, pb = (uintptr_t)b;
    return pa < pb + b_bytes && pb < pa + a_bytes;
}

/* Data in this key's staging is used in place only where it is its own slot
 * of the buffer ge2_program_feed_buffers handed out for this step. Anywhere
 * else in that buffer the copy would overwrite another feed's slot; a slot
 * not handed out for this step (one of an earlier step, or this buffer
 * before feed_buffers was asked for it) was uploaded by an earlier step or
 * overwritten by one, so its contents are stale or were written while the
 * device read them. Both are refused, not copied: the caller's bookkeeping
 * has gone wrong and silently training on old data would hide it. */
static ge2_status check_staged_data(const ge2_program_key *pk, int s, const ge2_feed *feed,
                                    const ge2_plan_tensor *pt)
{
    const unsigned char *slot = (const unsigned char *)pk->staging[s] + pt->offset;
    if (feed->data == slot && pk->handed_out)
        return GE2_OK;
    for (int i = 0; i < GE2_STAGING_BUFFERS; i++) {
        if (!bytes_overlap(feed->data, pt->bytes, pk->staging[i], pk->staging_bytes))
            continue;
        char shape[64];
        ge2_shape_str(feed->shape, shape, sizeof shape);
        if (i == s && feed->data != slot)
            return ge2_error(GE2_ERR_INVALID_ARGUMENT,
                             "ge2_program_step: feed '%s' %s: its data lies in ge2's staging but is not the buffer "
                             "ge2_program_feed_buffers gave for '%s'",
                             feed->tensor->name, shape, feed->tensor->name);
        return ge2_error(GE2_ERR_STATE,
                         "ge2_program_step: feed '%s' %s: its data is a feed buffer not handed out for this %s step "
                         "(an earlier step used it); call ge2_program_feed_buffers before every step",
                         feed->tensor->name, shape, ge2_program_mode_name(pk->key.mode));
    }
    return GE2_OK;
}

/* Copies the feeds into staging slot s, the key's next, once the slot is
 * free. A feed whose data already is its place there (written in place
 * after ge2_program_feed_buffers) is not copied. */
static ge2_status stage_feeds(ge2_program *program, ge2_program_key *pk, int s, const ge2_feed *feeds,
                              const int *feed_of)
{
    for (int f = 0; f < pk->key.n_feeds; f++)
        GE2_TRY(check_staged_data(pk, s, &feeds[feed_of[f]], &pk->plan->tensors[pk->key.feed_ids[f]]));
    GE2_TRY(staging_wait(program, pk, s));
    unsigned char *staging = pk->staging[s];
    for (int f = 0; f < pk->key.n_feeds; f++) {
        const ge2_plan_tensor *pt = &pk->plan->tensors[pk->key.feed_ids[f]];
        if (feeds[feed_of[f]].data != staging + pt->offset)
            memcpy(staging + pt->offset, feeds[feed_of[f]].data, pt->bytes);
    }
    return GE2_OK;
}

/* ---------------------------------------------------------------- step */

/* The key of these feeds, planned and prepared on first sight. */
static ge2_status key_for_feeds(ge2_program *program, ge2_mode mode, const ge2_feed *feeds, int n_feeds,
                                const char *fn, bool need_data, ge2_program_key **pk, int *index, int *feed_of)
{
    if (!program || (n_feeds > 0 && !feeds) || n_feeds < 0)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "%s: program and %d feeds required", fn, n_feeds);
    GE2_TRY(check_mode(mode, fn));
    GE2_TRY(ge2_program_check_graph(program, fn));
    ge2_key key;
    GE2_TRY(key_of_feeds(program, mode, feeds, n_feeds, fn, need_data, &key, feed_of));
    GE2_TRY(ge2_program_key_get(program, &key, index));
    *pk = program->keys[*index];
    return GE2_OK;
}

ge2_status ge2_program_key_of(ge2_program *program, ge2_mode mode, const ge2_feed *feeds, int n_feeds, const char *fn,
                              ge2_program_key **pk, int *index)
{
    int feed_of[GE2_MAX_FEEDS];
    return key_for_feeds(program, mode, feeds, n_feeds, fn, false, pk, index, feed_of);
}

ge2_status ge2_program_feed_buffers(ge2_program *program, ge2_mode mode, const ge2_feed *feeds, int n_feeds,
                                    void **ptrs)
{
    static const char fn[] = "ge2_program_feed_buffers";
    if (!ptrs)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "%s: ptrs must not be NULL (it receives %d buffers)", fn, n_feeds);
    int index, feed_of[GE2_MAX_FEEDS];
    ge2_program_key *pk;
    GE2_TRY(key_for_feeds(program, mode, feeds, n_feeds, fn, false, &pk, &index, feed_of));
    /* The buffer the key's next step fills; not advanced here, so calling
     * again before that step gives the same buffers, contents kept. */
    int s = pk->next_staging;
    GE2_TRY(staging_wait(program, pk, s));
    for (int f = 0; f < pk->key.n_feeds; f++)
        ptrs[feed_of[f]] = (unsigned char *)pk->staging[s] + pk->plan->tensors[pk->key.feed_ids[f]].offset;
    pk->handed_out = true;
    return GE2_OK;
}

ge2_status ge2_program_step(ge2_program *program, ge2_mode mode, const ge2_feed *feeds, int n_feeds)
{
    int index, feed_of[GE2_MAX_FEEDS];
    ge2_program_key *pk;
    GE2_TRY(key_for_feeds(program, mode, feeds, n_feeds, "ge2_program_step", true, &pk, &index, feed_of));
    int s = pk->next_staging;
    GE2_TRY(stage_feeds(program, pk, s, feeds, feed_of));
    ge2_status st = program->backend->exec_run(program->bctx, &pk->exec, s);
    if (st != GE2_OK) {
        /* Part of the step may be enqueued, its upload reading slot s: let
         * the device finish before the host may refill it. The slot stays
         * the key's next, the step is not counted, its error is reported. */
        char why[512];
        snprintf(why, sizeof why, "%s", ge2_last_error());
        (void)program->backend->sync(program->bctx);
        return ge2_error(st, "%s", why);
    }
    pk->next_staging = (s + 1) % GE2_STAGING_BUFFERS;
    pk->handed_out = false;
    pk->ran_since_prepare = true;
    pk->in_flight[s] = true;
    pk->step_number[s] = ++program->steps_issued[mode];
    program->last_key[mode] = index;
    /* After the whole step: when it is done, slot s's staging has been read
     * and its results have landed. */
    return ge2_program_source_record(program, pk->fence[s]);
}

ge2_status ge2_program_sync(ge2_program *program)
{
    if (!program)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_program_sync: program must not be NULL");
    return program->backend->sync(program->bctx);
}

ge2_status ge2_program_read_output(ge2_program *program, ge2_mode mode, const ge2_tensor *t, void *dst, size_t bytes)
{
    if (!program || !t || !dst)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_program_read_output: program, tensor and dst must not be NULL");
    GE2_TRY(check_mode(mode, "ge2_program_read_output"));
    if (!ge2_program_has_tensor(program, t))
        return ge2_error(GE2_ERR_GRAPH, "ge2_program_read_output: tensor '%s' belongs to another graph", t->name);
    if (program->last_key[mode] < 0)
        return ge2_error(GE2_ERR_STATE, "ge2_program_read_output: no %s step has run yet", ge2_program_mode_name(mode));
    const ge2_program_key *pk = program->keys[program->last_key[mode]];
    const ge2_plan_tensor *pt = &pk->plan->tensors[t->id];
    char s[64];
    ge2_shape_str(pt->shape, s, sizeof s);
    /* what outlives the step; the arena is the next step's (or key's) */
    bool kept = pt->pool == GE2_POOL_INPUTS || pt->pool == GE2_POOL_PARAMS || pt->pool == GE2_POOL_GRADS ||
                pt->pool == GE2_POOL_CONSTANTS;
    if (pt->pool == GE2_POOL_ARENA && ge2_param_of_grad(program->graph, t))
        return ge2_error(GE2_ERR_INVALID_ARGUMENT,
                         "ge2_program_read_output: '%s' %s is a parameter gradient, consumed by its layer's "
                         "per-parameter update, which frees it within the step; mark it with ge2_mark_output before "
                         "ge2_optimizer, or use update_mode flat",
                         t->name, s);
    if (!kept)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT,
                         "ge2_program_read_output: '%s' %s is not an output of the %s step (mark it with ge2_mark_output)",
                         t->name, s, ge2_program_mode_name(mode));
    if (bytes != pt->bytes)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_program_read_output: '%s' is %s %s (%zu bytes), dst has %zu",
                         t->name, ge2_dtype_name(t->dtype), s, pt->bytes, bytes);
    /* A feed is read from the last step's device staging where the key has
     * one: the slot's launches read the feeds there and nothing fills the
     * feed region. The next step stages into the other slot. */
    const void *src = ge2_program_tensor_data(program, pk, t->id);
    const int last = (pk->next_staging + GE2_STAGING_BUFFERS - 1) % GE2_STAGING_BUFFERS;
    if (pt->pool == GE2_POOL_INPUTS && pt->offset + pt->bytes <= pk->staging_bytes && pk->device_staging[last])
        src = (const unsigned char *)pk->device_staging[last] + pt->offset;
    return program->backend->download(program->bctx, dst, src, bytes);
}
