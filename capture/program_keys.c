/* The graph-key cache: per key a plan, its IO buffer, staging slots and
 * result areas, and the launches and step copies resolved to concrete
 * addresses.
 *
 * Shared arena (the default): keys never run concurrently, so all of them
 * point into one backing allocation of the largest key's size. A key larger
 * than the backing grows it; the other keys' launches then point at freed
 * memory, so they are released (on CUDA: their captured graphs), re-resolved
 * and prepared again, and re-capture on their next step. That happens at most
 * once per distinct larger size, typically once (the first train key is the
 * largest), so the simple, obviously correct choice is kept.
 */
#include <string.h>

#include "capture/program_internal.h"
#include "graph/alloc.h"
#include "graph/error.h"

/* Where a key's launches find its IO buffer: the feeds and outputs at
 * `inputs`, but the feed region's first feed_bytes at `feeds` (a staging
 * slot's device copy of them; `inputs` itself when the launches read the
 * feed region) */
typedef struct io_bases {
    unsigned char *inputs, *feeds;
    size_t feed_bytes;
} io_bases;

/* Where tensor_id lives for a key of plan whose IO buffer is at io and
 * whose arena is at `arena`; NULL without memory. */
static void *tensor_at(const ge2_program *program, const ge2_plan *plan, io_bases io, void *arena, int tensor_id)
{
    const ge2_plan_tensor *pt = &plan->tensors[tensor_id];
    if (pt->pool == GE2_POOL_INPUTS && pt->offset < io.feed_bytes)
        return io.feeds + pt->offset;
    unsigned char *base = NULL;
    switch (pt->pool) {
    case GE2_POOL_PARAMS: base = (unsigned char *)program->pools.params; break;
    case GE2_POOL_GRADS: base = (unsigned char *)program->pools.grads; break;
    case GE2_POOL_PARAM_COPIES: base = (unsigned char *)program->pools.copies; break;
    case GE2_POOL_CONSTANTS: base = program->constants; break;
    case GE2_POOL_BUFFERS: base = program->buffers; break;
    case GE2_POOL_INPUTS: base = io.inputs; break;
    case GE2_POOL_ARENA: base = arena; break;
    default: return NULL;
    }
    return base + pt->offset;
}

/* The key's IO buffer as the launches that read the feed region see it */
static io_bases io_of(const ge2_program_key *pk)
{
    return (io_bases){pk->inputs, pk->inputs, 0};
}

void *ge2_program_tensor_data(const ge2_program *program, const ge2_program_key *pk, int tensor_id)
{
    return tensor_at(program, pk->plan, io_of(pk), pk->exec.arena, tensor_id);
}

/* Output tensor_id (device) -> *dst (host) after each step: a copy of no
 * bytes when there is no such output, the key does not compute it, or it is
 * not a scalar (nothing to sum; *dst stays 0). */
static ge2_copy result_copy(const ge2_program *program, const ge2_program_key *pk, int tensor_id, double *dst)
{
    ge2_copy none = {dst, NULL, 0};
    if (tensor_id < 0)
        return none;
    const void *src = ge2_program_tensor_data(program, pk, tensor_id);
    size_t bytes = pk->plan->tensors[tensor_id].bytes;
    if (!src || bytes > sizeof *dst)
        return none;
    ge2_copy c = {dst, src, bytes};
    return c;
}

/* Each slot's copies: its staging to the feed region, and the results
 * (loss, metrics, the count of out-of-range labels and ids) to its result
 * area. */
static void resolve_step_io(const ge2_program *program, ge2_program_key *pk)
{
    const int per_slot = ge2_program_slot_results(program);
    for (int s = 0; s < GE2_STAGING_BUFFERS; s++) {
        ge2_step_io *io = &pk->exec.io[s];
        double *results = &pk->results[s * per_slot];
        ge2_copy *copies = &pk->result_copies[s * per_slot];
        if (pk->device_staging[s]) {
            io->stage = (ge2_copy){pk->device_staging[s], pk->staging[s], pk->staging_bytes};
            io->upload = (ge2_copy){pk->inputs, pk->device_staging[s], pk->staging_bytes};
        } else {
            io->stage = (ge2_copy){NULL, NULL, 0};
            io->upload = (ge2_copy){pk->inputs, pk->staging[s], pk->staging_bytes};
        }
        for (int r = 0; r < program->n_results; r++)
            copies[r] = result_copy(program, pk, program->result_ids[r], &results[r]);
        copies[program->n_results] = (ge2_copy){&results[program->n_results], &program->control->bad_index.count,
                                                sizeof program->control->bad_index.count};
        io->results = copies;
        io->n_results = per_slot;
    }
}

/* *l: launch p of plan, its views at io and `arena` (tensor_at), its
 * scratch where the plan placed it. */
static void resolve_launch(const ge2_program *program, const ge2_plan *plan, io_bases io, void *arena, int p,
                           ge2_launch *l)
{
    const ge2_node *node = &program->graph->nodes[plan->schedule[p]];
    memset(l, 0, sizeof *l);
    l->node = node;
    l->n_in = node->n_inputs;
    l->n_out = node->n_outputs;
    for (int i = 0; i < node->n_inputs; i++) {
        const int t = node->inputs[i];
        l->in[i] = (ge2_view){tensor_at(program, plan, io, arena, t), program->graph->tensors[t]->dtype,
                              plan->tensors[t].shape};
        /* Shape only: its memory may already hold another tensor. */
        if (ge2_op_flags(node->op) & GE2_OPF_LIKE1 && i == 1)
            l->in[i].data = NULL;
    }
    for (int o = 0; o < node->n_outputs; o++) {
        const int t = node->outputs[o];
        l->out[o] = (ge2_view){tensor_at(program, plan, io, arena, t), program->graph->tensors[t]->dtype,
                               plan->tensors[t].shape};
    }
    l->control = program->control;
    l->pools = program->pools;
    l->tf32 = program->options.o.precision == GE2_PRECISION_TF32;
    l->bf16_operands = program->options.o.precision == GE2_PRECISION_BF16;
    l->f16_operands = program->options.o.precision == GE2_PRECISION_FP16;
    l->settings = &program->options.settings;
    l->training = plan->key.mode == GE2_MODE_TRAIN;
    l->collective = program->options.o.collective;
    if (plan->scratch_bytes && plan->scratch_bytes[p]) {
        l->scratch = (unsigned char *)arena + plan->scratch_offset[p];
        l->scratch_bytes = plan->scratch_bytes[p];
    }
}

/* Fills every launch, each staging slot's own (feeds at its device
 * staging, where it has one) and the step's copies from the plan and the
 * current pool addresses. */
static void resolve_launches(const ge2_program *program, ge2_program_key *pk)
{
    for (int p = 0; p < pk->plan->n_steps; p++)
        resolve_launch(program, pk->plan, io_of(pk), pk->exec.arena, p, &pk->exec.launches[p]);
    for (int s = 0; s < GE2_STAGING_BUFFERS; s++) {
        if (!pk->exec.slot_launches[s])
            continue;
        const io_bases staged = {pk->inputs, pk->device_staging[s], pk->staging_bytes};
        for (int p = 0; p < pk->plan->n_steps; p++)
            resolve_launch(program, pk->plan, staged, pk->exec.arena, p, &pk->exec.slot_launches[s][p]);
    }
    resolve_step_io(program, pk);
}

/* Where a new key's feeds, outputs and arena are while the planner asks
 * its launches for their scratch (ge2_plan_scratch_query), before the
 * arena exists, whose size waits on the answers: a base no one reads or
 * writes through, aligned as the arena and the IO buffer will be, so a
 * launch sees which tensors the key computes (non-NULL) and their
 * alignment. */
static _Alignas(GE2_ARENA_ALIGN) unsigned char provisional_base[GE2_ARENA_ALIGN];

/* ge2_plan_scratch_query.bytes for a key of program (user): the backend's
 * answer for the launch at position `step`, resolved at the provisional
 * base. */
static size_t launch_scratch(void *user, const ge2_plan *plan, int step)
{
    const ge2_program *program = user;
    ge2_launch l;
    const io_bases io = {provisional_base, provisional_base, 0};
    resolve_launch(program, plan, io, provisional_base, step, &l);
    return program->backend->launch_scratch_bytes(program->bctx, &l);
}

static void release_exec(ge2_program *program, ge2_program_key *pk)
{
    program->backend->exec_release(program->bctx, &pk->exec);
    pk->exec.backend_data = NULL;
    pk->exec.captured = false;
    pk->prepared = false;
}

static ge2_status prepare_exec(ge2_program *program, ge2_program_key *pk)
{
    GE2_TRY(program->backend->exec_prepare(program->bctx, &pk->exec));
    pk->prepared = true;
    pk->ran_since_prepare = false;
    FILE *dump = program->options.o.dump;
    if (dump && !pk->dumped_kernels) {
        fprintf(dump, "-- pass select kernels\n");
        ge2_program_print_kernels(program, pk, dump);
        pk->dumped_kernels = true;
    }
    return GE2_OK;
}

/* Grows the shared backing to `bytes`; see the top of the file. The new
 * block is allocated before the old one is let go, so a failed allocation
 * leaves every existing key as it was. Once the old block is gone every key
 * must point at the new one, so all are re-resolved and prepared even after
 * one prepare fails (the first error is returned); a key left unprepared is
 * prepared again on its next use (ge2_program_key_get). */
static ge2_status grow_shared_arena(ge2_program *program, size_t bytes)
{
    const ge2_backend *b = program->backend;
    void *arena = NULL;
    GE2_TRY(b->alloc(program->bctx, bytes, &arena));
    ge2_status st = b->sync(program->bctx);
    if (st != GE2_OK) {
        b->free(program->bctx, arena);
        return st;
    }
    for (int k = 0; k < program->n_keys; k++)
        if (program->keys[k]->exec.launches && !program->keys[k]->arena_own)
            release_exec(program, program->keys[k]);
    b->free(program->bctx, program->arena);
    program->arena = arena;
    program->arena_bytes = bytes;
    ge2_status first = GE2_OK;
    for (int k = 0; k < program->n_keys; k++) {
        ge2_program_key *pk = program->keys[k];
        if (!pk->exec.launches || pk->arena_own)
            continue;
        pk->exec.arena = arena;
        resolve_launches(program, pk);
        ge2_status st_k = prepare_exec(program, pk);
        if (first == GE2_OK)
            first = st_k;
    }
    return first;
}

size_t ge2_program_feed_region_bytes(const ge2_plan *plan)
{
    size_t end = 0;
    for (int f = 0; f < plan->key.n_feeds; f++) {
        const ge2_plan_tensor *pt = &plan->tensors[plan->key.feed_ids[f]];
        if (pt->offset + pt->bytes > end)
            end = pt->offset + pt->bytes;
    }
    return end;
}

/* Plans and allocates a new key into *pk (zeroed). */
static ge2_status make_key(ge2_program *program, ge2_program_key *pk, const ge2_key *key)
{
    const ge2_backend *b = program->backend;
    pk->key = *key;
    FILE *dump = program->options.o.dump;
    if (dump)
        fprintf(dump, "== graph key %d: %s, batch %lld ==\n", program->n_keys, key->mode == GE2_MODE_TRAIN ? "train" : "eval",
                key->n_feeds > 0 && key->feed_shapes[0].ndim > 0 ? (long long)key->feed_shapes[0].dim[0] : 1LL);
    const ge2_plan_scratch_query scratch = {launch_scratch, program};
    GE2_TRY(ge2_plan_new_dumped(program->graph, program->layout, key,
                                program->backend->launch_scratch_bytes ? &scratch : NULL, dump, &pk->plan));
    char key_name[32];
    snprintf(key_name, sizeof key_name, "key%d", program->n_keys);
    GE2_TRY(ge2_program_dump_dot(program, key_name, pk->plan));
    const ge2_plan *plan = pk->plan;
    pk->exec.plan = plan;
    pk->exec.n_launches = plan->n_steps;
    pk->exec.launches = ge2_calloc((size_t)(plan->n_steps > 0 ? plan->n_steps : 1), sizeof *pk->exec.launches);
    if (!pk->exec.launches)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_program_step: %d launches", plan->n_steps);
    pk->staging_bytes = ge2_program_feed_region_bytes(plan);
    pk->batch = key->n_feeds > 0 && key->feed_shapes[0].ndim > 0 ? key->feed_shapes[0].dim[0] : 1;
    GE2_TRY(b->alloc(program->bctx, plan->input_bytes ? plan->input_bytes : 1, &pk->inputs));
    for (int i = 0; i < GE2_STAGING_BUFFERS; i++) {
        GE2_TRY(b->alloc_host(program->bctx, pk->staging_bytes ? pk->staging_bytes : 1, &pk->staging[i]));
        if (b->fence_new)
            GE2_TRY(b->fence_new(program->bctx, &pk->fence[i]));
        if (ge2_program_feeds_ahead(program) && pk->staging_bytes) {
            GE2_TRY(b->alloc(program->bctx, pk->staging_bytes, &pk->device_staging[i]));
            pk->exec.slot_launches[i] =
                ge2_calloc((size_t)(plan->n_steps > 0 ? plan->n_steps : 1), sizeof *pk->exec.slot_launches[i]);
            if (!pk->exec.slot_launches[i])
                return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_program_step: %d launches of staging slot %d",
                                 plan->n_steps, i);
        }
    }
    const size_t results = (size_t)GE2_STAGING_BUFFERS * (size_t)ge2_program_slot_results(program);
    GE2_TRY(b->alloc_host(program->bctx, results * sizeof(double), (void **)&pk->results));
    pk->result_copies = ge2_calloc(results, sizeof *pk->result_copies);
    if (!pk->result_copies)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_program_step: %zu result copies", results);

    size_t arena_bytes = plan->arena_bytes ? plan->arena_bytes : 1;
    const size_t more = program->options.o.separate_arenas ? arena_bytes
                        : arena_bytes > program->arena_bytes ? arena_bytes : 0;
    char what[96];
    snprintf(what, sizeof what, "the activations of a %s step of batch %lld", pk->key.mode == GE2_MODE_EVAL ? "eval" : "train",
             (long long)pk->batch);
    GE2_TRY(ge2_program_check_memory(program, "ge2_program_step", (double)more, what));
    if (program->options.o.separate_arenas) {
        GE2_TRY(b->alloc(program->bctx, arena_bytes, &pk->arena_own));
        pk->exec.arena = pk->arena_own;
    } else {
        if (arena_bytes > program->arena_bytes)
            GE2_TRY(grow_shared_arena(program, arena_bytes));
        pk->exec.arena = program->arena;
    }
    resolve_launches(program, pk);
    return prepare_exec(program, pk);
}

void ge2_program_key_release(ge2_program *program, ge2_program_key *pk)
{
    const ge2_backend *b = program->backend;
    if (pk->exec.launches)
        release_exec(program, pk);
    ge2_free(pk->exec.launches);
    pk->exec.launches = NULL;
    for (int s = 0; s < GE2_STAGING_BUFFERS; s++) {
        ge2_free(pk->exec.slot_launches[s]);
        pk->exec.slot_launches[s] = NULL;
    }
    b->free(program->bctx, pk->arena_own);
    b->free(program->bctx, pk->inputs);
    b->free_host(program->bctx, pk->results);
    ge2_free(pk->result_copies);
    b->free(program->bctx, pk->loop_block);
    b->free_host(program->bctx, pk->loop_host);
    for (int i = 0; i < GE2_STAGING_BUFFERS; i++) {
        b->free_host(program->bctx, pk->staging[i]);
        b->free(program->bctx, pk->device_staging[i]);
        if (pk->fence[i])
            b->fence_free(program->bctx, pk->fence[i]);
    }
    ge2_plan_free(pk->plan);
    ge2_free(pk);
}

ge2_status ge2_program_key_get(ge2_program *program, const ge2_key *key, int *index)
{
    for (int k = 0; k < program->n_keys; k++) {
        if (ge2_key_equal(&program->keys[k]->key, key)) {
            if (!program->keys[k]->prepared)
                GE2_TRY(prepare_exec(program, program->keys[k]));
            *index = k;
            return GE2_OK;
        }
    }
    if (!ge2_reserve((void **)&program->keys, &program->cap_keys, program->n_keys, sizeof *program->keys, 4))
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_program_step: key cache of %d", program->n_keys + 1);
    ge2_program_key *pk = ge2_calloc(1, sizeof *pk);
    if (!pk)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_program_step: key");
    ge2_status st = make_key(program, pk, key);
    if (st != GE2_OK) {
        ge2_program_key_release(program, pk);
        return st;
    }
    program->keys[program->n_keys] = pk;
    *index = program->n_keys++;
    return GE2_OK;
}
