/* The CPU backend's GEMMs: cblas, row-major, with alpha, beta and every
 * leading dimension explicit, in f32 and f64 (the dtype-suffixed names the
 * kernels' GE2_CPU_DEFINE_BOTH macros expand to). */
#ifndef GE2_KERNELS_CPU_GEMM_H
#define GE2_KERNELS_CPU_GEMM_H

#include <cblas.h>
#include <stdbool.h>
#include <stdint.h>

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

#endif /* GE2_KERNELS_CPU_GEMM_H */
