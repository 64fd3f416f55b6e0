/* cuDNN 9's backend (graph) API for ops' CUDA kernels, loaded at run time.
 *
 * libcudnn.so.9 is opened with dlopen on first use, so a binary runs (and
 * falls back to ge2's own kernels) where cuDNN is missing, and the error
 * names the library. A single-operation plan is built once per launch at
 * prepare (heuristics, then the first engine that finalizes and whose
 * numerical notes the launch allows) and executed capturably at launch.
 *
 * Only API that every cuDNN 9 release has is used. The plans run on one process-wide handle, whose stream is
 * set before each execution: programs step from one thread. */
#ifndef GE2_KERNELS_CUDA_CUDNN_H
#define GE2_KERNELS_CUDA_CUDNN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ge2/ge2.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A finalized backend descriptor, opaque here (cudnnBackendDescriptor_t). */
typedef void *ge2_cudnn_desc;

/* Loads cuDNN and makes the handle; GE2_OK once that worked, else the same
 * error each time ("libcudnn.so.9: cannot open shared object file ..."). */
ge2_status ge2_cudnn_available(void);
/* "cuDNN 9.14.0" once loaded. */
const char *ge2_cudnn_version(void);

/* A tensor of an operation graph: its unique id (what the variant pack
 * names), up to 8 dims; data_type a cudnnDataType_t; strides
 * NULL for row-major contiguous; a virtual tensor lives inside the fused
 * kernel (its uid must still be unique); a by-value one is a scalar whose
 * variant-pack pointer is host memory. */
typedef struct ge2_cudnn_tensor_spec {
    int64_t uid;
    int data_type;
    int ndim;
    const int64_t *dims, *strides;
    bool is_virtual, by_value;
    int64_t alignment; /* bytes; 0: 16 */
} ge2_cudnn_tensor_spec;
ge2_status ge2_cudnn_tensor_of(const ge2_cudnn_tensor_spec *spec, ge2_cudnn_desc *out);
/* A 2-D cross-correlation (PyTorch's convolution): f32 compute. */
ge2_status ge2_cudnn_conv_desc(const int64_t stride[2], const int64_t padding[2], const int64_t dilation[2],
                               ge2_cudnn_desc *out);
/* Any backend descriptor of `type` (cudnnBackendDescriptorType_t) with
 * the attributes set by the caller through ge2_cudnn_set, then finalized. */
ge2_status ge2_cudnn_new(int type, ge2_cudnn_desc *out);
/* cudnnBackendSetAttribute(desc, name, type, count, values). */
ge2_status ge2_cudnn_set(ge2_cudnn_desc desc, int name, int type, int64_t count, const void *values);
ge2_status ge2_cudnn_finalize(ge2_cudnn_desc desc);
void ge2_cudnn_free(ge2_cudnn_desc desc);

/* An execution plan for the one operation `op`. */
typedef struct ge2_cudnn_plan {
    ge2_cudnn_desc plan;
    size_t workspace_bytes;
    int64_t engine;      /* the engine's global index */
    /* a fingerprint of its configuration's knob choices (never 0): one
     * engine comes in several configurations (tiles, split-K), which sum in
     * other orders, so engine and knobs together name what ran */
    uint64_t knobs;
    char notes[96];      /* its numerical notes, for the kernel report */
    int timed;           /* engines timed to choose it (0: the heuristics' first, or `prefer`) */
    float us;            /* its time when timed */
} ge2_cudnn_plan;

/* The buffers to time candidate plans on (scratch of the operation's
 * shapes: the launch's own are not touched). */
typedef struct ge2_cudnn_timing {
    void *stream;
    int n;
    const int64_t *uids;
    void *const *ptrs;
} ge2_cudnn_timing;

/* Which engines' arithmetic a plan may use, by their numerical notes
 * (nondeterministic engines never: replays must equal eager steps). */
typedef enum ge2_cudnn_numerics {
    GE2_CUDNN_FP32,      /* fp32 products and sums: no tensor cores on f32, no down-converted inputs, no
                          * reduced-precision sums, no FFT */
    GE2_CUDNN_FP32_SUMS, /* low-precision operands on tensor cores, but fp32 sums of the exact products: no
                          * down-converted inputs, reduced-precision sums, FFT or Winograd transforms */
    GE2_CUDNN_ANY,       /* every deterministic engine (TF32) */
} ge2_cudnn_numerics;

/* A configuration remembered from an earlier timing: the engine and its
 * knobs (0: the engine's first configuration, as caches written before
 * knobs were kept say). */
typedef struct ge2_cudnn_choice {
    int64_t engine;
    uint64_t knobs;
} ge2_cudnn_choice;

/* Builds the plan of the graph of n_ops operations (in topological order):
 * heuristics mode A, then the configurations in their order, skipping those
 * the numerics exclude. Without timing the first that finalizes wins; with
 * it, up to GE2_CUDNN_TIMED of them are each run a few times on the timing
 * buffers and the fastest wins. prefer (a choice remembered from an earlier
 * timing; NULL for none) takes exactly that configuration when it is there,
 * allowed and finalizes, untimed, so every key and every later run of the
 * problem runs what was timed. On failure why says what (no engine, or the
 * first one's reason). */
#define GE2_CUDNN_TIMED 8
ge2_status ge2_cudnn_plan_new(const ge2_cudnn_desc *ops, int n_ops, ge2_cudnn_numerics numerics,
                              const ge2_cudnn_timing *timing, const ge2_cudnn_choice *prefer, ge2_cudnn_plan *out,
                              char *why, size_t why_size);

/* Tests only: a function that replaces each timed configuration's
 * measured µs (the n candidates of one choice, this one at index i), so a
 * test can make the timing pick any winner, as a busy or instrumented GPU
 * may; NULL (the default) keeps the measurements. */
typedef float (*ge2_cudnn_timer)(void *user, const ge2_cudnn_plan *candidates, int n, int i, float measured_us);
void ge2_cudnn_set_timer(ge2_cudnn_timer timer, void *user);
void ge2_cudnn_plan_free(ge2_cudnn_plan *plan);

/* Runs the plan on stream over n tensors (uids[i] at ptrs[i]) with the
 * workspace (plan->workspace_bytes, allocated before capture). Capturable. */
ge2_status ge2_cudnn_execute(const ge2_cudnn_plan *plan, void *stream, int n, const int64_t *uids, void *const *ptrs,
                             void *workspace);

#ifdef __cplusplus
}
#endif

#endif /* GE2_KERNELS_CUDA_CUDNN_H */
