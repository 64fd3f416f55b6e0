/* The kernel interface: what every backend's kernel receives for one node.
 *
 * The compiled program resolves each scheduled node into a ge2_launch: views
 * of its inputs and outputs at their planned addresses, plus the per-program
 * resources a kernel may need. Kernels of both backends take the same struct,
 * so the CPU backend executes exactly the plan the CUDA backend captures.
 */
#ifndef GE2_KERNELS_KERNEL_H
#define GE2_KERNELS_KERNEL_H

#include "graph/control.h"
#include "graph/ir.h"

/* A tensor at its planned address (host memory on CPU, device memory on CUDA). */
typedef struct ge2_view {
    void *data;
    ge2_dtype dtype;
    ge2_shape shape;
} ge2_view;

/* Number of f32 elements each parameter is aligned to inside the flat pools (256 bytes). */
#define GE2_PARAM_ALIGN_ELEMS 64

/* The persistent flat buffers (f32). Padding between parameters is zero and
 * stays zero, so a kernel may sweep all n elements. */
typedef struct ge2_flat_pools {
    float *params; /* [n] */
    float *grads;  /* [n] same layout as params */
    float *state;  /* [slots * n] optimizer state: SGD momentum; Adam m, v(, v_max); accumulation buffer last */
    int slots;
    int64_t n;
} ge2_flat_pools;

typedef struct ge2_launch {
    const ge2_node *node; /* op and attrs */
    int n_in, n_out;
    ge2_view in[GE2_MAX_INPUTS];
    ge2_view out[GE2_MAX_OUTPUTS]; /* out[i].data == NULL: not needed by this key, don't write it */
    ge2_control *control;          /* device pointer on CUDA */
    ge2_flat_pools pools;          /* optimizer ops */
    void *workspace;               /* CUDA: cuBLASLt workspace, allocated before capture */
    size_t workspace_bytes;
    void *stream;       /* CUDA: cudaStream_t the step runs on */
    void *blas;         /* CUDA: cublasLtHandle_t */
    bool tf32;          /* CUDA: allow TF32 GEMMs */
    void *backend_data; /* per-launch state made by prepare (descriptors, chosen algorithm) */
    /* CUDA: the kernel that does this launch's work with others', described
     * (the whole-step kernel, kernels/cuda/mlp_step.h, or a head kernel,
     * kernels/cuda/head.h); NULL when the launch runs its own kernel */
    const char *fused_into;
} ge2_launch;

/* CPU kernels: one per op, indexed by ge2_op (kernels/cpu). */
typedef ge2_status (*ge2_cpu_kernel_fn)(const ge2_launch *launch);
extern const ge2_cpu_kernel_fn ge2_cpu_kernels[GE2_OP_COUNT];

/* CUDA kernels (kernels/cuda): prepare runs once per graph key before warm-up
 * and capture (descriptors, algorithm choice, never during capture); launch
 * enqueues on launch->stream and must be capturable (no allocation, no sync,
 * no host read); release frees what prepare made. prepare/release may be NULL. */
typedef struct ge2_cuda_kernel {
    ge2_status (*prepare)(ge2_launch *launch);
    ge2_status (*launch)(const ge2_launch *launch);
    void (*release)(ge2_launch *launch);
    const char *(*describe)(const ge2_launch *launch); /* which kernel/algorithm this node got; may be NULL */
} ge2_cuda_kernel;
extern const ge2_cuda_kernel ge2_cuda_kernels[GE2_OP_COUNT];

#endif /* GE2_KERNELS_KERNEL_H */
