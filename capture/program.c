/* ge2_compile and the program's persistent state: parameter, gradient and
 * optimizer-state pools, constants, persistent buffers and the control block, shared by every
 * graph key. Keys live in program_keys.c, the step in program_step.c. */
#include <stdlib.h>
#include <string.h>

#include "capture/program_internal.h"
#include "graph/alloc.h"
#include "graph/clone.h"
#include "graph/error.h"
#include "graph/init.h"
#include "graph/verify.h"
#include "optim/optimizer_math.h"
#include "passes/passes.h"

/* ------------------------------------------------------------- accessors */

ge2_flat_pools ge2_program_pools(const ge2_program *program) { return program->pools; }

ge2_status ge2_program_parameters_written(ge2_program *program)
{
    if (!program->pools.copies || program->pools.n == 0)
        return GE2_OK;
    return program->backend->round_bf16(program->bctx, program->pools.copies, program->pools.params,
                                        program->pools.n);
}

void *ge2_program_buffers(const ge2_program *program) { return program->buffers; }

const ge2_backend *ge2_program_backend(const ge2_program *program, ge2_backend_ctx **ctx)
{
    if (ctx)
        *ctx = program->bctx;
    return program->backend;
}

const ge2_layout *ge2_program_layout(const ge2_program *program) { return program->layout; }

bool ge2_program_feeds_ahead(const ge2_program *program)
{
    return program->backend->feeds_ahead && program->backend->feeds_ahead(program->bctx);
}

const ge2_graph *ge2_program_graph(const ge2_program *program) { return program->graph; }
const ge2_graph *ge2_program_source_graph(const ge2_program *program) { return program->source; }

bool ge2_program_has_tensor(const ge2_program *program, const ge2_tensor *t)
{
    return t && (t->graph == program->graph || t->graph == program->source);
}

const ge2_optimizer_config *ge2_program_optimizer_config(const ge2_program *program)
{
    if (program->optimizer_node < 0)
        return NULL;
    return &GE2_ATTRS(ge2_optim_attrs, program->graph->nodes[program->optimizer_node].attrs)->config;
}

ge2_control *ge2_program_control_host(ge2_program *program) { return program->control_host; }

ge2_status ge2_program_upload_control(ge2_program *program)
{
    GE2_TRY(program->backend->upload(program->bctx, program->control, program->control_host, sizeof(ge2_control)));
    /* The mirror is the upload's source: keep it untouched until the copy is done. */
    return program->backend->sync(program->bctx);
}

ge2_status ge2_program_download_control(ge2_program *program)
{
    return program->backend->download(program->bctx, program->control_host, program->control, sizeof(ge2_control));
}

ge2_status ge2_program_source_wait(ge2_program *program, void *fence)
{
    return fence ? program->backend->fence_wait(program->bctx, fence) : program->backend->sync(program->bctx);
}

ge2_status ge2_program_source_record(ge2_program *program, void *fence)
{
    return fence ? program->backend->fence_record(program->bctx, fence) : GE2_OK;
}

ge2_status ge2_program_source_done(ge2_program *program, void *fence, bool *done)
{
    if (fence)
        return program->backend->fence_done(program->bctx, fence, done);
    *done = true;
    return program->backend->sync(program->bctx);
}

ge2_status ge2_program_check_graph(const ge2_program *program, const char *fn)
{
    const ge2_graph *g = program->source;
    if (g->n_nodes != program->n_nodes || g->n_tensors != program->n_tensors)
        return ge2_error(GE2_ERR_STATE,
                         "%s: the graph changed after ge2_compile (%d nodes, %d tensors then; %d, %d now); compile again",
                         fn, program->n_nodes, program->n_tensors, g->n_nodes, g->n_tensors);
    if (g->changes != program->changes)
        return ge2_error(GE2_ERR_STATE,
                         "%s: the graph changed after this program was compiled (another ge2_compile fused its nodes, "
                         "or a parameter left weight decay); compile again",
                         fn);
    return GE2_OK;
}

/* ------------------------------------------------------- persistent pools */

/* Host-side image of a pool, filled by `fill`, then copied to the device once. */
static ge2_status upload_image(ge2_program *program, void *dst, size_t bytes,
                               void (*fill)(const ge2_program *, unsigned char *))
{
    if (bytes == 0)
        return GE2_OK;
    unsigned char *image = ge2_calloc(1, bytes);
    if (!image)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_compile: %zu bytes of host staging", bytes);
    fill(program, image);
    ge2_status st = program->backend->upload(program->bctx, dst, image, bytes);
    if (st == GE2_OK)
        st = program->backend->sync(program->bctx);
    ge2_free(image);
    return st;
}

static void fill_parameters(const ge2_program *program, unsigned char *image)
{
    const ge2_graph *g = program->graph;
    for (int i = 0; i < g->n_tensors; i++)
        if (g->tensors[i]->role == GE2_ROLE_PARAMETER)
            ge2_init_fill(g, g->tensors[i], image + program->layout->offset[i]);
}

static void fill_buffers(const ge2_program *program, unsigned char *image)
{
    const ge2_graph *g = program->graph;
    for (int i = 0; i < g->n_tensors; i++)
        if (g->tensors[i]->role == GE2_ROLE_BUFFER)
            ge2_init_fill(g, g->tensors[i], image + program->layout->offset[i]);
}

static void fill_constants(const ge2_program *program, unsigned char *image)
{
    const ge2_graph *g = program->graph;
    for (int i = 0; i < g->n_tensors; i++) {
        const ge2_tensor *t = g->tensors[i];
        if (t->role == GE2_ROLE_CONSTANT && t->constant_data)
            memcpy(image + program->layout->offset[i], t->constant_data,
                   (size_t)ge2_shape_numel(t->shape) * ge2_dtype_size(t->dtype));
    }
}

ge2_status ge2_program_check_memory(ge2_program *program, const char *fn, double bytes, const char *what)
{
    size_t free_bytes;
    if (!program->backend->memory_free || program->backend->memory_free(program->bctx, &free_bytes) != GE2_OK) {
        ge2_clear_error();
        return GE2_OK; /* not known: the allocations themselves report */
    }
    if (bytes <= (double)free_bytes)
        return GE2_OK;
    const double mib = 1.0 / (1 << 20);
    return ge2_error(GE2_ERR_OUT_OF_MEMORY, "%s: %s need %.0f MiB of %s memory, and %.0f MiB are free", fn, what,
                     bytes * mib, program->backend->device == GE2_DEVICE_CUDA ? "device" : "host",
                     (double)free_bytes * mib);
}

/* Device memory of at least one byte, so an empty pool still has an address. */
static ge2_status backend_alloc(ge2_program *program, size_t bytes, void **out)
{
    return program->backend->alloc(program->bctx, bytes ? bytes : 1, out);
}

static ge2_status alloc_pools(ge2_program *program)
{
    const ge2_optimizer_config *cfg = ge2_program_optimizer_config(program);
    size_t param_bytes = program->layout->param_bytes;
    program->pools.n = (int64_t)(param_bytes / sizeof(float));
    program->pools.no_decay_n = (int64_t)((param_bytes - program->layout->param_decay_bytes) / sizeof(float));
    program->pools.slots = cfg ? ge2_opt_slots_of(cfg).count : 0;
    const double grads = program->graph->per_parameter_updates ? 0.0 : 1.0;
    const double pools = (double)param_bytes * (1.0 + grads + program->pools.slots) +
                         (double)program->layout->constant_bytes + (double)program->layout->buffer_bytes +
                         (double)program->layout->param_copy_bytes;
    char what[160];
    snprintf(what, sizeof what, "the model's parameters (%lld values), their gradients and %d optimizer state slot(s)",
             (long long)program->pools.n, program->pools.slots);
    GE2_TRY(ge2_program_check_memory(program, "ge2_compile", pools, what));
    GE2_TRY(backend_alloc(program, param_bytes, (void **)&program->pools.params));
    /* Per-parameter updates read each gradient from the arena: no pool. */
    if (!program->graph->per_parameter_updates)
        GE2_TRY(backend_alloc(program, param_bytes, (void **)&program->pools.grads));
    if (program->pools.slots > 0)
        GE2_TRY(backend_alloc(program, (size_t)program->pools.slots * param_bytes, (void **)&program->pools.state));
    GE2_TRY(backend_alloc(program, program->layout->constant_bytes, &program->constants));
    GE2_TRY(backend_alloc(program, program->layout->buffer_bytes, &program->buffers));
    if (program->layout->param_copy_bytes > 0)
        GE2_TRY(backend_alloc(program, program->layout->param_copy_bytes, (void **)&program->pools.copies));
    GE2_TRY(upload_image(program, program->pools.params, param_bytes, fill_parameters));
    GE2_TRY(ge2_program_parameters_written(program));
    GE2_TRY(upload_image(program, program->buffers, program->layout->buffer_bytes, fill_buffers));
    return upload_image(program, program->constants, program->layout->constant_bytes, fill_constants);
}

static ge2_status init_control(ge2_program *program)
{
    GE2_TRY(program->backend->alloc(program->bctx, sizeof(ge2_control), (void **)&program->control));
    GE2_TRY(program->backend->alloc_host(program->bctx, sizeof(ge2_control), (void **)&program->control_host));
    ge2_control *c = program->control_host;
    memset(c, 0, sizeof *c);
    const ge2_optimizer_config *cfg = ge2_program_optimizer_config(program);
    c->base_lr = cfg ? (float)cfg->lr : 0.0f;
    c->loss_scale = cfg && cfg->loss_scaling.dynamic ? (float)cfg->loss_scaling.init_scale : 1.0f;
    c->clip_factor = 1.0f;
    c->rng_seed = program->graph->seed;
    c->ranks = program->options.o.collective ? program->options.o.collective->world : 1;
    GE2_TRY(program->backend->alloc_host(program->bctx, GE2_LR_RING * sizeof(float), (void **)&program->lr_ring));
    for (int i = 0; program->backend->fence_new && i < GE2_LR_RING; i++)
        GE2_TRY(program->backend->fence_new(program->bctx, &program->lr_fence[i]));
    return ge2_program_upload_control(program);
}

/* The loss (what ge2_backward was given, else the first marked output of a
 * loss op) and every other marked output of one element: what each step
 * copies back, and the metrics sum. */
static ge2_status find_metric_outputs(ge2_program *program)
{
    const ge2_graph *g = program->graph;
    program->loss_id = g->loss;
    program->metric_id = -1;
    for (int i = 0; i < g->n_tensors && program->loss_id < 0; i++) {
        const ge2_tensor *t = g->tensors[i];
        if (t->is_output && t->producer >= 0 && (ge2_op_flags(g->nodes[t->producer].op) & GE2_OPF_LOSS))
            program->loss_id = i;
    }
    bool ok = (program->result_ids = ge2_malloc(sizeof(int) * (size_t)(g->n_tensors + 1))) != NULL;
    for (int m = 0; m < GE2_MODE_COUNT; m++) {
        program->result_sums[m] = ge2_calloc((size_t)g->n_tensors + 1, sizeof(double));
        program->taken_sums[m] = ge2_calloc((size_t)g->n_tensors + 1, sizeof(double));
        ok = ok && program->result_sums[m] && program->taken_sums[m];
    }
    if (!ok) /* ge2_program_free frees what was allocated */
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_compile: step results of %d tensors", g->n_tensors);
    program->n_results = 0;
    if (program->loss_id >= 0)
        program->result_ids[program->n_results++] = program->loss_id;
    for (int i = 0; i < g->n_tensors; i++)
        if (g->tensors[i]->is_output && i != program->loss_id && ge2_shape_numel(g->tensors[i]->shape) == 1) {
            if (program->metric_id < 0)
                program->metric_id = i;
            program->result_ids[program->n_results++] = i;
        }
    return GE2_OK;
}

/* The verify pass's dumps: the graph's summary, and its DOT drawing. */
static ge2_status dump_graph(const ge2_program *program)
{
    const ge2_compile_options *o = &program->options.o;
    if (o->dump) {
        fprintf(o->dump, "-- pass verify: ok\n");
        GE2_TRY(ge2_graph_summary(program->graph, o->dump));
    }
    return ge2_program_dump_dot(program, "graph", NULL);
}

ge2_status ge2_program_dump_dot(const ge2_program *program, const char *what, const ge2_plan *plan)
{
    const char *prefix = program->options.o.dump_dot;
    if (!prefix)
        return GE2_OK;
    char path[4096];
    snprintf(path, sizeof path, "%s-%s.dot", prefix, what);
    FILE *f = fopen(path, "w");
    if (!f)
        return ge2_error(GE2_ERR_IO, "ge2_compile: dump_dot: cannot write '%s'", path);
    ge2_status st = plan ? ge2_plan_dot(plan, program->graph, f) : ge2_graph_dump_dot(program->graph, f);
    if (fclose(f) != 0 && st == GE2_OK)
        st = ge2_error(GE2_ERR_IO, "ge2_compile: dump_dot: cannot write '%s'", path);
    return st;
}

/* The fuse pass's graph stage: the rewrite rows over the graph itself,
 * verified again after, then drawn ("fused" DOT) when they changed it. A
 * graph compiled before has nothing left for them; a program compiled
 * before from this graph notices (graph->changes). */
static ge2_status rewrite_graph(ge2_program *program)
{
    const ge2_compile_options *o = &program->options.o;
    ge2_graph *g = program->graph;
    if (o->dump)
        fprintf(o->dump, "-- pass fuse (graph rewrites)\n");
    const unsigned before = g->changes;
    GE2_TRY(ge2_fusion_rewrite(g, program->options.fusions, o->dump, program->rewritten));
    program->changes = g->changes;
    if (g->changes == before)
        return GE2_OK;
    GE2_TRY(ge2_graph_verify(g));
    if (o->dump)
        GE2_TRY(ge2_graph_summary(g, o->dump));
    program->n_nodes = g->n_nodes;
    program->n_tensors = g->n_tensors;
    return ge2_program_dump_dot(program, "fused", NULL);
}

/* A process group of several ranks averages gradients only through the
 * all-reduce nodes of an optimizer with data_parallel: without them each
 * rank would train a model of its own. */
static ge2_status check_collective(const ge2_program *program)
{
    const ge2_collective *c = program->options.o.collective;
    if (!c)
        return GE2_OK;
    if (c->world < 1 || c->rank < 0 || c->rank >= c->world || !c->sum_host)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT,
                         "ge2_compile: options.collective is not a process group (rank %d of world %d%s)", c->rank,
                         c->world, c->sum_host ? "" : ", no sum_host");
    if (program->device == GE2_DEVICE_CUDA && !c->sum_device)
        return ge2_error(GE2_ERR_UNSUPPORTED,
                         "ge2_compile: options.collective (rank %d of %d) has no sum_device for the CUDA backend",
                         c->rank, c->world);
    const ge2_optimizer_config *cfg = ge2_program_optimizer_config(program);
    if (c->world > 1 && (!cfg || !cfg->data_parallel))
        return ge2_error(GE2_ERR_INVALID_ARGUMENT,
                         "ge2_compile: options.collective has %d ranks, but the graph's optimizer %s: set "
                         "ge2_optimizer_config.data_parallel so the ranks' gradients are averaged",
                         c->world, cfg ? "has no data_parallel" : "is missing");
    return GE2_OK;
}

/* Precision FP16 rounds every GEMM operand to fp16 itself: a bf16 tensor
 * (a ge2_cast the user made) there would be read in the other 16-bit
 * format, so it is refused, naming the node and the tensor. */
static ge2_status fp16_operands(const ge2_program *program)
{
    const ge2_graph *g = program->graph;
    if (program->options.o.precision != GE2_PRECISION_FP16)
        return GE2_OK;
    for (int n = 0; n < g->n_nodes; n++)
        for (int i = 0; i < g->nodes[n].n_inputs; i++) {
            const ge2_tensor *t = g->tensors[g->nodes[n].inputs[i]];
            if (t->dtype == GE2_BF16 && ge2_op_bf16_operand(g->nodes[n].op, i))
                return ge2_error(GE2_ERR_UNSUPPORTED,
                                 "ge2_compile: precision fp16 rounds GEMM operands to fp16, but ge2_%s (node %d) "
                                 "multiplies the bf16 tensor '%s' (input %d): cast it to f32, or compile in bf16",
                                 ge2_op_name(g->nodes[n].op), n, t->name, i);
        }
    return GE2_OK;
}

/* Precision BF16's storage pass (passes/passes.h: ge2_bf16_storage_pass) on the
 * program's own copy of the graph, so the user's stays f32 for a compile in
 * another precision; drawn ("bf16" DOT) when it changed anything. */
static ge2_status bf16_storage(ge2_program *program)
{
    const ge2_compile_options *o = &program->options.o;
    if (o->precision != GE2_PRECISION_BF16 || !o->bf16_storage)
        return GE2_OK;
    if (o->dump)
        fprintf(o->dump, "-- pass bf16 storage\n");
    ge2_graph *copy;
    GE2_TRY(ge2_graph_clone(program->graph, &copy));
    int casts = 0, stored = 0, copies = 0;
    ge2_status st = ge2_bf16_storage_pass(copy, &casts, &stored, &copies);
    if (st == GE2_OK && casts + stored + copies > 0)
        st = ge2_graph_verify(copy);
    if (st != GE2_OK || casts + stored + copies == 0) {
        ge2_graph_free(copy);
        return st;
    }
    program->own_graph = program->graph = copy;
    if (o->dump) {
        fprintf(o->dump,
                "GEMM operands in bf16: %d rounded once each by a cast, %d stored so by their producer, %d "
                "parameters read through the bf16 copies the optimizer writes\n",
                casts, stored, copies);
        GE2_TRY(ge2_graph_summary(copy, o->dump));
    }
    return ge2_program_dump_dot(program, "bf16", NULL);
}

static ge2_status compile(ge2_program *program)
{
    GE2_TRY(ge2_graph_verify(program->graph));
    GE2_TRY(dump_graph(program));
    GE2_TRY(rewrite_graph(program));
    GE2_TRY(fp16_operands(program));
    GE2_TRY(bf16_storage(program));
    for (int n = 0; n < program->graph->n_nodes; n++)
        if ((ge2_op_flags(program->graph->nodes[n].op) & GE2_OPF_UPDATE) && program->optimizer_node < 0)
            program->optimizer_node = n;
    GE2_TRY(check_collective(program));
    GE2_TRY(find_metric_outputs(program));
    GE2_TRY(ge2_key_init(program->graph, GE2_MODE_TRAIN, &program->feed_key));
    program->feed_key.fusions = program->options.fusions; /* every key of the program starts from this one */
    ge2_key_rehash(&program->feed_key);
    GE2_TRY(program->backend->open(&program->options, &program->bctx));
    GE2_TRY(ge2_layout_new(program->graph, &program->layout));
    GE2_TRY(alloc_pools(program));
    return init_control(program);
}

ge2_status ge2_compile(ge2_context *ctx, ge2_graph *graph, const ge2_compile_options *options, ge2_program **out)
{
    if (!ctx || !graph || !out)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_compile: context, graph and out must not be NULL");
    *out = NULL;
    ge2_program *program = ge2_calloc(1, sizeof *program);
    if (!program)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_compile: program");
    program->ctx = ctx;
    program->device = ge2_context_device(ctx);
    program->graph = program->source = graph;
    program->n_nodes = graph->n_nodes;
    program->n_tensors = graph->n_tensors;
    program->changes = graph->changes;
    program->backend = program->device == GE2_DEVICE_CUDA ? &ge2_backend_cuda : &ge2_backend_cpu;
    program->optimizer_node = -1;
    for (int m = 0; m < GE2_MODE_COUNT; m++)
        program->last_key[m] = -1;

    ge2_status st = ge2_options_resolve(options, &program->options);
    if (st == GE2_OK)
        st = compile(program);
    if (st != GE2_OK) {
        ge2_program_free(program);
        return st;
    }
    *out = program;
    return GE2_OK;
}

void ge2_program_free(ge2_program *program)
{
    if (!program)
        return;
    const ge2_backend *b = program->backend;
    if (program->bctx) {
        b->sync(program->bctx); /* nothing in flight may touch what is freed below */
        for (int k = 0; k < program->n_keys; k++)
            ge2_program_key_release(program, program->keys[k]);
        b->free(program->bctx, program->arena);
        b->free(program->bctx, program->control);
        b->free_host(program->bctx, program->control_host);
        for (int i = 0; i < GE2_LR_RING; i++)
            if (program->lr_fence[i])
                b->fence_free(program->bctx, program->lr_fence[i]);
        b->free_host(program->bctx, program->lr_ring);
        b->free(program->bctx, program->constants);
        b->free(program->bctx, program->buffers);
        b->free(program->bctx, program->pools.state);
        b->free(program->bctx, program->pools.grads);
        b->free(program->bctx, program->pools.params);
        b->free(program->bctx, program->pools.copies);
        for (int m = 0; m < GE2_MODE_COUNT; m++) /* their device copies are the backend's */
            ge2_program_dataset_free(program, (ge2_mode)m);
        ge2_program_lr_table_free(program);
        b->close(program->bctx);
    }
    ge2_free(program->keys);
    ge2_free(program->result_ids);
    for (int m = 0; m < GE2_MODE_COUNT; m++) {
        ge2_free(program->result_sums[m]);
        ge2_free(program->taken_sums[m]);
    }
    ge2_layout_free(program->layout);
    ge2_graph_free(program->own_graph);
    ge2_free(program);
}
