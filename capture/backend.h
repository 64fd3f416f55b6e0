/* A backend: where a compiled program's memory lives and how a key's
 * launches run. The CPU backend (capture/backend_cpu.c) loops over the
 * launches; the CUDA backend (capture/backend_cuda.c) warms up, captures them
 * into one CUDA Graph on the first step of a key, and replays it after.
 * program.c owns pools, keys and staging and talks to a backend only here.
 */
#ifndef GE2_CAPTURE_BACKEND_H
#define GE2_CAPTURE_BACKEND_H

#include "kernels/kernel.h"
#include "planner/plan.h"

typedef struct ge2_backend_ctx ge2_backend_ctx; /* a backend's per-program state */

/* One graph key ready to run: its plan and resolved launches, in schedule order. */
typedef struct ge2_exec {
    const ge2_plan *plan;
    int n_launches;
    ge2_launch *launches;
    void *arena;        /* this key's activation arena (possibly shared between keys) */
    void *inputs;       /* this key's static input buffers */
    void *backend_data; /* backend's per-key state (CUDA: cudaGraphExec_t, ...) */
    bool captured;
} ge2_exec;

typedef struct ge2_backend {
    ge2_device device;
    const char *name;
    ge2_status (*open)(const ge2_compile_options *options, ge2_backend_ctx **out);
    void (*close)(ge2_backend_ctx *ctx);
    /* Memory where kernels run; zero-filled. */
    ge2_status (*alloc)(ge2_backend_ctx *ctx, size_t bytes, void **out);
    void (*free)(ge2_backend_ctx *ctx, void *ptr);
    /* Host memory the device copies from/to quickly (pinned on CUDA). */
    ge2_status (*alloc_host)(ge2_backend_ctx *ctx, size_t bytes, void **out);
    void (*free_host)(ge2_backend_ctx *ctx, void *ptr);
    /* Host -> device, ordered before the next run; src must stay valid until then (staging). */
    ge2_status (*upload)(ge2_backend_ctx *ctx, void *dst, const void *src, size_t bytes);
    /* Device -> host, waits for all earlier work. */
    ge2_status (*download)(ge2_backend_ctx *ctx, void *dst, const void *src, size_t bytes);
    /* Device -> host without waiting; ready once poll_readback says so. */
    ge2_status (*readback_async)(ge2_backend_ctx *ctx, void *dst_host, const void *src, size_t bytes);
    bool (*readback_done)(ge2_backend_ctx *ctx);
    /* Per key: fill launch resources (stream, blas handle, workspace), kernel prepare. */
    ge2_status (*exec_prepare)(ge2_backend_ctx *ctx, ge2_exec *exec);
    /* One step of the key (CUDA: warm up + capture on first call, replay after). */
    ge2_status (*exec_run)(ge2_backend_ctx *ctx, ge2_exec *exec);
    void (*exec_release)(ge2_backend_ctx *ctx, ge2_exec *exec);
    ge2_status (*sync)(ge2_backend_ctx *ctx);
    int (*capture_count)(const ge2_backend_ctx *ctx);
    /* Kernel nodes in the key's captured graph (cuBLASLt may launch several per
     * GEMM), -1 when the key is not captured. Optional: NULL means -1. */
    int (*graph_kernel_count)(const ge2_backend_ctx *ctx, const ge2_exec *exec);
    /* Device bytes the backend holds for kernels besides the pools (CUDA: the
     * cuBLASLt workspace). Optional: NULL means 0. */
    size_t (*workspace_bytes)(const ge2_backend_ctx *ctx);
    /* Which kernel a prepared launch runs, as text into buf (the kernel report). */
    void (*describe)(const ge2_backend_ctx *ctx, const ge2_launch *launch, char *buf, size_t size);
    /* Optional fences, so the program can reuse a pinned staging buffer without
     * waiting for the whole device: fence_record marks the point after the
     * work enqueued so far, fence_wait blocks until the work before the latest
     * mark is done (at once if never recorded). program.c records one right
     * after each feed upload. All four NULL: the program calls sync before
     * refilling a staging buffer instead (free on the CPU, whose upload copies
     * at once). */
    ge2_status (*fence_new)(ge2_backend_ctx *ctx, void **fence);
    void (*fence_free)(ge2_backend_ctx *ctx, void *fence);
    ge2_status (*fence_record)(ge2_backend_ctx *ctx, void *fence);
    ge2_status (*fence_wait)(ge2_backend_ctx *ctx, void *fence);
} ge2_backend;

extern const ge2_backend ge2_backend_cpu;
extern const ge2_backend ge2_backend_cuda;

#endif /* GE2_CAPTURE_BACKEND_H */
