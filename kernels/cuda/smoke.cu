// CUDA smoke launchers (see smoke.h): kernels first, then their launchers.
#include "kernels/cuda/smoke.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdarg>
#include <cstdio>

// ------------------------------------------------------------------ kernels

__global__ void ge2_smoke_axpy_kernel(int n, float a, const float *x /* [n] */,
                                      float *y /* [n] */)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
}

// ---------------------------------------------------------------- launchers

static int fail(char *msg, size_t msg_size, const char *fmt, ...)
{
    if (msg && msg_size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, msg_size, fmt, ap);
        va_end(ap);
    }
    return -1;
}

#define CUDA_TRY(expr)                                                                     \
    do {                                                                                   \
        cudaError_t e_ = (expr);                                                           \
        if (e_ != cudaSuccess) {                                                           \
            rc = fail(msg, msg_size, "%s: %s (%s)", #expr, cudaGetErrorString(e_),         \
                      cudaGetErrorName(e_));                                               \
            goto done;                                                                     \
        }                                                                                  \
    } while (0)

#define LT_TRY(expr)                                                                       \
    do {                                                                                   \
        cublasStatus_t s_ = (expr);                                                        \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                 \
            rc = fail(msg, msg_size, "%s: cuBLAS status %d", #expr, (int)s_);              \
            goto done;                                                                     \
        }                                                                                  \
    } while (0)

extern "C" int ge2_cuda_smoke_device_count(int *count, char *msg, size_t msg_size)
{
    int rc = 0;
    *count = 0;
    cudaError_t e = cudaGetDeviceCount(count);
    if (e == cudaErrorNoDevice) {
        *count = 0;
        return 0;
    }
    if (e != cudaSuccess) {
        *count = 0;
        rc = fail(msg, msg_size, "cudaGetDeviceCount: %s (%s)", cudaGetErrorString(e),
                  cudaGetErrorName(e));
    }
    return rc;
}

extern "C" int ge2_cuda_smoke_device_info(int device, char *name, size_t name_size, int *cc_major,
                                          int *cc_minor, size_t *total_bytes, char *msg,
                                          size_t msg_size)
{
    int rc = 0;
    cudaDeviceProp prop;
    CUDA_TRY(cudaGetDeviceProperties(&prop, device));
    if (name && name_size)
        snprintf(name, name_size, "%s", prop.name);
    *cc_major = prop.major;
    *cc_minor = prop.minor;
    *total_bytes = prop.totalGlobalMem;
done:
    return rc;
}

extern "C" int ge2_cuda_smoke_axpy(int n, float a, const float *x, float *y, char *msg,
                                   size_t msg_size)
{
    int rc = 0;
    float *dx = NULL, *dy = NULL;
    size_t bytes = (size_t)n * sizeof(float);
    if (n <= 0)
        return fail(msg, msg_size, "ge2_cuda_smoke_axpy: n = %d, want > 0", n);
    CUDA_TRY(cudaSetDevice(0));
    CUDA_TRY(cudaMalloc((void **)&dx, bytes));
    CUDA_TRY(cudaMalloc((void **)&dy, bytes));
    CUDA_TRY(cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice));
    CUDA_TRY(cudaMemcpy(dy, y, bytes, cudaMemcpyHostToDevice));
    ge2_smoke_axpy_kernel<<<(n + 255) / 256, 256>>>(n, a, dx, dy);
    CUDA_TRY(cudaGetLastError());
    CUDA_TRY(cudaMemcpy(y, dy, bytes, cudaMemcpyDeviceToHost));
done:
    cudaFree(dx);
    cudaFree(dy);
    return rc;
}

extern "C" int ge2_cuda_smoke_sgemm(int m, int n, int k, const float *a, const float *b, float *c,
                                    char *msg, size_t msg_size)
{
    int rc = 0;
    float *da = NULL, *db = NULL, *dc = NULL;
    void *workspace = NULL;
    const size_t workspace_bytes = 4u << 20;
    cublasLtHandle_t lt = NULL;
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    const float alpha = 1.0f, beta = 0.0f;
    if (m <= 0 || n <= 0 || k <= 0)
        return fail(msg, msg_size, "ge2_cuda_smoke_sgemm: m, n, k = %d, %d, %d, want > 0", m,
                    n, k);

    CUDA_TRY(cudaSetDevice(0));
    CUDA_TRY(cudaMalloc((void **)&da, (size_t)m * k * sizeof(float)));
    CUDA_TRY(cudaMalloc((void **)&db, (size_t)k * n * sizeof(float)));
    CUDA_TRY(cudaMalloc((void **)&dc, (size_t)m * n * sizeof(float)));
    CUDA_TRY(cudaMalloc(&workspace, workspace_bytes));
    CUDA_TRY(cudaMemcpy(da, a, (size_t)m * k * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_TRY(cudaMemcpy(db, b, (size_t)k * n * sizeof(float), cudaMemcpyHostToDevice));

    // cuBLASLt is column-major. Row-major C[m,n] = A[m,k] B[k,n] is, read
    // column-major, C^T[n,m] = B^T[n,k] A^T[k,m]: pass b as the first operand.
    // CUBLAS_COMPUTE_32F: plain FP32, never TF32.
    LT_TRY(cublasLtCreate(&lt));
    LT_TRY(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    LT_TRY(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, n, k, n));
    LT_TRY(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, k, m, k));
    LT_TRY(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, n, m, n));
    LT_TRY(cublasLtMatmulPreferenceCreate(&pref));
    LT_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                &workspace_bytes, sizeof(workspace_bytes)));
    LT_TRY(cublasLtMatmulAlgoGetHeuristic(lt, op, lb, la, lc, lc, pref, 1, &heur, &found));
    if (found < 1) {
        rc = fail(msg, msg_size, "cublasLtMatmulAlgoGetHeuristic: no algorithm for %dx%dx%d",
                  m, n, k);
        goto done;
    }
    LT_TRY(cublasLtMatmul(lt, op, &alpha, db, lb, da, la, &beta, dc, lc, dc, lc, &heur.algo,
                          workspace, workspace_bytes, 0));
    CUDA_TRY(cudaGetLastError());
    CUDA_TRY(cudaMemcpy(c, dc, (size_t)m * n * sizeof(float), cudaMemcpyDeviceToHost));
done:
    if (pref)
        cublasLtMatmulPreferenceDestroy(pref);
    if (lc)
        cublasLtMatrixLayoutDestroy(lc);
    if (la)
        cublasLtMatrixLayoutDestroy(la);
    if (lb)
        cublasLtMatrixLayoutDestroy(lb);
    if (op)
        cublasLtMatmulDescDestroy(op);
    if (lt)
        cublasLtDestroy(lt);
    cudaFree(workspace);
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
    return rc;
}
