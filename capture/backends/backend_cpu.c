/* The CPU backend: the same launches, offsets and pools as CUDA, in host
 * memory, run one after the other by the reference kernels. A bad offset
 * therefore corrupts results here too, where CI can see it. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "graph/clock.h"
#include "capture/backend.h"
#include "capture/program_internal.h"
#include "graph/alloc.h"
#include "graph/bf16.h"
#include "graph/error.h"

/* Host memory needs no handles; what is left is whether launches are timed. */
struct ge2_backend_ctx {
    bool time_launches;
};

/* time_launches: per key, in ge2_exec.backend_data (untouched otherwise). */
typedef struct cpu_timing {
    int steps;  /* run; the first is not counted, as on CUDA */
    double *ms; /* [n_launches] summed */
} cpu_timing;

static ge2_status cpu_open(const ge2_program_options *options, ge2_backend_ctx **out)
{
    *out = ge2_calloc(1, sizeof **out);
    if (!*out)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_backend_cpu: context");
    (*out)->time_launches = options->o.time_launches;
    return GE2_OK;
}

static void cpu_close(ge2_backend_ctx *ctx) { ge2_free(ctx); }

/* Arena offsets are multiples of GE2_ARENA_ALIGN, so the base must be too
 * (vector kernels and the CUDA layout assume it). The block ge2_calloc gave
 * is stored just below the aligned pointer so free can find it. */
static ge2_status cpu_alloc(ge2_backend_ctx *ctx, size_t bytes, void **out)
{
    (void)ctx;
    *out = NULL;
    size_t extra = GE2_ARENA_ALIGN + sizeof(void *);
    if (bytes > SIZE_MAX - extra)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_backend_cpu: %zu bytes", bytes);
    unsigned char *raw = ge2_calloc(1, bytes + extra);
    if (!raw)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_backend_cpu: out of host memory allocating %zu bytes", bytes);
    uintptr_t aligned = ((uintptr_t)raw + sizeof(void *) + GE2_ARENA_ALIGN - 1) & ~(uintptr_t)(GE2_ARENA_ALIGN - 1);
    ((void **)aligned)[-1] = raw;
    *out = (void *)aligned;
    return GE2_OK;
}

static void cpu_free(ge2_backend_ctx *ctx, void *ptr)
{
    (void)ctx;
    if (ptr)
        ge2_free(((void **)ptr)[-1]);
}

static ge2_status cpu_copy(ge2_backend_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    (void)ctx;
    if (bytes)
        memcpy(dst, src, bytes);
    return GE2_OK;
}

static ge2_status cpu_round_bf16(ge2_backend_ctx *ctx, uint16_t *dst, const float *src, int64_t n)
{
    (void)ctx;
    for (int64_t i = 0; i < n; i++)
        dst[i] = ge2_bf16_from_f32(src[i]);
    return GE2_OK;
}

static ge2_status cpu_exec_prepare(ge2_backend_ctx *ctx, ge2_exec *exec)
{
    if (!ctx->time_launches)
        return GE2_OK;
    cpu_timing *t = ge2_calloc(1, sizeof *t);
    if (t)
        t->ms = ge2_calloc((size_t)(exec->n_launches > 0 ? exec->n_launches : 1), sizeof *t->ms);
    if (!t || !t->ms) {
        ge2_free(t);
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_backend_cpu: launch timing for %d launches", exec->n_launches);
    }
    exec->backend_data = t;
    return GE2_OK;
}

static void copy(const ge2_copy *c)
{
    if (c->bytes)
        memcpy(c->dst, c->src, c->bytes);
}

/* The key's launches, one after the other. */
static ge2_status run_launches(ge2_backend_ctx *ctx, ge2_exec *exec)
{
    cpu_timing *timing = ctx->time_launches ? exec->backend_data : NULL;
    const bool timed = timing && timing->steps++ > 0;
    for (int i = 0; i < exec->n_launches; i++) {
        const ge2_launch *launch = &exec->launches[i];
        const ge2_node *node = launch->node;
        if (!ge2_op_def_of(node->op)->cpu)
            return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_backend_cpu: op %s (node %d) has no CPU kernel",
                             ge2_op_name(node->op), node->id);
        const double start = timed ? 1e3 * ge2_now_s() : 0;
        ge2_status st = ge2_op_run_cpu(launch);
        if (timed)
            timing->ms[i] += 1e3 * ge2_now_s() - start;
        if (st != GE2_OK) {
            /* The kernel's message names the op and tensors; add where in the step. */
            char msg[512];
            snprintf(msg, sizeof msg, "%s", ge2_last_error());
            return ge2_error(st, "%s (node %d, step position %d)", msg, node->id, i);
        }
    }
    return GE2_OK;
}

/* The same order as CUDA's stream: feeds in, launches, results out. */
static ge2_status cpu_exec_run(ge2_backend_ctx *ctx, ge2_exec *exec, int slot)
{
    if (slot < 0 || slot >= GE2_STAGING_BUFFERS)
        return ge2_error(GE2_ERR_STATE, "ge2_backend_cpu: staging slot %d of %d", slot, GE2_STAGING_BUFFERS);
    const ge2_step_io *io = &exec->io[slot];
    copy(&io->stage); /* empty: no feeds_ahead here, nothing runs beside a step */
    copy(&io->upload);
    GE2_TRY(run_launches(ctx, exec));
    for (int r = 0; r < io->n_results; r++)
        copy(&io->results[r]);
    return GE2_OK;
}

/* The device loop in C (graph/step_loop.h): its helpers are the CUDA
 * kernels' own. A failed step is counted as run and failed, and its error
 * returned. */
static ge2_status cpu_exec_loop(ge2_backend_ctx *ctx, ge2_exec *exec, const ge2_step_loop *loop, uint64_t generation)
{
    (void)generation; /* nothing is kept between loops */
    ge2_loop_counters *c = loop->counters;
    do {
        for (int64_t i = 0; i < loop->batch; i++) {
            const uint64_t example = ge2_loop_example(loop, c, i);
            for (int f = 0; f < loop->n_fields; f++)
                ge2_loop_copy_row(&loop->field[f], example, i, 0, 1);
        }
        const ge2_status st = run_launches(ctx, exec);
        if (st != GE2_OK) {
            c->step_number++;
            c->steps_run++;
            c->failed = 1;
            return st;
        }
    } while (ge2_loop_advance(loop, c));
    return GE2_OK;
}

static bool cpu_loop_ready(const ge2_backend_ctx *ctx, const ge2_exec *exec)
{
    (void)exec; /* every key is ready once prepared */
    return !ctx->time_launches;
}

static void cpu_exec_release(ge2_backend_ctx *ctx, ge2_exec *exec)
{
    cpu_timing *t = ctx->time_launches ? exec->backend_data : NULL;
    if (t) {
        ge2_free(t->ms);
        ge2_free(t);
        exec->backend_data = NULL;
    }
}

/* /proc/meminfo's MemAvailable: what the kernel can give without swapping. */
static ge2_status cpu_memory_free(ge2_backend_ctx *ctx, size_t *bytes)
{
    (void)ctx;
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return ge2_error(GE2_ERR_UNSUPPORTED, "ge2 cpu backend: /proc/meminfo: cannot read");
    char line[256];
    unsigned long long kib = 0;
    bool found = false;
    while (!found && fgets(line, sizeof line, f))
        found = sscanf(line, "MemAvailable: %llu kB", &kib) == 1;
    fclose(f);
    if (!found)
        return ge2_error(GE2_ERR_UNSUPPORTED, "ge2 cpu backend: /proc/meminfo has no MemAvailable");
    *bytes = kib > SIZE_MAX / 1024 ? SIZE_MAX : (size_t)kib * 1024;
    return GE2_OK;
}

static double cpu_launch_us(const ge2_backend_ctx *ctx, const ge2_exec *exec, int i, int *steps)
{
    const cpu_timing *t = ctx->time_launches ? exec->backend_data : NULL;
    *steps = t && t->steps > 1 ? t->steps - 1 : 0;
    if (!*steps || i < 0 || i >= exec->n_launches)
        return -1.0;
    return 1000.0 * t->ms[i] / *steps;
}

static ge2_status cpu_sync(ge2_backend_ctx *ctx)
{
    (void)ctx;
    return GE2_OK;
}

static int cpu_capture_count(const ge2_backend_ctx *ctx)
{
    (void)ctx;
    return 0;
}

static void cpu_describe(const ge2_backend_ctx *ctx, const ge2_launch *launch, char *buf, size_t size)
{
    (void)ctx;
    snprintf(buf, size, "cpu %s", ge2_op_name(launch->node->op));
}

const ge2_backend ge2_backend_cpu = {
    .device = GE2_DEVICE_CPU,
    .name = "cpu",
    .open = cpu_open,
    .close = cpu_close,
    .alloc = cpu_alloc,
    .memory_free = cpu_memory_free,
    .free = cpu_free,
    /* Host staging is ordinary memory here; the same aligned blocks do. */
    .alloc_host = cpu_alloc,
    .free_host = cpu_free,
    .upload = cpu_copy,
    .round_bf16 = cpu_round_bf16,
    .download = cpu_copy,
    .exec_prepare = cpu_exec_prepare,
    .exec_run = cpu_exec_run,
    .exec_loop = cpu_exec_loop,
    .loop_ready = cpu_loop_ready,
    .exec_release = cpu_exec_release,
    .sync = cpu_sync,
    .capture_count = cpu_capture_count,
    .describe = cpu_describe,
    .launch_us = cpu_launch_us,
};
