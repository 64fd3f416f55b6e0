/* The CUDA backend's state, shared by its files: backend_cuda.c (open,
 * memory, keys, the step and its capture), backend_cuda_side.c (the side
 * stream in-place launches run on, and who waits for them) and
 * backend_cuda_timing.c (the launches timed one by one). For those files
 * only. */
#ifndef GE2_CAPTURE_BACKEND_CUDA_INTERNAL_H
#define GE2_CAPTURE_BACKEND_CUDA_INTERNAL_H

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "capture/backend.h"
#include "capture/program_internal.h"
#include "fusion/fusion.h"
#include "graph/alloc.h"
#include "graph/error.h"
#include "kernels/cuda/step_copy.h"

struct ge2_backend_ctx {
    int device;
    cudaStream_t stream;
    cudaStream_t feed_stream; /* feeds_ahead: host staging -> device staging, beside the steps */
    /* in-place ops (the data-parallel all-reduce) run here, beside the
     * step's stream, made with the first key that has one: side_fork is
     * recorded on the step's stream before each; side_done on this one
     * when a step ends, for the step's stream to join it (see
     * enqueue_launches) */
    cudaStream_t side_stream;
    cudaEvent_t side_fork, side_done;
    /* > 0 with a process group (its timeout_s): host waits for the device
     * poll and fail after this long instead of blocking for good; wait_mark
     * is recorded on a stream to wait for it */
    double wait_timeout_s;
    int wait_rank; /* the group's rank of this process, for the timeout's message */
    cudaEvent_t wait_mark;
    cublasLtHandle_t lt;
    void *workspace; /* [workspace_bytes]: GE2_CUDA_WORKSPACE_BYTES, or the 16-bit programs' size */
    size_t workspace_bytes;
    bool tf32;
    bool disable_capture;
    bool print_kernels; /* describe every launch at prepare */
    bool time_launches; /* eager steps with events between launches */
    bool feeds_ahead;   /* feeds copied ahead on feed_stream */
    bool device_loop;   /* ge2_compile_options.device_loop */
    int capture_count; /* keys captured over the program's life */
};

/* A fused group the CUDA backend runs with its pattern's implementation. */
typedef struct cuda_group {
    const ge2_fusion_impl *impl;
    /* per staging slot, what impl->prepare made of the slot's launches
     * (ge2_cuda_slot_launches; stateless: impl); slots that run the key's
     * own launches share one */
    void *state[GE2_STAGING_BUFFERS];
    int first, count;
} cuda_group;

/* time_launches: events between a key's launches, read after each step. */
typedef struct launch_timing {
    cudaEvent_t *marks; /* [n_launches + 1]: before launch (or group) i; marks[n] after the last */
    int *next;          /* [n_launches] the launch after the one or group started at i; 0: none starts at i */
    double *ms;         /* [n_launches] summed over the timed steps */
    /* Data parallel: where the side stream's work went. joined[i] is
     * recorded on the step's stream after launch i's wait for the side
     * stream (NULL where it has none: side_wait); beside[2i], beside[2i + 1]
     * on the side stream around side launch i (NULL for the others). */
    cudaEvent_t *joined, *beside;
    double *wait_ms, *beside_ms, *beside_at_ms; /* [n_launches] summed like ms */
    int steps; /* steps run; the first (lazy module loading, plan warm-up) is not timed */
} launch_timing;

/* Per key, in ge2_exec.backend_data. */
typedef struct ge2_cuda_exec {
    cudaGraphExec_t graph[GE2_STAGING_BUFFERS]; /* per staging slot; NULL until captured */
    bool eager;       /* capture failed: this key runs eagerly for good */
    int kernel_nodes; /* kernels in a captured graph (every slot's has the same), counted at capture */
    /* the plan's groups an implementation took: group_at[i] >= 0 is the
     * one starting at launch i */
    cuda_group *groups;
    int n_groups;
    int *group_at;       /* [n_launches] */
    ge2_cuda_copy *results[GE2_STAGING_BUFFERS]; /* [io.n_results] each slot's result copies, as kernels take them */
    /* feeds_ahead: recorded on the feed stream after the slot's stage copy,
     * waited for by the step stream before the slot's step */
    cudaEvent_t staged[GE2_STAGING_BUFFERS];
    /* side_after[i]: recorded on the side stream after side launch i (NULL
     * for the others), so a launch that needs only its result waits for it
     * and not for the side launches after it */
    cudaEvent_t *side_after;
    /* side_wait[i]: the side launch that launch (or group) i waits for
     * first, which covers the ones before it on that in-order stream;
     * SIDE_NONE: none. The same every step, so found once (ge2_cuda_side_find_waits). */
    int *side_wait;
    launch_timing *timing; /* NULL unless time_launches */
    /* the key's device loop (backend_cuda_loop.c): NULL until a loop asks
     * for it; made for the loop generation loop_generation */
    cudaGraphExec_t loop;
    uint64_t loop_generation;
} ge2_cuda_exec;

/* The launches a step through staging slot `slot` runs: the slot's own
 * (their feed views at its device staging) where it has them, else the
 * key's */
static inline ge2_launch *ge2_cuda_slot_launches(const ge2_exec *exec, int slot)
{
    return exec->slot_launches[slot] ? exec->slot_launches[slot] : exec->launches;
}

static inline ge2_status cuda_fail(cudaError_t e, const char *call)
{
    return ge2_error(GE2_ERR_CUDA, "ge2 cuda backend: %s failed: %s (%s)", call, cudaGetErrorString(e),
                     cudaGetErrorName(e));
}

#define CUDA_TRY(call)                            \
    do {                                          \
        cudaError_t e_ = (call);                  \
        if (e_ != cudaSuccess)                    \
            return cuda_fail(e_, #call);          \
    } while (0)

/* Timing off: the event only answers "is the work before it done". */
static inline ge2_status new_event(cudaEvent_t *event)
{
    CUDA_TRY(cudaEventCreateWithFlags(event, cudaEventDisableTiming));
    return GE2_OK;
}

static inline void destroy_events(cudaEvent_t *events, int n)
{
    for (int i = 0; events && i < n; i++)
        if (events[i])
            cudaEventDestroy(events[i]);
    ge2_free(events);
}

/* side_wait[i] of a launch that waits for no side launch */
enum { SIDE_NONE = -1 };

/* ------------------------------------------- the side stream (backend_cuda_side.c) */

/* Whether launch l runs on the side stream: an in-place op */
bool ge2_cuda_runs_beside(const ge2_launch *l);
/* Whether launch i of a prepared key goes on the side stream: it runs
 * beside, and no fused group took it */
bool ge2_cuda_goes_beside(const ge2_exec *exec, int i);
/* ce's side_wait[i], SIDE_NONE without a side stream */
int ge2_cuda_side_wait_of(const ge2_exec *exec, int i);
/* The side stream and its two events, made once per program */
ge2_status ge2_cuda_side_open(ge2_backend_ctx *ctx);
/* ce->side_wait and side_after of a prepared key that has side launches */
ge2_status ge2_cuda_side_find_waits(const ge2_exec *exec, ge2_cuda_exec *ce);
/* The step's stream waits for everything on the side stream so far */
ge2_status ge2_cuda_side_join(ge2_backend_ctx *ctx);
void ge2_cuda_side_free(ge2_cuda_exec *ce, int n_launches);

/* -------------------------------------- launches timed one by one (backend_cuda_timing.c) */

ge2_status ge2_cuda_timing_new(const ge2_exec *exec, launch_timing **out);
void ge2_cuda_timing_free(launch_timing *t, int n_launches);
/* Adds the step just enqueued to the sums, once the GPU has run it */
ge2_status ge2_cuda_timing_collect(launch_timing *t, int n_launches);
/* The backend's launch_us and side_stream_us (capture/backend.h) */
double ge2_cuda_launch_us(const ge2_backend_ctx *ctx, const ge2_exec *exec, int i, int *steps);
bool ge2_cuda_side_stream_us(const ge2_backend_ctx *ctx, const ge2_exec *exec, int i, ge2_side_stream_us *out);

/* Enqueues the key's launches through staging slot `slot` as a step does,
 * without the feed upload and the result copies (a device loop's body;
 * backend_cuda.c). During capture, *broke is the index of the launch after
 * which the capture was invalidated (-1 if none). */
ge2_status ge2_cuda_enqueue_body(ge2_backend_ctx *ctx, ge2_exec *exec, int slot, bool capturing, int *broke);

/* The CUDA backend's exec_loop, and the release of what it made for a key
 * (backend_cuda_loop.c). */
ge2_status ge2_cuda_exec_loop(ge2_backend_ctx *ctx, ge2_exec *exec, const ge2_step_loop *loop, uint64_t generation);
bool ge2_cuda_loop_ready(const ge2_backend_ctx *ctx, const ge2_exec *exec);
void ge2_cuda_loop_release(ge2_cuda_exec *ce);

#endif /* GE2_CAPTURE_BACKEND_CUDA_INTERNAL_H */
