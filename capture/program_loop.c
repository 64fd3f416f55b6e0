/* Many steps of one graph key in one device launch (ge2_backend.exec_loop),
 * for ge2_program_run.
 *
 * The loop starts where the host's bookkeeping stands: every step enqueued
 * before it is waited for and added to the sums, and the sums, the mode's
 * step number and its first non-finite loss go to the loop's counters. The
 * device then adds each step's results in step order, as the host would
 * (program_step.c's fold_up_to), so the sums come back with the same bits
 * as those steps made one at a time; the host takes them as its own. The
 * loop runs staging slot 0's launches (its feed views at the slot's device
 * staging, or the feed region) and gathers each batch there, so the key's
 * last step is slot 0's for ge2_program_read_output. What keeps a loop
 * from running (its memory, its capture) leaves the mode's runs a step a
 * launch, with the reason, rather than failing them.
 */
#include <string.h>

#include "capture/program_internal.h"
#include "graph/error.h"

/* counters, then [n_results] sums, then [n_results] result descriptions */
static size_t sums_offset(void) { return (sizeof(ge2_loop_counters) + 15) / 16 * 16; }
static size_t results_offset(int n) { return sums_offset() + ((size_t)n * sizeof(double) + 15) / 16 * 16; }
static size_t block_bytes(int n) { return results_offset(n) + (size_t)n * sizeof(ge2_loop_result); }

/* The key's loop block (device) and its mirror (pinned), with the result
 * descriptions written and uploaded once: slot 0's copies name where each
 * result is. */
static ge2_status make_block(ge2_program *program, ge2_program_key *pk, int n_results)
{
    if (pk->loop_block)
        return GE2_OK;
    const ge2_backend *b = program->backend;
    const size_t bytes = block_bytes(n_results);
    GE2_TRY(b->alloc_host(program->bctx, bytes, &pk->loop_host));
    ge2_status st = b->alloc(program->bctx, bytes, &pk->loop_block);
    if (st != GE2_OK) {
        b->free_host(program->bctx, pk->loop_host);
        pk->loop_host = NULL;
        return st;
    }
    memset(pk->loop_host, 0, bytes);
    ge2_loop_result *res = (ge2_loop_result *)((unsigned char *)pk->loop_host + results_offset(n_results));
    for (int r = 0; r < n_results; r++) {
        const int id = program->result_ids[r];
        const ge2_copy *copy = &pk->exec.io[0].results[r];
        res[r].src = copy->bytes ? copy->src : NULL; /* NULL: not computed */
        res[r].bytes = (int32_t)copy->bytes;
        res[r].is_f64 = program->graph->tensors[id]->dtype == GE2_F64;
        res[r].role = id == program->loss_id ? GE2_LOOP_LOSS : id == program->metric_id ? GE2_LOOP_METRIC : 0;
    }
    return b->upload(program->bctx, pk->loop_block, pk->loop_host, bytes); /* the descriptions, once */
}

/* Where slot 0's launches read feed tensor `id`. */
static void *slot0_feed(const ge2_program *program, const ge2_program_key *pk, int id)
{
    const ge2_plan_tensor *pt = &pk->plan->tensors[id];
    if (pk->device_staging[0] && pt->offset + pt->bytes <= pk->staging_bytes)
        return (unsigned char *)pk->device_staging[0] + pt->offset;
    return ge2_program_tensor_data(program, pk, id);
}

void ge2_program_loops_off(ge2_program *program, ge2_mode mode, const char *why)
{
    snprintf(program->per_step_why[mode], sizeof program->per_step_why[mode], "%s", why);
    program->loops_off[mode] = true;
}

ge2_status ge2_program_loop(ge2_program *program, ge2_program_key *pk, int index, ge2_step_loop *loop,
                            const int *feed_ids, int64_t steps, int64_t epoch, int64_t batch_in_epoch,
                            int64_t *counted)
{
    *counted = 0;
    const ge2_mode mode = pk->key.mode;
    /* without a loss no step is counted, and nothing is summed */
    const int n_results = program->loss_id >= 0 ? program->n_results : 0;
    if (make_block(program, pk, n_results) != GE2_OK) {
        ge2_program_loops_off(program, mode, ge2_last_error());
        return GE2_OK;
    }
    /* the host waits here and after the launch: the loop starts from the
     * sums of every step before it, and its own come back before the run
     * returns (a run is many steps, so the two waits cost little a step) */
    GE2_TRY(ge2_program_finish_steps(program));

    unsigned char *host = pk->loop_host, *dev = pk->loop_block;
    ge2_loop_counters *c = (ge2_loop_counters *)host;
    ge2_metrics *m = &program->metrics[mode];
    *c = (ge2_loop_counters){steps, epoch, batch_in_epoch, program->steps_issued[mode], m->first_nonfinite,
                             program->bad_index_seen, 0, 0, m->loss_sum, m->metric_sum};
    double *sums = (double *)(host + sums_offset());
    for (int r = 0; r < n_results; r++)
        sums[r] = program->result_sums[mode][r];
    for (int f = 0; f < loop->n_fields; f++)
        loop->field[f].feed = slot0_feed(program, pk, feed_ids[f]);
    loop->counters = (ge2_loop_counters *)dev;
    loop->sums = (double *)(dev + sums_offset());
    loop->results = (const ge2_loop_result *)(dev + results_offset(n_results));
    loop->n_results = n_results;
    loop->bad_index_count = &program->control->bad_index.count;

    /* the counters and sums; the result descriptions are there already */
    GE2_TRY(program->backend->upload(program->bctx, dev, host, sums_offset() + (size_t)n_results * sizeof(double)));
    const ge2_status ran = program->backend->exec_loop(program->bctx, &pk->exec, loop, program->dataset_generation[mode]);
    char why[512] = "";
    if (ran != GE2_OK)
        snprintf(why, sizeof why, "%s", ge2_last_error());
    GE2_TRY(program->backend->download(program->bctx, host, dev, sums_offset() + (size_t)n_results * sizeof(double)));
    if (ran != GE2_OK && c->steps_run == 0) {
        /* nothing of the loop ran: these steps and the mode's later ones
         * go one at a time, and its runs say why */
        ge2_program_loops_off(program, mode, why);
        return GE2_OK;
    }
    /* a step whose own kernel failed (the CPU) is not issued, as
     * ge2_program_step does not count one */
    const int64_t issued = c->steps_run - (ran != GE2_OK ? 1 : 0);
    program->steps_issued[mode] += issued;
    if (issued > 0) {
        program->last_key[mode] = index;
        pk->next_staging = 1 % GE2_STAGING_BUFFERS;
        pk->handed_out = false;
        pk->ran_since_prepare = true;
    }
    /* a failed step ran but is not counted, and the run stays at it */
    *counted = c->steps_run - (c->failed ? 1 : 0);
    if (program->loss_id >= 0) {
        m->steps += *counted;
        m->examples += *counted * pk->batch;
        m->loss_sum = c->loss_sum;
        m->metric_sum = c->metric_sum;
        m->first_nonfinite = c->first_nonfinite;
        for (int r = 0; r < n_results; r++)
            program->result_sums[mode][r] = sums[r];
    }
    if (ran != GE2_OK) /* the CPU: the failed step's own error */
        return ge2_error(ran, "%s", why);
    if (c->bad_index_count > program->bad_index_seen)
        return ge2_program_bad_index_found(program, c->bad_index_count);
    return GE2_OK;
}
