/* A backend: where a compiled program's memory lives and how a key's step
 * runs: its feed upload, its launches and the copy of its results to the
 * host. The CPU backend (capture/backends/backend_cpu.c) does them one after the
 * other; the CUDA backend (capture/backends/backend_cuda.c) warms up, captures all of
 * it into one CUDA Graph per staging slot on the first step of a key, and
 * replays after. program.c owns pools, keys and staging and talks to a
 * backend only here.
 */
#ifndef GE2_CAPTURE_BACKEND_H
#define GE2_CAPTURE_BACKEND_H

#include "graph/control.h"
#include "graph/ir.h"
#include "graph/step_loop.h"
#include "planner/plan.h"

typedef struct ge2_backend_ctx ge2_backend_ctx; /* a backend's per-program state */

/* Launch timing beside the step's stream, µs (backend.side_stream_us). */
typedef struct ge2_side_stream_us {
    double waited; /* the step's stream waited this long for the side stream before the launch (in launch_us) */
    bool beside;   /* the launch ran on the side stream: */
    double run;    /* from when the side stream reached it to its end */
    double start;  /* when it started there, after the step's first launch began */
} ge2_side_stream_us;
struct ge2_program_options; /* capture/options.h */

/* Feed staging slots per graph key: the host fills one while the device may
 * still run the step that used the other. A slot's step I/O does not change
 * while the key is prepared, so the CUDA backend captures one graph per slot. */
#define GE2_STAGING_BUFFERS 2

/* A copy between host and device memory; bytes 0: none. */
typedef struct ge2_copy {
    void *dst;
    const void *src;
    size_t bytes;
} ge2_copy;

/* What a step of a key moves besides its launches, for one staging slot:
 * the feeds in before the launches, the outputs the metrics sum out after
 * them. Host sides are the backend's alloc_host memory (pinned on CUDA).
 *
 * On a backend with feeds_ahead the feeds take two copies: `stage` moves
 * the slot's host staging into the slot's device staging while the step
 * before is still running (CUDA: the copy engine, on a stream of its own),
 * and `upload` would move that into the feed region as the step's first
 * act. The feed region is read until the step's end (the first layer's
 * weight gradient reads the input), so the next batch cannot land there
 * early. So a slot with a device staging has launches of its own
 * (ge2_exec.slot_launches), whose feed views point at that staging: the
 * CUDA backend runs them and skips `upload`, one graph per slot, and
 * ge2_program_read_output reads feeds from the staging. Elsewhere `stage`
 * is empty and `upload` reads the host staging. */
typedef struct ge2_step_io {
    ge2_copy stage;                     /* slot's staging (host) -> slot's device staging; bytes 0: none */
    ge2_copy upload;                    /* slot's (device or host) staging -> the key's feed region (device) */
    /* [n_results] (device) -> the slot's result area (host): the loss,
     * then every other scalar marked output, then the control block's
     * count of out-of-range labels and ids */
    const ge2_copy *results;
    int n_results;
} ge2_step_io;

/* One graph key ready to run: its plan and resolved launches, in schedule order. */
typedef struct ge2_exec {
    const ge2_plan *plan;
    int n_launches;
    ge2_launch *launches;
    void *arena;        /* this key's activation arena (possibly shared between keys) */
    /* per staging slot; set with the launches, before exec_prepare, and not
     * changed until exec_release (the CUDA graphs hold these addresses) */
    ge2_step_io io[GE2_STAGING_BUFFERS];
    /* Per staging slot with a device staging: the launches as that slot runs
     * them, resolved beside `launches` and alike but for the feed views,
     * which point at the slot's device staging (same offsets, so the same
     * alignment); exec_prepare gives them what it prepared for `launches`.
     * NULL: the slot's steps run `launches`, reading the feed region. */
    ge2_launch *slot_launches[GE2_STAGING_BUFFERS];
    void *backend_data; /* backend's per-key state (CUDA: its graph execs, ...) */
    bool captured;
} ge2_exec;

typedef struct ge2_backend {
    ge2_device device;
    const char *name;
    ge2_status (*open)(const struct ge2_program_options *options, ge2_backend_ctx **out);
    void (*close)(ge2_backend_ctx *ctx);
    /* Memory where kernels run; zero-filled. */
    ge2_status (*alloc)(ge2_backend_ctx *ctx, size_t bytes, void **out);
    /* Bytes alloc can still give (the host's available memory on the CPU,
     * the device's free memory on CUDA), asked before a program places its
     * pools and each key its arena, so a model too large fails with the
     * figures instead of being killed by the kernel's OOM killer part way
     * through its initialisation. NULL: not known, not checked. */
    ge2_status (*memory_free)(ge2_backend_ctx *ctx, size_t *bytes);
    void (*free)(ge2_backend_ctx *ctx, void *ptr);
    /* Host memory the device copies from/to quickly (pinned on CUDA). */
    ge2_status (*alloc_host)(ge2_backend_ctx *ctx, size_t bytes, void **out);
    void (*free_host)(ge2_backend_ctx *ctx, void *ptr);
    /* Host -> device, ordered before the next run; src must stay valid until
     * the device has read it (set_lr's ring, control and pool images). */
    ge2_status (*upload)(ge2_backend_ctx *ctx, void *dst, const void *src, size_t bytes);
    /* dst[i] = the bf16 bits of src[i] (f32, nearest even) for i < n, both
     * the backend's memory, ordered like upload (the parameter copies). */
    ge2_status (*round_bf16)(ge2_backend_ctx *ctx, uint16_t *dst, const float *src, int64_t n);
    /* Device -> host, waits for all earlier work. */
    ge2_status (*download)(ge2_backend_ctx *ctx, void *dst, const void *src, size_t bytes);
    /* The bytes of ge2_launch.scratch launch l needs while it runs (a bf16
     * GEMM's operand copies, cuDNN's workspace); the planner places them in
     * the key's arena with its tensors (ge2_plan_scratch_query) and the
     * program resolves l.scratch there. Asked while the key is planned,
     * before its arena and IO buffer exist, so l's views of them point at
     * a provisional base: non-NULL where the key computes a tensor and
     * aligned as they will be, never to be read or written. Optional: NULL
     * means no launch needs scratch. */
    size_t (*launch_scratch_bytes)(const ge2_backend_ctx *ctx, const ge2_launch *l);
    /* Per key: fill launch resources (stream, blas handle, workspace), kernel
     * prepare. Launches come with their scratch resolved (a key made by
     * hand brings its own): a bf16 GEMM without it fails at launch, and
     * attention runs its fp32 kernels. */
    ge2_status (*exec_prepare)(ge2_backend_ctx *ctx, ge2_exec *exec);
    /* Whether each staging slot gets a device staging too (alloc'd by the
     * program, GE2_STAGING_BUFFERS x the feed region per key): see
     * ge2_step_io. Optional: NULL means no. */
    bool (*feeds_ahead)(const ge2_backend_ctx *ctx);
    /* One step of the key through staging slot `slot`, in this order on the
     * device: exec->io[slot].stage (which may overlap the step before),
     * then either the slot's own launches (exec->slot_launches[slot]) or
     * exec->io[slot].upload and the key's launches, then
     * exec->io[slot].results. The
     * program calls it only once the slot's previous step is done (its
     * fence), so the slot's staging, host and device, is free.
     * Returns once it is enqueued (CPU: done). CUDA: the first run after
     * exec_prepare runs eagerly (the warm-up, and the step itself), then
     * captures one graph per slot; later runs replay the slot's graph. */
    ge2_status (*exec_run)(ge2_backend_ctx *ctx, ge2_exec *exec, int slot);
    /* Steps of a key in one launch (graph/step_loop.h): while the loop's
     * counters have steps remaining, the gather, staging slot 0's launches
     * (without its upload and result copies: the loop gathers the feeds
     * and sums the results) and the advance. Only for a key loop_ready
     * says yes to; the loop's counters are the caller's to fill before and
     * read after (upload, download). CUDA: the first call, and one with
     * another `generation` (the loop's addresses or constants changed),
     * captures the loop's graph, which the key keeps until exec_release,
     * and it returns once the launch is enqueued; the CPU runs it in C
     * with graph/step_loop.h's helpers. An error with the counters'
     * steps_run 0: nothing ran, and the program runs the steps one at a
     * time; with steps_run > 0 (the CPU, whose kernels fail at once):
     * that step failed, and the error is its. Optional: NULL means the
     * program runs the steps one at a time. */
    ge2_status (*exec_loop)(ge2_backend_ctx *ctx, ge2_exec *exec, const ge2_step_loop *loop, uint64_t generation);
    /* Whether exec_loop may run the key now: the CPU unless it times
     * launches; CUDA once the key's steps replay a captured graph, with
     * ge2_compile_options.device_loop. exec NULL: whether any key ever may.
     * NULL: never. */
    bool (*loop_ready)(const ge2_backend_ctx *ctx, const ge2_exec *exec);
    void (*exec_release)(ge2_backend_ctx *ctx, ge2_exec *exec);
    ge2_status (*sync)(ge2_backend_ctx *ctx);
    /* Keys captured over the program's life (each holds a graph per slot). */
    int (*capture_count)(const ge2_backend_ctx *ctx);
    /* Kernel nodes in the key's captured graph (cuBLASLt may launch several per
     * GEMM), -1 when the key is not captured. Optional: NULL means -1. */
    int (*graph_kernel_count)(const ge2_backend_ctx *ctx, const ge2_exec *exec);
    /* Device bytes the backend holds for kernels besides the pools (CUDA: the
     * cuBLASLt workspace). Optional: NULL means 0. */
    size_t (*workspace_bytes)(const ge2_backend_ctx *ctx);
    /* Which kernel a prepared launch runs, as text into buf (the kernel report). */
    void (*describe)(const ge2_backend_ctx *ctx, const ge2_launch *launch, char *buf, size_t size);
    /* With ge2_compile_options.time_launches: launch i's mean device time per
     * step in µs (a fused group's whole time on its first launch, 0 on the
     * rest) over *steps timed steps; -1 when not timed. Optional: NULL
     * means not timed. */
    double (*launch_us)(const ge2_backend_ctx *ctx, const ge2_exec *exec, int i, int *steps);
    /* With time_launches, where launch i met the side stream (the
     * data-parallel all-reduces run there), means per timed step; false when
     * it did not (or nothing was timed). Optional: NULL means never. */
    bool (*side_stream_us)(const ge2_backend_ctx *ctx, const ge2_exec *exec, int i, ge2_side_stream_us *out);
    /* Optional fences, so the program can reuse a pinned buffer an earlier
     * copy reads or writes without waiting for the whole device: fence_record
     * marks the point after the work enqueued so far, fence_wait blocks until
     * the work before the latest mark is done, fence_done says whether it is
     * without waiting (both at once if never recorded). program_step.c
     * records one after each step, so a staging slot's fence also says that
     * slot's results have landed. All five NULL: the program calls sync
     * instead (free on the CPU, which runs a step before exec_run returns). */
    ge2_status (*fence_new)(ge2_backend_ctx *ctx, void **fence);
    void (*fence_free)(ge2_backend_ctx *ctx, void *fence);
    ge2_status (*fence_record)(ge2_backend_ctx *ctx, void *fence);
    ge2_status (*fence_wait)(ge2_backend_ctx *ctx, void *fence);
    ge2_status (*fence_done)(ge2_backend_ctx *ctx, void *fence, bool *done);
} ge2_backend;

extern const ge2_backend ge2_backend_cpu;
extern const ge2_backend ge2_backend_cuda;

#endif /* GE2_CAPTURE_BACKEND_H */
