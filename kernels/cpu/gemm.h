/* The CPU backend's GEMMs: cblas, row-major, with alpha, beta and every
 * leading dimension explicit, in f32 and f64 (the dtype-suffixed names the
 * kernels' GE2_CPU_DEFINE_BOTH macros expand to). */
#ifndef GE2_KERNELS_CPU_GEMM_H
#define GE2_KERNELS_CPU_GEMM_H

#include <cblas.h>
#include <stdbool.h>
#include <stdint.h>

#include "graph/alloc.h"
#include "graph/bf16.h"

/* c [m, n] = alpha · op(a) [m, k] · op(b) [k, n] + beta · c */
static inline void ge2_cpu_gemm_f32(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                                    int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc)
{
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k,
                alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
}

static inline void ge2_cpu_gemm_f64(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double *a,
                                    int64_t lda, const double *b, int64_t ldb, double beta, double *c, int64_t ldc)
{
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k,
                alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
}

/* The same product with a and b rounded to bf16 first when bf16_operands
 * (ge2_compile_options.precision BF16: a bf16 GEMM's operands, fp32 sums),
 * through rounded copies of their dense rows (rows x ld elements; the CPU
 * backend is the reference, not the fast path). false: no host memory for
 * the copies, nothing computed. */
#define GE2_CPU_GEMM_ROUNDED(T, SUF)                                                                              \
    static inline T *ge2_cpu_bf16_copy_##SUF(const T *src, int64_t count)                                       \
    {                                                                                                           \
        T *copy = ge2_malloc(sizeof(T) * (size_t)(count > 0 ? count : 1));                                      \
        for (int64_t i = 0; copy && i < count; i++)                                                            \
            copy[i] = (T)ge2_f32_from_bf16(ge2_bf16_from_f32((float)src[i]));                                   \
        return copy;                                                                                            \
    }                                                                                                           \
    static inline bool ge2_cpu_gemm_rounded_##SUF(bool bf16_operands, bool ta, bool tb, int64_t m, int64_t n,   \
                                                  int64_t k, T alpha, const T *a, int64_t lda, const T *b,      \
                                                  int64_t ldb, T beta, T *c, int64_t ldc)                       \
    {                                                                                                           \
        if (!bf16_operands) {                                                                                   \
            ge2_cpu_gemm_##SUF(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);                           \
            return true;                                                                                        \
        }                                                                                                       \
        T *ra = ge2_cpu_bf16_copy_##SUF(a, (ta ? k : m) * lda), *rb = ge2_cpu_bf16_copy_##SUF(b, (tb ? n : k) * ldb); \
        if (ra && rb)                                                                                           \
            ge2_cpu_gemm_##SUF(ta, tb, m, n, k, alpha, ra, lda, rb, ldb, beta, c, ldc);                         \
        const bool ok = ra && rb;                                                                               \
        ge2_free(ra);                                                                                           \
        ge2_free(rb);                                                                                           \
        return ok;                                                                                              \
    }
GE2_CPU_GEMM_ROUNDED(float, f32)
GE2_CPU_GEMM_ROUNDED(double, f64)
#undef GE2_CPU_GEMM_ROUNDED

#endif /* GE2_KERNELS_CPU_GEMM_H */
