/* The CUDA backend: one non-blocking stream per program, and per graph key
 * and staging slot one CUDA Graph holding the whole step: the slot's
 * launches, which read the feeds at its device staging (the program
 * resolves them so, ge2_exec.slot_launches), and the copy of the loss
 * and metric into the slot's pinned result area.
 *
 * The batch reaches the slot's device staging before that, by the copy
 * engine on a second stream (the feed stream), enqueued with the step while
 * the step before it still runs; the step stream waits for it by an event.
 * The SMs reading a batch from pinned memory take a sizeable share of a
 * small step; the copy engine does it beside the step before (the compile option
 * feed_ahead off turns this off: the graph then uploads from the pinned
 * staging into the feed region itself).
 *
 * The fuse pass's groups (fusion/fusion.h, in the key's plan) run through
 * their pattern's CUDA implementation when it takes the key's buffers, and
 * node by node otherwise: a group may run the whole step (its feed upload
 * and result copies too), a pair of launches, or one launch doing more.
 *
 * A key's first step runs eagerly. That run is the step itself (the
 * optimizer must update once, not twice) and also the warm-up: every kernel
 * module is loaded and every cuBLASLt kernel has run once before capture.
 * The same step is then captured once per slot, instantiated and uploaded
 * without being executed; every later step of the key is one cudaGraphLaunch
 * (the program records its fence after it). A replay therefore allocates
 * nothing, waits for nothing and reads no host value but its feeds: what
 * changes per step lives in the device control block.
 *
 * If a launch cannot be captured, the key falls back to eager execution for
 * good (one warning line on stderr naming the node and op), and the program
 * keeps working. The compile option disable_capture makes every key eager,
 * which is the reference the stability suite compares replays against;
 * print_kernels prints, per key, the kernel (and for GEMMs the cuBLASLt
 * epilogue, algorithm and tile) each node got.
 */

#include "capture/backends/backend_cuda_internal.h"
#include "graph/clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "graph/alloc.h"
#include "graph/error.h"
#include "fusion/fusion.h"
#include "kernels/cuda/bf16_copy.h"
#include "kernels/cuda/candidates.h"
#include "kernels/cuda/hold.h"
#include "kernels/cuda/step_copy.h"
/* cuBLASLt workspace shared by every GEMM of the program (one stream, so one
 * GEMM at a time); 32 MiB covers the split-K and stream-K configurations the
 * heuristic returns for the sizes ge2 trains in fp32 and TF32 (less made the
 * fp32 GPT's step slower). Programs of 16-bit GEMMs (precision BF16 or
 * FP16) get 16 MiB: the bf16 GPT's step kept its speed with it, and its
 * memory target needs the room (bench/RESULTS.md has both measurements). */
#define GE2_CUDA_WORKSPACE_BYTES ((size_t)32 << 20)
#define GE2_CUDA_WORKSPACE_BYTES_16BIT ((size_t)16 << 20)

/* ------------------------------------------------------------ open, close */

static void cuda_close(ge2_backend_ctx *ctx)
{
    if (!ctx)
        return;
    if (ctx->stream)
        cudaStreamSynchronize(ctx->stream);
    if (ctx->feed_stream)
        cudaStreamSynchronize(ctx->feed_stream);
    if (ctx->workspace)
        cudaFree(ctx->workspace);
    if (ctx->lt)
        cublasLtDestroy(ctx->lt);
    if (ctx->stream)
        cudaStreamDestroy(ctx->stream);
    if (ctx->feed_stream)
        cudaStreamDestroy(ctx->feed_stream);
    if (ctx->wait_mark)
        cudaEventDestroy(ctx->wait_mark);
    if (ctx->side_stream) {
        cudaStreamSynchronize(ctx->side_stream);
        cudaStreamDestroy(ctx->side_stream);
        cudaEventDestroy(ctx->side_fork);
        cudaEventDestroy(ctx->side_done);
    }
    ge2_free(ctx);
}

static ge2_status open_resources(ge2_backend_ctx *ctx)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count < 1) {
        const char *why = e != cudaSuccess ? cudaGetErrorString(e) : "the CUDA runtime reports 0 devices";
        cudaGetLastError(); /* not sticky; don't leak it into later checks */
        return ge2_error(GE2_ERR_NO_DEVICE, "ge2 cuda backend: no CUDA device (%s)", why);
    }
    /* the thread's current device: 0 unless chosen (ge2_cuda_use_device;
     * data parallel, one GPU per rank) */
    CUDA_TRY(cudaGetDevice(&ctx->device));
    CUDA_TRY(cudaSetDevice(ctx->device));
    CUDA_TRY(cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking));
    if (ctx->feeds_ahead)
        CUDA_TRY(cudaStreamCreateWithFlags(&ctx->feed_stream, cudaStreamNonBlocking));
    cublasStatus_t s = cublasLtCreate(&ctx->lt);
    if (s != CUBLAS_STATUS_SUCCESS) {
        ctx->lt = NULL;
        return ge2_error(GE2_ERR_CUDA, "ge2 cuda backend: cublasLtCreate failed: cuBLAS status %d", (int)s);
    }
    CUDA_TRY(cudaMalloc(&ctx->workspace, ctx->workspace_bytes));
    return GE2_OK;
}

static ge2_status cuda_open(const ge2_program_options *options, ge2_backend_ctx **out)
{
    *out = NULL;
    ge2_backend_ctx *ctx = ge2_calloc(1, sizeof *ctx);
    if (!ctx)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2 cuda backend: out of host memory");
    ctx->tf32 = options->o.precision == GE2_PRECISION_TF32;
    const bool half = options->o.precision == GE2_PRECISION_BF16 || options->o.precision == GE2_PRECISION_FP16;
    ctx->workspace_bytes = half ? GE2_CUDA_WORKSPACE_BYTES_16BIT : GE2_CUDA_WORKSPACE_BYTES;
    ctx->disable_capture = options->o.disable_capture;
    ctx->print_kernels = options->o.print_kernels;
    ctx->time_launches = options->o.time_launches;
    ctx->feeds_ahead = options->o.feed_ahead;
    ctx->device_loop = options->o.device_loop;
    ctx->wait_timeout_s = options->o.collective ? options->o.collective->timeout_s : 0;
    ctx->wait_rank = options->o.collective ? options->o.collective->rank : 0;
    ge2_status st = open_resources(ctx);
    if (st == GE2_OK && ctx->wait_timeout_s > 0 &&
        cudaEventCreateWithFlags(&ctx->wait_mark, cudaEventDisableTiming) != cudaSuccess)
        st = ge2_error(GE2_ERR_CUDA, "ge2 cuda backend: cudaEventCreate failed");
    if (st != GE2_OK) {
        cuda_close(ctx);
        return st;
    }
    *out = ctx;
    return GE2_OK;
}

/* ----------------------------------------------------------------- memory */

/* An allocation failure: out of memory is its own status, a user can act on it. */
static ge2_status alloc_fail(cudaError_t e, const char *call, size_t bytes)
{
    cudaGetLastError();
    return ge2_error(e == cudaErrorMemoryAllocation ? GE2_ERR_OUT_OF_MEMORY : GE2_ERR_CUDA,
                     "ge2 cuda backend: %s(%zu bytes) failed: %s", call, bytes, cudaGetErrorString(e));
}

static ge2_status cuda_alloc(ge2_backend_ctx *ctx, size_t bytes, void **out)
{
    *out = NULL;
    if (bytes == 0)
        return GE2_OK;
    cudaError_t e = cudaMalloc(out, bytes);
    if (e != cudaSuccess) {
        *out = NULL;
        return alloc_fail(e, "cudaMalloc", bytes);
    }
    /* On the step stream: ordered before every kernel that will use it. */
    CUDA_TRY(cudaMemsetAsync(*out, 0, bytes, ctx->stream));
    return GE2_OK;
}

static ge2_status cuda_memory_free(ge2_backend_ctx *ctx, size_t *bytes)
{
    (void)ctx;
    size_t free_bytes = 0, total = 0;
    CUDA_TRY(cudaMemGetInfo(&free_bytes, &total));
    *bytes = free_bytes;
    return GE2_OK;
}

static void cuda_free(ge2_backend_ctx *ctx, void *ptr)
{
    (void)ctx;
    if (ptr)
        cudaFree(ptr);
}

static ge2_status cuda_alloc_host(ge2_backend_ctx *ctx, size_t bytes, void **out)
{
    (void)ctx;
    *out = NULL;
    if (bytes == 0)
        return GE2_OK;
    cudaError_t e = cudaMallocHost(out, bytes);
    if (e != cudaSuccess) {
        *out = NULL;
        return alloc_fail(e, "cudaMallocHost", bytes);
    }
    memset(*out, 0, bytes);
    return GE2_OK;
}

static void cuda_free_host(ge2_backend_ctx *ctx, void *ptr)
{
    (void)ctx;
    if (ptr)
        cudaFreeHost(ptr);
}

static ge2_status cuda_round_bf16(ge2_backend_ctx *ctx, uint16_t *dst, const float *src, int64_t n)
{
    return ge2_cuda_bf16_round_on(ctx->stream, dst, src, n);
}

static ge2_status cuda_upload(ge2_backend_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    if (bytes == 0)
        return GE2_OK;
    CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, ctx->stream));
    return GE2_OK;
}

/* Waits for the work before event; with a process group's timeout, by
 * polling, failing once it has taken longer (what: the wait, in the
 * message). */
static ge2_status wait_event(ge2_backend_ctx *ctx, cudaEvent_t event, const char *what)
{
    if (ctx->wait_timeout_s <= 0) {
        CUDA_TRY(cudaEventSynchronize(event));
        return GE2_OK;
    }
    const double deadline = ge2_now_s() + ctx->wait_timeout_s;
    for (;;) {
        cudaError_t e = cudaEventQuery(event);
        if (e == cudaSuccess)
            return GE2_OK;
        if (e != cudaErrorNotReady)
            return cuda_fail(e, "cudaEventQuery");
        cudaGetLastError(); /* "not yet" is no fault */
        if (ge2_now_s() > deadline)
            return ge2_error(GE2_ERR_COLLECTIVE,
                             "ge2 cuda backend: rank %d: %s has not finished after %g s: a collective in the step "
                             "waits for a rank that failed or hangs",
                             ctx->wait_rank, what, ctx->wait_timeout_s);
        nanosleep(&(struct timespec){0, 20000}, NULL);
    }
}

/* All work enqueued on stream so far, as wait_event waits. */
static ge2_status wait_stream(ge2_backend_ctx *ctx, cudaStream_t stream, const char *what)
{
    if (ctx->wait_timeout_s <= 0) {
        CUDA_TRY(cudaStreamSynchronize(stream));
        return GE2_OK;
    }
    CUDA_TRY(cudaEventRecord(ctx->wait_mark, stream));
    return wait_event(ctx, ctx->wait_mark, what);
}

static ge2_status cuda_download(ge2_backend_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    if (bytes == 0)
        return GE2_OK;
    CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, ctx->stream));
    return wait_stream(ctx, ctx->stream, "a read-back");
}

/* Fences guard the program's pinned buffers: the host may refill a staging
 * slot, and read its results, as soon as the step that used it is done,
 * without waiting for the steps after it (a stream sync here made every
 * step wait for the GPU: host-bound steps). */
static ge2_status cuda_fence_new(ge2_backend_ctx *ctx, void **fence)
{
    (void)ctx;
    cudaEvent_t event;
    GE2_TRY(new_event(&event));
    *fence = event;
    return GE2_OK;
}

static void cuda_fence_free(ge2_backend_ctx *ctx, void *fence)
{
    (void)ctx;
    if (fence)
        cudaEventDestroy((cudaEvent_t)fence);
}

static ge2_status cuda_fence_record(ge2_backend_ctx *ctx, void *fence)
{
    CUDA_TRY(cudaEventRecord((cudaEvent_t)fence, ctx->stream));
    return GE2_OK;
}

static ge2_status cuda_fence_wait(ge2_backend_ctx *ctx, void *fence)
{
    return wait_event(ctx, (cudaEvent_t)fence, "a step");
}

static ge2_status cuda_fence_done(ge2_backend_ctx *ctx, void *fence, bool *done)
{
    (void)ctx;
    cudaError_t e = cudaEventQuery((cudaEvent_t)fence);
    *done = e == cudaSuccess;
    if (e == cudaErrorNotReady) {
        /* "not yet" is an answer, not a fault: keep it out of the error
         * state that kernel launchers check after each launch */
        cudaGetLastError();
        return GE2_OK;
    }
    if (e != cudaSuccess)
        return cuda_fail(e, "cudaEventQuery");
    return GE2_OK;
}

static ge2_status cuda_sync(ge2_backend_ctx *ctx)
{
    /* the feed stream too: a step that failed after its stage copy was
     * enqueued must not leave that copy reading the staging */
    if (ctx->feed_stream)
        CUDA_TRY(cudaStreamSynchronize(ctx->feed_stream));
    return wait_stream(ctx, ctx->stream, "the device's work");
}

static bool cuda_feeds_ahead(const ge2_backend_ctx *ctx) { return ctx && ctx->feeds_ahead; }

static int cuda_capture_count(const ge2_backend_ctx *ctx)
{
    return ctx ? ctx->capture_count : 0;
}

/* ------------------------------------------------------------ graph keys */

static const char *node_op_name(const ge2_launch *launch)
{
    return ge2_op_name(launch->node->op);
}

static ge2_cuda_copy cuda_copy_of(const ge2_copy *c) { return (ge2_cuda_copy){c->dst, c->src, c->bytes}; }

static void release_launches(ge2_exec *exec, int n)
{
    for (int i = 0; i < n; i++) {
        ge2_launch *l = &exec->launches[i];
        if (l->kernel && l->kernel->release)
            l->kernel->release(l);
        l->backend_data = NULL;
        l->kernel = NULL;
        l->fused_into = NULL;
    }
}

/* Each slot's state once (slots that run the key's launches share one) */
static void release_group(cuda_group *g)
{
    for (int s = 0; s < GE2_STAGING_BUFFERS; s++) {
        bool shared = false;
        for (int t = 0; t < s; t++)
            shared = shared || g->state[t] == g->state[s];
        if (g->state[s] && !shared && g->impl->release)
            g->impl->release(g->state[s]);
    }
    memset(g->state, 0, sizeof g->state);
}

static void free_groups(ge2_cuda_exec *ce)
{
    if (!ce)
        return;
    for (int g = 0; g < ce->n_groups; g++)
        release_group(&ce->groups[g]);
    ge2_free(ce->groups);
    ge2_free(ce->group_at);
    for (int s = 0; s < GE2_STAGING_BUFFERS; s++) {
        ge2_free(ce->results[s]);
        ce->results[s] = NULL;
    }
    ce->groups = NULL;
    ce->group_at = NULL;
    ce->n_groups = 0;
}

static void cuda_exec_release(ge2_backend_ctx *ctx, ge2_exec *exec)
{
    (void)ctx;
    ge2_cuda_exec *ce = exec->backend_data;
    for (int s = 0; ce && s < GE2_STAGING_BUFFERS; s++) {
        if (ce->graph[s])
            cudaGraphExecDestroy(ce->graph[s]);
        if (ce->staged[s])
            cudaEventDestroy(ce->staged[s]);
    }
    free_groups(ce);
    if (ce) {
        ge2_cuda_loop_release(ce);
        ge2_cuda_side_free(ce, exec->n_launches);
        ge2_cuda_timing_free(ce->timing, exec->n_launches);
    }
    ge2_free(ce);
    exec->backend_data = NULL;
    exec->captured = false;
    release_launches(exec, exec->n_launches);
}

static void cuda_describe(const ge2_backend_ctx *ctx, const ge2_launch *launch, char *buf, size_t size)
{
    (void)ctx;
    const ge2_cuda_kernel *k = launch->kernel ? launch->kernel : &ge2_op_def_of(launch->node->op)->cuda;
    const char *what = k->describe ? k->describe(launch) : "cuda kernel";
    if (launch->fused_into)
        snprintf(buf, size, "in the %s", launch->fused_into);
    else if (launch->kernel_choice[0])
        snprintf(buf, size, "%s [%s]", what, launch->kernel_choice);
    else
        snprintf(buf, size, "%s", what);
}

static void print_kernels(const ge2_backend_ctx *ctx, const ge2_exec *exec)
{
    char what[256];
    for (int i = 0; i < exec->n_launches; i++) {
        const ge2_launch *l = &exec->launches[i];
        cuda_describe(ctx, l, what, sizeof what);
        fprintf(stderr, "ge2: node %d %s: %s\n", l->node->id, node_op_name(l), what);
    }
}

/* Does one of the group's launches multiply bf16 operands (unless the
 * implementation does any precision's arithmetic, GE2_FUSION_ANY_PRECISION)
 * or read or write a bf16 tensor (unless it checks them itself,
 * GE2_FUSION_TAKES_BF16)? (Other groups' own kernels are f32 throughout.) */
static bool group_has_bf16(const ge2_exec *exec, const ge2_fusion_group *fg, unsigned does)
{
    for (int i = fg->first; i < fg->first + fg->count; i++) {
        const ge2_launch *l = &exec->launches[i];
        if (!(does & GE2_FUSION_ANY_PRECISION) && ge2_launch_half_gemm(l))
            return true;
        for (int k = 0; !(does & GE2_FUSION_TAKES_BF16) && k < l->n_in + l->n_out; k++)
            if ((k < l->n_in ? l->in[k].dtype : l->out[k - l->n_in].dtype) == GE2_BF16)
                return true;
    }
    return false;
}

/* The plan's groups whose pattern's CUDA implementation takes this key's
 * launches. The launches stay prepared, so the kernel report still says
 * what each would have run; a group its implementation declines runs node
 * by node, and print_kernels says why. */
static ge2_status prepare_groups(ge2_backend_ctx *ctx, ge2_exec *exec, ge2_cuda_exec *ce)
{
    const ge2_plan *plan = exec->plan; /* NULL: a hand-made key (tests), no groups */
    const int n_groups = plan ? plan->n_groups : 0;
    const size_t n = (size_t)(exec->n_launches > 0 ? exec->n_launches : 1);
    ce->group_at = ge2_malloc(sizeof *ce->group_at * n);
    ce->groups = ge2_calloc(n_groups > 0 ? (size_t)n_groups : 1, sizeof *ce->groups);
    if (!ce->group_at || !ce->groups)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2 cuda backend: out of host memory");
    for (int i = 0; i < exec->n_launches; i++)
        ce->group_at[i] = -1;
    for (int g = 0; g < n_groups; g++) {
        const ge2_fusion_group *fg = &plan->groups[g];
        const ge2_fusion_pattern *pattern = ge2_fusion_pattern_at(fg->pattern);
        if (!pattern->cuda || fg->first + fg->count > exec->n_launches)
            continue;
        char why[256] = "";
        cuda_group cg = {pattern->cuda, {NULL}, fg->first, fg->count};
        const bool bf16 = group_has_bf16(exec, fg, pattern->cuda->does);
        if (bf16) /* a group's own kernels compute and store f32 */
            snprintf(why, sizeof why, "precision %s: fused groups run node by node (their own kernels compute in fp32)",
                     exec->n_launches ? (exec->launches[0].f16_operands ? "fp16" : "bf16") : "bf16");
        /* each slot's launches: their feeds differ (the same for all but the address) */
        bool taken = !bf16;
        for (int s = 0; taken && s < GE2_STAGING_BUFFERS; s++) {
            if (s > 0 && !exec->slot_launches[s] && !exec->slot_launches[0]) {
                cg.state[s] = cg.state[0]; /* both run the key's launches */
                continue;
            }
            const ge2_launch *first = &ge2_cuda_slot_launches(exec, s)[fg->first];
            if (pattern->cuda->prepare) {
                ge2_status st = pattern->cuda->prepare(first, fg->count, &cg.state[s], why, sizeof why);
                if (st != GE2_OK) {
                    release_group(&cg);
                    return st;
                }
            } else if (pattern->cuda->takes && pattern->cuda->takes(first, fg->count, why, sizeof why)) {
                cg.state[s] = (void *)pattern->cuda; /* stateless: any non-NULL says it takes them */
            }
            taken = cg.state[s] != NULL;
        }
        if (!taken) {
            release_group(&cg);
            if (ctx->print_kernels)
                fprintf(stderr, "ge2: %s group at node %d runs node by node: %s\n", pattern->name,
                        exec->launches[fg->first].node->id, why);
            continue;
        }
        ce->groups[ce->n_groups] = cg;
        ce->group_at[fg->first] = ce->n_groups++;
        const char *what = pattern->cuda->describe ? pattern->cuda->describe(cg.state[0]) : pattern->cuda->what;
        for (int i = 0; i < fg->count; i++)
            for (int s = -1; s < GE2_STAGING_BUFFERS; s++)
                if (s < 0 || exec->slot_launches[s])
                    (s < 0 ? exec->launches : exec->slot_launches[s])[fg->first + i].fused_into = what;
    }
    return GE2_OK;
}

/* The scratch launch l needs (ge2_launch.scratch; the program plans it in
 * the key's arena): the most that its op's
 * own kernel and any registered candidate ask through bf16_scratch_bytes
 * (each decides from the launch's precision and dtypes; a candidate that
 * wins, or is only timed, runs with the op's scratch), asked before the
 * kernel is chosen; 0 on the side stream, whose launches have none. */
static size_t cuda_launch_scratch_bytes(const ge2_backend_ctx *ctx, const ge2_launch *l)
{
    (void)ctx;
    if (ge2_cuda_runs_beside(l))
        return 0;
    const ge2_cuda_kernel *own = &ge2_op_def_of(l->node->op)->cuda;
    size_t need = own->bf16_scratch_bytes ? own->bf16_scratch_bytes(l) : 0;
    int n;
    const ge2_kernel_candidate *const *candidates = ge2_kernel_candidates_of(l->node->op, &n);
    for (int i = 0; i < n; i++) {
        const size_t asks = candidates[i]->cuda.bf16_scratch_bytes ? candidates[i]->cuda.bf16_scratch_bytes(l) : 0;
        need = asks > need ? asks : need;
    }
    return need;
}

/* Each staging slot's own launches take what prepare made of the key's
 * (streams, the kernel chosen, its plans): a slot's launch differs only in
 * where it reads the feeds, at the same offsets and alignment, and every
 * kernel reads its views when it is enqueued. The plans stay the key's
 * launches' (released with them). */
static void give_slots_the_prepared(ge2_exec *exec)
{
    for (int s = 0; s < GE2_STAGING_BUFFERS; s++) {
        for (int i = 0; exec->slot_launches[s] && i < exec->n_launches; i++) {
            ge2_launch *l = &exec->slot_launches[s][i];
            ge2_launch prepared = exec->launches[i];
            memcpy(prepared.in, l->in, sizeof prepared.in);
            memcpy(prepared.out, l->out, sizeof prepared.out);
            *l = prepared;
        }
    }
}

static ge2_status cuda_exec_prepare(ge2_backend_ctx *ctx, ge2_exec *exec)
{
    for (int i = 0; i < exec->n_launches; i++)
        if (ge2_cuda_runs_beside(&exec->launches[i]))
            GE2_TRY(ge2_cuda_side_open(ctx));
    ge2_cuda_exec *ce = ge2_calloc(1, sizeof *ce);
    if (!ce)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2 cuda backend: out of host memory");
    ce->eager = ctx->disable_capture;
    for (int i = 0; i < exec->n_launches; i++) {
        ge2_launch *l = &exec->launches[i];
        ge2_status st = GE2_OK;
        l->stream = ge2_cuda_runs_beside(l) ? ctx->side_stream : ctx->stream;
        l->blas = ctx->lt;
        l->workspace = ctx->workspace;
        l->workspace_bytes = ctx->workspace_bytes;
        l->tf32 = ctx->tf32;
        l->backend_data = NULL;
        l->kernel = NULL;
        if (!ge2_op_def_of(l->node->op)->cuda.launch)
            st = ge2_error(GE2_ERR_UNSUPPORTED, "ge2_%s (node %d): no CUDA kernel for this op", node_op_name(l),
                           l->node->id);
        else
            st = ge2_kernel_choose(l); /* the op's own kernel, or a registered candidate that beat it */
        if (st != GE2_OK) {
            release_launches(exec, i);
            ge2_free(ce);
            return st;
        }
    }
    exec->backend_data = ce;
    give_slots_the_prepared(exec);
    ge2_status st = prepare_groups(ctx, exec, ce);
    for (int s = 0; st == GE2_OK && s < GE2_STAGING_BUFFERS; s++) {
        const ge2_step_io *io = &exec->io[s];
        ce->results[s] = ge2_malloc(sizeof(ge2_cuda_copy) * (size_t)(io->n_results > 0 ? io->n_results : 1));
        if (!ce->results[s])
            st = ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2 cuda backend: out of host memory");
        for (int r = 0; st == GE2_OK && r < io->n_results; r++)
            ce->results[s][r] = cuda_copy_of(&io->results[r]);
    }
    for (int s = 0; st == GE2_OK && s < GE2_STAGING_BUFFERS; s++)
        if (exec->io[s].stage.bytes)
            st = new_event(&ce->staged[s]);
    /* The key's device staging was zeroed on the step stream when it was
     * allocated (cuda_alloc), behind the steps the host has run ahead of;
     * the feed stream's first stage copy must land after that, not be
     * zeroed by it. */
    if (st == GE2_OK && ctx->feed_stream && ce->staged[0]) {
        cudaError_t e = cudaEventRecord(ce->staged[0], ctx->stream);
        if (e == cudaSuccess)
            e = cudaStreamWaitEvent(ctx->feed_stream, ce->staged[0], 0);
        if (e != cudaSuccess)
            st = ge2_error(GE2_ERR_CUDA, "ge2 cuda backend: ordering the feed stream after the key's allocations: %s",
                           cudaGetErrorString(e));
    }
    if (st == GE2_OK)
        st = ge2_cuda_side_find_waits(exec, ce);
    if (st == GE2_OK && ctx->time_launches) {
        ce->eager = true; /* events between launches: no capture */
        st = ge2_cuda_timing_new(exec, &ce->timing);
    }
    if (st != GE2_OK) {
        for (int s = 0; s < GE2_STAGING_BUFFERS; s++)
            if (ce->staged[s])
                cudaEventDestroy(ce->staged[s]);
        ge2_cuda_side_free(ce, exec->n_launches);
        free_groups(ce);
        release_launches(exec, exec->n_launches);
        ge2_free(ce);
        exec->backend_data = NULL;
        return st;
    }
    exec->backend_data = ce;
    exec->captured = false;
    if (ctx->print_kernels)
        print_kernels(ctx, exec);
    return GE2_OK;
}

/* What the step's copies need from the launches: the feed upload (none
 * when the slot's launches read its device staging) and the result
 * copies, each either done by a group or by the backend. */
typedef struct step_copies {
    const ge2_cuda_copy *upload; /* NULL: none */
    const ge2_cuda_copy *results;
    int n_results;
    bool results_done; /* a group did them */
} step_copies;

/* Enqueues launch i of the slot's launches, or the group starting there;
 * the launches done in *done. */
static ge2_status enqueue_one(ge2_backend_ctx *ctx, const ge2_exec *exec, const ge2_cuda_exec *ce, int slot, int i,
                              step_copies *sc, int *done)
{
    const ge2_launch *launches = ge2_cuda_slot_launches(exec, slot);
    if (ce->group_at[i] < 0) {
        *done = 1;
        return launches[i].kernel->launch(&launches[i]);
    }
    const cuda_group *g = &ce->groups[ce->group_at[i]];
    const bool ends = i + g->count == exec->n_launches;
    ge2_fusion_run run = {&launches[i], g->count, ctx->stream, NULL, NULL, 0};
    if (i == 0 && (g->impl->does & GE2_FUSION_DOES_UPLOAD))
        run.upload = sc->upload;
    if (ends && (g->impl->does & GE2_FUSION_DOES_RESULTS)) {
        run.results = sc->results;
        run.n_results = sc->n_results;
        sc->results_done = true;
    }
    *done = g->count;
    return g->impl->launch ? g->impl->launch(g->state[slot], &run) : g->impl->run(run.launches, run.n);
}

/* The launches of a step. An in-place launch (ge2_cuda_goes_beside) goes on the
 * side stream after the step's stream so far (side_fork); a launch waits
 * for the side launch side_wait names (side_after). Data parallel: a
 * bucket's all-reduce then overlaps the rest of the backward. *unjoined:
 * whether a side launch was forked that no wait has covered. During
 * capture, *broke is the index of the launch after which the capture was
 * invalidated. */
static ge2_status enqueue_all(ge2_backend_ctx *ctx, ge2_exec *exec, int slot, step_copies *sc, bool capturing,
                              int *broke, bool *unjoined)
{
    const ge2_cuda_exec *ce = exec->backend_data;
    launch_timing *t = capturing ? NULL : ce->timing;
    if (t) {
        /* long enough for the host to enqueue the whole step behind it */
        GE2_TRY(ge2_cuda_hold(ctx->stream, 2000u + 100u * (unsigned)exec->n_launches));
        memset(t->next, 0, sizeof *t->next * (size_t)exec->n_launches);
    }
    int last_forked = SIDE_NONE;
    for (int i = 0, done = 1; i < exec->n_launches; i += done) {
        if (t)
            CUDA_TRY(cudaEventRecord(t->marks[i], ctx->stream));
        const bool beside = ge2_cuda_goes_beside(exec, i);
        const int wait_for = ge2_cuda_side_wait_of(exec, i);
        if (beside) {
            CUDA_TRY(cudaEventRecord(ctx->side_fork, ctx->stream));
            CUDA_TRY(cudaStreamWaitEvent(ctx->side_stream, ctx->side_fork, 0));
            *unjoined = true; /* forked: joined on every way out */
            last_forked = i;
            if (t)
                CUDA_TRY(cudaEventRecord(t->beside[2 * i], ctx->side_stream));
        } else if (wait_for != SIDE_NONE) {
            CUDA_TRY(cudaStreamWaitEvent(ctx->stream, ce->side_after[wait_for], 0));
            *unjoined = last_forked > wait_for;
            if (t)
                CUDA_TRY(cudaEventRecord(t->joined[i], ctx->stream));
        }
        ge2_status st = enqueue_one(ctx, exec, ce, slot, i, sc, &done);
        if (t)
            t->next[i] = i + done;
        if (beside && st == GE2_OK) {
            /* the timing mark first: a launch that waits for side_after[i]
             * then waits for the mark too, and when that wait was the
             * last, the step's end (ge2_cuda_timing_collect) comes after both */
            if (t)
                CUDA_TRY(cudaEventRecord(t->beside[2 * i + 1], ctx->side_stream));
            CUDA_TRY(cudaEventRecord(ce->side_after[i], ctx->side_stream));
        }
        if (capturing) {
            enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
            cudaError_t e = cudaStreamIsCapturing(ctx->stream, &cs);
            if (st != GE2_OK || e != cudaSuccess || cs != cudaStreamCaptureStatusActive) {
                *broke = i;
                return st != GE2_OK ? st : ge2_error(GE2_ERR_CUDA, "capture invalidated");
            }
        } else if (st != GE2_OK) {
            return st;
        }
    }
    return GE2_OK;
}

/* Enqueues every launch and group in schedule order (enqueue_all), then,
 * however that ended, joins the side stream: a captured step must join
 * every stream it forked, and a failed one must not leave work behind the
 * step's stream's back. */
static ge2_status enqueue_launches(ge2_backend_ctx *ctx, ge2_exec *exec, int slot, step_copies *sc,
                                   bool capturing, int *broke)
{
    ge2_cuda_exec *ce = exec->backend_data;
    bool unjoined = false;
    ge2_status st = enqueue_all(ctx, exec, slot, sc, capturing, broke, &unjoined);
    if (unjoined) {
        ge2_status joined = ge2_cuda_side_join(ctx);
        if (st == GE2_OK)
            st = joined;
    }
    launch_timing *t = capturing ? NULL : ce->timing;
    if (st == GE2_OK && t)
        CUDA_TRY(cudaEventRecord(t->marks[exec->n_launches], ctx->stream));
    return st;
}

/* The step through staging slot `slot`, in the order exec_run promises;
 * eager and captured steps both come from here. The copies are kernels,
 * not memcpy nodes (kernels/cuda/step_copy.h: every switch between the
 * copy engine and the SMs costs replay time); a fused group may do them
 * itself. When
 * the batch already lies in the slot's device staging (io->stage), the
 * slot's own launches read it there and the upload does not run: one
 * kernel and a device-to-device copy of the batch less per step. During
 * capture, *broke is the index of the launch after which the capture was
 * invalidated (-1 if none, or if a copy failed). */
static ge2_status enqueue_step(ge2_backend_ctx *ctx, ge2_exec *exec, int slot, bool capturing, int *broke)
{
    const ge2_step_io *io = &exec->io[slot];
    const ge2_cuda_exec *ce = exec->backend_data;
    ge2_cuda_copy upload = cuda_copy_of(&io->upload);
    const ge2_cuda_copy *results = ce->results[slot];
    *broke = -1;
    const bool staged = exec->slot_launches[slot] != NULL;
    step_copies sc = {staged ? NULL : &upload, results, io->n_results, false};
    const bool group_uploads = exec->n_launches > 0 && ce->group_at[0] >= 0 &&
                               (ce->groups[ce->group_at[0]].impl->does & GE2_FUSION_DOES_UPLOAD);
    if (!staged && !group_uploads)
        GE2_TRY(ge2_cuda_copy_launch(&upload, 1, ctx->stream));
    GE2_TRY(enqueue_launches(ctx, exec, slot, &sc, capturing, broke));
    return sc.results_done ? GE2_OK : ge2_cuda_copy_launch(results, io->n_results, ctx->stream);
}

ge2_status ge2_cuda_enqueue_body(ge2_backend_ctx *ctx, ge2_exec *exec, int slot, bool capturing, int *broke)
{
    step_copies sc = {NULL, NULL, 0, false};
    *broke = -1;
    return enqueue_launches(ctx, exec, slot, &sc, capturing, broke);
}

/* What one replay really launches: a cuBLASLt call may add split-K reduction
 * or epilogue kernels to the one launch ge2 enqueues, so benchmarks compare
 * this count, not the launch count, with a profiler's kernel count. */
static int count_kernel_nodes(cudaGraph_t graph)
{
    size_t n = 0;
    if (cudaGraphGetNodes(graph, NULL, &n) != cudaSuccess || n == 0)
        return -1;
    cudaGraphNode_t *nodes = ge2_malloc(n * sizeof *nodes);
    int kernels = -1;
    if (nodes && cudaGraphGetNodes(graph, nodes, &n) == cudaSuccess) {
        kernels = 0;
        for (size_t i = 0; i < n; i++) {
            enum cudaGraphNodeType type;
            if (cudaGraphNodeGetType(nodes[i], &type) == cudaSuccess && type == cudaGraphNodeTypeKernel)
                kernels++;
        }
    }
    cudaGetLastError();
    ge2_free(nodes);
    return kernels;
}

/* the cuBLASLt workspace (the launches' scratch is in the arenas) */
static size_t cuda_workspace_bytes(const ge2_backend_ctx *ctx)
{
    return ctx ? ctx->workspace_bytes : 0;
}

static int cuda_graph_kernel_count(const ge2_backend_ctx *ctx, const ge2_exec *exec)
{
    (void)ctx;
    const ge2_cuda_exec *ce = exec->backend_data;
    return ce && ce->graph[0] ? ce->kernel_nodes : -1;
}

/* Captures the step through staging slot `slot` into a graph, instantiates
 * and uploads it into *out. Nothing runs: the warm-up step already did the
 * work. On failure the returned message names the node and op (or the
 * copy) that broke the capture. */
static ge2_status capture_slot(ge2_backend_ctx *ctx, ge2_exec *exec, int slot, ge2_cuda_exec *ce,
                               cudaGraphExec_t *out)
{
    cudaGraph_t graph = NULL;
    int broke = -1;
    *out = NULL;
    cudaError_t e = cudaStreamBeginCapture(ctx->stream, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess)
        return cuda_fail(e, "cudaStreamBeginCapture");
    ge2_status st = enqueue_step(ctx, exec, slot, true, &broke);
    char why[512] = "";
    if (st != GE2_OK)
        snprintf(why, sizeof why, "%s", ge2_last_error());
    /* Always end the capture, so the stream is usable again. */
    e = cudaStreamEndCapture(ctx->stream, &graph);
    cudaGetLastError(); /* capture errors are not sticky; clear them */
    if (st != GE2_OK) {
        if (graph)
            cudaGraphDestroy(graph);
        if (broke < 0)
            return ge2_error(GE2_ERR_CUDA, "ge2 cuda backend: CUDA graph capture of staging slot %d failed: %s", slot,
                             why);
        const ge2_launch *l = &exec->launches[broke];
        return ge2_error(GE2_ERR_CUDA, "ge2 cuda backend: CUDA graph capture broken by node %d (%s): %s",
                         l->node->id, node_op_name(l), why);
    }
    if (e != cudaSuccess || !graph) {
        if (graph)
            cudaGraphDestroy(graph);
        return ge2_error(GE2_ERR_CUDA, "ge2 cuda backend: cudaStreamEndCapture failed: %s (%s)",
                         cudaGetErrorString(e), cudaGetErrorName(e));
    }
    ce->kernel_nodes = count_kernel_nodes(graph);
    e = cudaGraphInstantiate(out, graph, 0);
    cudaGraphDestroy(graph);
    if (e != cudaSuccess) {
        *out = NULL;
        cudaGetLastError();
        return cuda_fail(e, "cudaGraphInstantiate");
    }
    e = cudaGraphUpload(*out, ctx->stream);
    if (e != cudaSuccess) {
        cudaGraphExecDestroy(*out);
        *out = NULL;
        return cuda_fail(e, "cudaGraphUpload");
    }
    return GE2_OK;
}

/* One graph per staging slot, each captured from the same enqueue_step the
 * eager path runs, so a replay through slot s is by construction what an
 * eager step through s enqueues. Capturing once and patching the copies of
 * a second instantiation (cudaGraphExecMemcpyNodeSetParams1D) would save one
 * capture per key, once, but needs the memcpy nodes found again in the
 * captured graph and told apart by their pointers: more code, for no gain
 * per step. All slots or none: on failure the key has no graph. */
static ge2_status capture_slots(ge2_backend_ctx *ctx, ge2_exec *exec, ge2_cuda_exec *ce)
{
    for (int s = 0; s < GE2_STAGING_BUFFERS; s++) {
        ge2_status st = capture_slot(ctx, exec, s, ce, &ce->graph[s]);
        if (st != GE2_OK) {
            for (int i = 0; i < s; i++) {
                cudaGraphExecDestroy(ce->graph[i]);
                ce->graph[i] = NULL;
            }
            return st;
        }
    }
    ctx->capture_count++;
    return GE2_OK;
}

/* The slot's stage copy on the feed stream, and the step stream waits for
 * it. The copy engine runs it while the step before this one still runs on
 * the SMs: the slot's device staging is free (its last step is done, the
 * program waited for that before refilling the host staging) and nothing
 * else writes it. Outside the graph, so a replay's first act finds the
 * batch already on the device. (The wait as the graph's first node, an
 * external event wait, saves this call but made cudaGraphLaunch dearer in
 * host time.) */
static ge2_status stage_feeds(ge2_backend_ctx *ctx, ge2_cuda_exec *ce, const ge2_copy *stage, int slot)
{
    if (stage->bytes == 0)
        return GE2_OK;
    CUDA_TRY(cudaMemcpyAsync(stage->dst, stage->src, stage->bytes, cudaMemcpyHostToDevice, ctx->feed_stream));
    CUDA_TRY(cudaEventRecord(ce->staged[slot], ctx->feed_stream));
    CUDA_TRY(cudaStreamWaitEvent(ctx->stream, ce->staged[slot], 0));
    return GE2_OK;
}

static ge2_status cuda_exec_run(ge2_backend_ctx *ctx, ge2_exec *exec, int slot)
{
    ge2_cuda_exec *ce = exec->backend_data;
    int broke;
    if (!ce)
        return ge2_error(GE2_ERR_STATE, "ge2 cuda backend: graph key run before exec_prepare");
    if (slot < 0 || slot >= GE2_STAGING_BUFFERS)
        return ge2_error(GE2_ERR_STATE, "ge2 cuda backend: staging slot %d of %d", slot, GE2_STAGING_BUFFERS);
    GE2_TRY(stage_feeds(ctx, ce, &exec->io[slot].stage, slot));
    if (ce->graph[slot]) {
        CUDA_TRY(cudaGraphLaunch(ce->graph[slot], ctx->stream));
        return GE2_OK;
    }
    /* Eager: capture off, capture failed before, or this is the key's first
     * step (the warm-up, which is also the step's real work). */
    GE2_TRY(enqueue_step(ctx, exec, slot, false, &broke));
    if (ce->timing)
        GE2_TRY(ge2_cuda_timing_collect(ce->timing, exec->n_launches));
    if (ce->eager)
        return GE2_OK;
    ge2_status st = capture_slots(ctx, exec, ce);
    if (st != GE2_OK) {
        ce->eager = true;
        fprintf(stderr, "ge2: warning: %s; this graph key runs eagerly\n", ge2_last_error());
        return GE2_OK; /* the step itself ran (eagerly) and the key keeps working */
    }
    exec->captured = true;
    return GE2_OK;
}

const ge2_backend ge2_backend_cuda = {
    .device = GE2_DEVICE_CUDA,
    .name = "cuda",
    .open = cuda_open,
    .close = cuda_close,
    .alloc = cuda_alloc,
    .memory_free = cuda_memory_free,
    .free = cuda_free,
    .alloc_host = cuda_alloc_host,
    .free_host = cuda_free_host,
    .upload = cuda_upload,
    .round_bf16 = cuda_round_bf16,
    .download = cuda_download,
    .feeds_ahead = cuda_feeds_ahead,
    .launch_scratch_bytes = cuda_launch_scratch_bytes,
    .exec_prepare = cuda_exec_prepare,
    .exec_run = cuda_exec_run,
    .exec_loop = ge2_cuda_exec_loop,
    .loop_ready = ge2_cuda_loop_ready,
    .exec_release = cuda_exec_release,
    .sync = cuda_sync,
    .fence_new = cuda_fence_new,
    .fence_free = cuda_fence_free,
    .fence_record = cuda_fence_record,
    .fence_wait = cuda_fence_wait,
    .fence_done = cuda_fence_done,
    .capture_count = cuda_capture_count,
    .graph_kernel_count = cuda_graph_kernel_count,
    .workspace_bytes = cuda_workspace_bytes,
    .describe = cuda_describe,
    .launch_us = ge2_cuda_launch_us,
    .side_stream_us = ge2_cuda_side_stream_us,
};
