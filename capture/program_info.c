/* What a caller reads or sets between steps: the learning rate, the step
 * count, parameters, and the memory plans. */
#include <math.h>
#include <stdio.h>
#include <stddef.h>

#include "capture/program_internal.h"
#include "graph/error.h"

/* --------------------------------------------------- learning rate, steps */

ge2_status ge2_set_lr(ge2_program *program, double lr)
{
    if (!program)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_set_lr: program must not be NULL");
    if (!isfinite(lr) || lr < 0)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_set_lr: lr %g must be finite and >= 0", lr);
    /* The upload reads its source when the device gets to it, after this
     * returns: each value gets its own pinned slot, refilled only once the
     * upload from GE2_LR_RING calls ago has landed, so a per-step LR (a
     * schedule driven from the host) does not serialize host and device. */
    int s = program->lr_next;
    program->lr_next = (s + 1) % GE2_LR_RING;
    GE2_TRY(ge2_program_source_wait(program, program->lr_fence[s]));
    program->lr_ring[s] = (float)lr;
    /* Only base_lr: every other field is the kernels' to write. */
    GE2_TRY(program->backend->upload(program->bctx, &program->control->base_lr, &program->lr_ring[s],
                                     sizeof program->lr_ring[s]));
    GE2_TRY(ge2_program_source_record(program, program->lr_fence[s]));
    /* the mirror ge2_get_lr and checkpoints read; no upload reads it now */
    program->control_host->base_lr = (float)lr;
    return GE2_OK;
}

ge2_status ge2_get_lr(ge2_program *program, double *lr)
{
    if (!program || !lr)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_get_lr: program and lr must not be NULL");
    *lr = program->control_host->base_lr;
    return GE2_OK;
}

ge2_status ge2_program_step_count(ge2_program *program, int64_t *steps)
{
    if (!program || !steps)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_program_step_count: program and steps must not be NULL");
    int64_t step;
    GE2_TRY(program->backend->download(program->bctx, &step, (const char *)program->control + offsetof(ge2_control, step),
                                       sizeof step));
    program->control_host->step = step;
    *steps = step;
    return GE2_OK;
}

ge2_status ge2_program_loss_scale(ge2_program *program, double *scale, int64_t *skipped_steps)
{
    if (!program || !scale || !skipped_steps)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT,
                         "ge2_program_loss_scale: program, scale and skipped_steps must not be NULL");
    ge2_control c;
    GE2_TRY(program->backend->download(program->bctx, &c, program->control, sizeof c));
    *scale = c.loss_scale;
    *skipped_steps = c.skipped_steps;
    return GE2_OK;
}

/* ---------------------------------------------- parameters and buffers */

/* Where t, a tensor of the persistent pool of `role`, lives on the device;
 * bytes must be its size. */
static ge2_status persistent_place(const ge2_program *program, const ge2_tensor *t, ge2_role role, size_t bytes,
                                   const char *fn, char **place)
{
    if (!program || !t)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "%s: program and tensor must not be NULL", fn);
    if (!ge2_program_has_tensor(program, t))
        return ge2_error(GE2_ERR_GRAPH, "%s: tensor '%s' belongs to another graph", fn, t->name);
    char s[64];
    ge2_shape_str(t->shape, s, sizeof s);
    if (t->role != role)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "%s: '%s' %s is a %s, not a %s", fn, t->name, s,
                         ge2_role_name(t->role), ge2_role_name(role));
    size_t want = (size_t)ge2_shape_numel(t->shape) * ge2_dtype_size(t->dtype);
    if (bytes != want)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "%s: '%s' is %s %s (%zu bytes), buffer has %zu", fn, t->name,
                         ge2_dtype_name(t->dtype), s, want, bytes);
    char *pool = role == GE2_ROLE_PARAMETER ? (char *)program->pools.params : (char *)program->buffers;
    *place = pool + program->layout->offset[t->id];
    return GE2_OK;
}

static ge2_status get_persistent(ge2_program *program, const ge2_tensor *t, ge2_role role, void *dst, size_t bytes,
                                 const char *fn)
{
    char *place;
    GE2_TRY(persistent_place(program, t, role, bytes, fn, &place));
    if (!dst)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "%s: dst must not be NULL", fn);
    return program->backend->download(program->bctx, dst, place, bytes);
}

static ge2_status set_persistent(ge2_program *program, const ge2_tensor *t, ge2_role role, const void *src,
                                 size_t bytes, const char *fn)
{
    char *place;
    GE2_TRY(persistent_place(program, t, role, bytes, fn, &place));
    if (!src)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "%s: src must not be NULL", fn);
    GE2_TRY(program->backend->upload(program->bctx, place, src, bytes));
    return program->backend->sync(program->bctx); /* src is the caller's: done with it on return */
}

ge2_status ge2_program_get_parameter(ge2_program *program, const ge2_tensor *param, void *dst, size_t bytes)
{
    return get_persistent(program, param, GE2_ROLE_PARAMETER, dst, bytes, "ge2_program_get_parameter");
}

ge2_status ge2_program_set_parameter(ge2_program *program, const ge2_tensor *param, const void *src, size_t bytes)
{
    GE2_TRY(set_persistent(program, param, GE2_ROLE_PARAMETER, src, bytes, "ge2_program_set_parameter"));
    return ge2_program_parameters_written(program);
}

ge2_status ge2_program_get_buffer(ge2_program *program, const ge2_tensor *buffer, void *dst, size_t bytes)
{
    return get_persistent(program, buffer, GE2_ROLE_BUFFER, dst, bytes, "ge2_program_get_buffer");
}

ge2_status ge2_program_set_buffer(ge2_program *program, const ge2_tensor *buffer, const void *src, size_t bytes)
{
    return set_persistent(program, buffer, GE2_ROLE_BUFFER, src, bytes, "ge2_program_set_buffer");
}

/* ----------------------------------------------------------------- plans */

/* The plan of the most recent step of mode, else one made now at the built shapes (*made: free it). */
static ge2_status plan_of_mode(ge2_program *program, ge2_mode mode, const ge2_plan **plan, ge2_plan **made)
{
    *made = NULL;
    if ((unsigned)mode >= GE2_MODE_COUNT)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_program_plan: unknown mode %d", (int)mode);
    if (program->last_key[mode] >= 0) {
        *plan = program->keys[program->last_key[mode]]->plan;
        return GE2_OK;
    }
    GE2_TRY(ge2_program_check_graph(program, "ge2_program_plan"));
    ge2_key key = program->feed_key;
    key.mode = mode;
    ge2_key_rehash(&key);
    GE2_TRY(ge2_plan_new(program->graph, program->layout, &key, made));
    *plan = *made;
    return GE2_OK;
}

/* The gradient pool: none when per-parameter updates keep gradients in the arena. */
static size_t gradient_pool_bytes(const ge2_program *program)
{
    return program->graph->per_parameter_updates ? 0 : program->layout->param_bytes;
}

static int update_node_count(const ge2_graph *g)
{
    int count = 0;
    for (int n = 0; n < g->n_nodes; n++)
        count += (ge2_op_flags(g->nodes[n].op) & GE2_OPF_UPDATE) != 0;
    return count;
}

/* "flat update (4 nodes)": what the reports say about the optimizer. */
static const char *update_mode_text(const ge2_program *program, char *buf, size_t size)
{
    const ge2_graph *g = program->graph;
    if (!g->has_optimizer)
        snprintf(buf, size, "none");
    else if (g->per_parameter_updates)
        snprintf(buf, size, "per_parameter (%d update nodes, gradients in the arena)", update_node_count(g));
    else
        snprintf(buf, size, "flat (1 update over the pools)");
    return buf;
}

ge2_status ge2_program_plan_stats(ge2_program *program, ge2_mode mode, ge2_plan_stats *out)
{
    if (!program || !out)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_program_plan_stats: program and out must not be NULL");
    const ge2_plan *plan;
    ge2_plan *made;
    GE2_TRY(plan_of_mode(program, mode, &plan, &made));
    ge2_plan_stats s = {0};
    s.arena_bytes = plan->arena_bytes;
    s.lower_bound_bytes = plan->lower_bound_bytes;
    s.naive_bytes = plan->naive_bytes;
    s.parameter_bytes = program->layout->param_bytes;
    s.parameter_copy_bytes = program->layout->param_copy_bytes;
    s.gradient_bytes = gradient_pool_bytes(program);
    s.optimizer_state_bytes = (size_t)program->pools.slots * program->layout->param_bytes;
    s.update_mode = program->graph->per_parameter_updates ? GE2_UPDATE_PER_PARAMETER : GE2_UPDATE_FLAT;
    s.update_nodes = update_node_count(program->graph);
    s.input_bytes = plan->input_bytes;
    if (ge2_program_feeds_ahead(program))
        s.device_staging_bytes = GE2_STAGING_BUFFERS * ge2_program_feed_region_bytes(plan);
    s.workspace_bytes = program->backend->workspace_bytes ? program->backend->workspace_bytes(program->bctx) : 0;
    s.n_nodes = plan->n_steps;
    s.device_bytes = s.parameter_bytes + s.parameter_copy_bytes + s.gradient_bytes + s.optimizer_state_bytes + s.arena_bytes +
                     s.input_bytes + s.device_staging_bytes + s.workspace_bytes;
    s.fused_groups = plan->n_groups;
    for (int g = 0; g < plan->n_groups; g++)
        s.fused_nodes += plan->groups[g].count;
    for (int t = 0; t < plan->n_tensors; t++)
        s.n_tensors += plan->tensors[t].pool != GE2_POOL_NONE;
    *out = s;
    ge2_plan_free(made);
    return GE2_OK;
}

static void report_pools(const ge2_program *program, FILE *out)
{
    const ge2_layout *l = program->layout;
    char mode[96];
    fprintf(out, "pools: params=%zu grads=%zu optimizer_state=%zu (%d slots) constants=%zu buffers=%zu control=%zu",
            l->param_bytes, gradient_pool_bytes(program), (size_t)program->pools.slots * l->param_bytes,
            program->pools.slots, l->constant_bytes, l->buffer_bytes, sizeof(ge2_control));
    if (l->param_copy_bytes)
        fprintf(out, " param_copies=%zu (bf16)", l->param_copy_bytes);
    fprintf(out, " workspace=%zu shared_arena=%zu%s\n",
            program->backend->workspace_bytes ? program->backend->workspace_bytes(program->bctx) : 0,
            program->arena_bytes, program->options.o.separate_arenas ? " (separate arenas per key)" : "");
    fprintf(out, "optimizer: %s\n", update_mode_text(program, mode, sizeof mode));
}

ge2_status ge2_program_plan_report(ge2_program *program, FILE *out)
{
    if (!program || !out)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_program_plan_report: program and out must not be NULL");
    fprintf(out, "ge2 program on %s: %d graph key(s)\n", program->backend->name, program->n_keys);
    report_pools(program, out);
    if (program->n_keys == 0) {
        /* Nothing has run yet: show the train key at the built shapes. */
        const ge2_plan *plan;
        ge2_plan *made;
        GE2_TRY(plan_of_mode(program, GE2_MODE_TRAIN, &plan, &made));
        fprintf(out, "(not run yet; train key at built shapes)\n");
        ge2_plan_report(plan, program->graph, out);
        ge2_plan_free(made);
    }
    for (int k = 0; k < program->n_keys; k++)
        ge2_plan_report(program->keys[k]->plan, program->graph, out);
    return ferror(out) ? ge2_error(GE2_ERR_IO, "ge2_program_plan_report: write failed") : GE2_OK;
}

ge2_status ge2_program_plan_svg(ge2_program *program, ge2_mode mode, const char *path)
{
    if (!program || !path)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_program_plan_svg: program and path must not be NULL");
    const ge2_plan *plan;
    ge2_plan *made;
    GE2_TRY(plan_of_mode(program, mode, &plan, &made));
    FILE *f = fopen(path, "w");
    if (!f) {
        ge2_plan_free(made);
        return ge2_error(GE2_ERR_IO, "ge2_program_plan_svg: cannot open '%s' for the %s plan", path, ge2_program_mode_name(mode));
    }
    ge2_status st = ge2_plan_svg(plan, program->graph, f);
    if (fclose(f) != 0 && st == GE2_OK)
        st = ge2_error(GE2_ERR_IO, "ge2_program_plan_svg: writing '%s' failed", path);
    ge2_plan_free(made);
    return st;
}

int ge2_program_key_count(const ge2_program *program) { return program ? program->n_keys : 0; }

int ge2_program_capture_count(const ge2_program *program)
{
    return program && program->bctx ? program->backend->capture_count(program->bctx) : 0;
}

int ge2_program_launch_count(const ge2_program *program, ge2_mode mode)
{
    if (!program || (unsigned)mode >= GE2_MODE_COUNT || program->last_key[mode] < 0)
        return 0;
    return program->keys[program->last_key[mode]]->exec.n_launches;
}

int ge2_program_graph_kernel_count(const ge2_program *program, ge2_mode mode)
{
    if (!program || (unsigned)mode >= GE2_MODE_COUNT || program->last_key[mode] < 0 ||
        !program->backend->graph_kernel_count)
        return -1;
    return program->backend->graph_kernel_count(program->bctx, &program->keys[program->last_key[mode]]->exec);
}

/* --------------------------------------------------------- kernel report */

/* One view as "[64,784]", prefixed by its dtype unless f32; "-" for an
 * output this key does not need. Appended to buf at *n. */
static void append_view(const ge2_view *v, char *buf, size_t size, size_t *n)
{
    char s[64];
    if (!v->data)
        snprintf(s, sizeof s, "-");
    else if (v->dtype == GE2_F32)
        ge2_shape_str(v->shape, s, sizeof s);
    else {
        char shape[48];
        snprintf(s, sizeof s, "%s%s", ge2_dtype_name(v->dtype), ge2_shape_str(v->shape, shape, sizeof shape));
    }
    if (*n < size) {
        int w = snprintf(buf + *n, size - *n, "%s%s", *n ? " " : "", s);
        *n += w > 0 ? (size_t)w : 0;
    }
}

ge2_status ge2_program_kernel_report(ge2_program *program, ge2_mode mode, FILE *out)
{
    if (!program || !out)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_program_kernel_report: program and out must not be NULL");
    if ((unsigned)mode >= GE2_MODE_COUNT)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_program_kernel_report: unknown mode %d", (int)mode);
    if (program->last_key[mode] < 0)
        return ge2_error(GE2_ERR_STATE,
                         "ge2_program_kernel_report: no %s step has run yet; kernels are chosen when a graph key "
                         "first runs",
                         ge2_program_mode_name(mode));
    const ge2_program_key *key = program->keys[program->last_key[mode]];
    char update[96];
    fprintf(out, "ge2 kernels: %s key, batch %lld, %s backend, %d launches per step\n", ge2_program_mode_name(mode),
            (long long)key->batch, program->backend->name, key->exec.n_launches);
    fprintf(out, "optimizer: %s\n", update_mode_text(program, update, sizeof update));
    ge2_program_print_kernels(program, key, out);
    return ferror(out) ? ge2_error(GE2_ERR_IO, "ge2_program_kernel_report: write failed") : GE2_OK;
}

/* The sum of a timed key's launch times: µs per step. */
static double step_us(const ge2_program *program, const ge2_exec *exec)
{
    double sum = 0;
    for (int i = 0; i < exec->n_launches; i++) {
        int steps;
        const double us = program->backend->launch_us(program->bctx, exec, i, &steps);
        sum += us > 0 ? us : 0;
    }
    return sum > 0 ? sum : 1e-9;
}

void ge2_program_print_kernels(const ge2_program *program, const ge2_program_key *key, FILE *out)
{
    const ge2_exec *exec = &key->exec;
    for (int i = 0; i < exec->n_launches; i++) {
        const ge2_launch *l = &exec->launches[i];
        char shapes[384] = "", what[256] = "-";
        size_t n = 0;
        for (int j = 0; j < l->n_in; j++)
            append_view(&l->in[j], shapes, sizeof shapes, &n);
        if (n < sizeof shapes) {
            int w = snprintf(shapes + n, sizeof shapes - n, " ->");
            n += w > 0 ? (size_t)w : 0;
        }
        for (int j = 0; j < l->n_out; j++)
            append_view(&l->out[j], shapes, sizeof shapes, &n);
        if (program->backend->describe)
            program->backend->describe(program->bctx, l, what, sizeof what);
        int steps = 0;
        const double us = program->backend->launch_us ? program->backend->launch_us(program->bctx, exec, i, &steps) : -1;
        ge2_side_stream_us side;
        const bool met_side = program->backend->side_stream_us &&
                              program->backend->side_stream_us(program->bctx, exec, i, &side);
        char waited[64] = "";
        if (met_side && !side.beside)
            snprintf(waited, sizeof waited, " (%.1f us of it waiting for the side stream)", side.waited);
        if (met_side && side.beside)
            fprintf(out, "node %3d %-20s %9.1f us beside, %.1f-%.1f us into the step  %s: %s\n", l->node->id,
                    ge2_op_name(l->node->op), side.run, side.start, side.start + side.run, shapes, what);
        else if (us >= 0)
            fprintf(out, "node %3d %-20s %9.1f us %5.1f%%  %s: %s%s\n", l->node->id, ge2_op_name(l->node->op), us,
                    100.0 * us / step_us(program, exec), shapes, what, waited);
        else
            fprintf(out, "node %3d %-20s %s: %s\n", l->node->id, ge2_op_name(l->node->op), shapes, what);
    }
    int steps = 0;
    if (program->backend->launch_us && program->backend->launch_us(program->bctx, exec, 0, &steps) >= 0)
        fprintf(out, "launch time per step: %.1f us (the mean of %d steps after the key's first)\n",
                step_us(program, exec), steps);
}
