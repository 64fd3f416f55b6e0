/* What a test needs to call a cuBLASLt kernel through the kernel interface:
 * a stream, a cuBLASLt handle and the backend's workspace size. Tests call
 * these inside Check test functions only (main() makes no CUDA call). */
#ifndef GE2_TESTS_GPU_LT_GPU_H
#define GE2_TESTS_GPU_LT_GPU_H

#include <check.h>
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "graph/control.h"
#include "graph/ir.h"

#define LT_GPU_WORKSPACE_BYTES ((size_t)32 << 20)

#define CUDA_OK(call) ck_assert_msg((call) == cudaSuccess, "%s failed", #call)

typedef struct gpu {
    cudaStream_t stream;
    cublasLtHandle_t lt;
    void *workspace;
} gpu;

static inline void gpu_open(gpu *g)
{
    CUDA_OK(cudaSetDevice(0));
    CUDA_OK(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking));
    ck_assert_int_eq(cublasLtCreate(&g->lt), CUBLAS_STATUS_SUCCESS);
    CUDA_OK(cudaMalloc(&g->workspace, LT_GPU_WORKSPACE_BYTES));
}

static inline void gpu_close(gpu *g)
{
    cudaFree(g->workspace);
    cublasLtDestroy(g->lt);
    cudaStreamDestroy(g->stream);
}

/* A launch's stream, cuBLASLt handle and workspace (fp32: tf32 off). */
/* What the launches these suites make see of the compile options (a
 * program's launches get its own): the defaults, which a test may change. */
static ge2_kernel_settings gpu_settings = GE2_KERNEL_SETTINGS_DEFAULTS;

static inline void gpu_fill_launch(ge2_launch *l, const gpu *g)
{
    l->settings = &gpu_settings;
    l->stream = g->stream;
    l->blas = g->lt;
    l->workspace = g->workspace;
    l->workspace_bytes = LT_GPU_WORKSPACE_BYTES;
    l->tf32 = false;
}

#endif /* GE2_TESTS_GPU_LT_GPU_H */
