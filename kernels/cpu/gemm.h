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
#include "graph/f16.h"
#include "graph/error.h"
#include "graph/ir.h"

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

/* x rounded to launch l's 16-bit operand type: bf16 (l->bf16_operands) or
 * fp16 (l->f16_operands), and widened back */
static inline double ge2_cpu_half_value(const ge2_launch *l, double x)
{
    return l->f16_operands ? (double)ge2_f32_from_f16(ge2_f16_from_f32((float)x))
                           : (double)ge2_f32_from_bf16(ge2_bf16_from_f32((float)x));
}

/* The same product for launch l: with l->bf16_operands or l->f16_operands
 * (precision BF16 or FP16: 16-bit operands, fp32 sums) a and b are rounded
 * first, through rounded copies of their dense rows (rows x ld elements;
 * the CPU backend is the reference, not the fast path). GE2_ERR_OUT_OF_MEMORY,
 * nothing computed, when the copies find no host memory. */
#define GE2_CPU_GEMM_LAUNCH(T, SUF)                                                                               \
    static inline T *ge2_cpu_half_copy_##SUF(const ge2_launch *l, const T *src, int64_t count)                  \
    {                                                                                                           \
        T *copy = ge2_malloc(sizeof(T) * (size_t)(count > 0 ? count : 1));                                      \
        for (int64_t i = 0; copy && i < count; i++)                                                            \
            copy[i] = (T)ge2_cpu_half_value(l, (double)src[i]);                                                 \
        return copy;                                                                                            \
    }                                                                                                           \
    /* x rounded to the launch's 16-bit type where it is (a bf16 or fp16 engine's output, widened) */           \
    static inline void ge2_cpu_half_round_##SUF(const ge2_launch *l, T *x, int64_t count)                       \
    {                                                                                                           \
        for (int64_t i = 0; i < count; i++)                                                                     \
            x[i] = (T)ge2_cpu_half_value(l, (double)x[i]);                                                      \
    }                                                                                                           \
    static inline ge2_status ge2_cpu_gemm_launch_##SUF(const ge2_launch *l, bool ta, bool tb, int64_t m,        \
                                                       int64_t n, int64_t k, T alpha, const T *a, int64_t lda,  \
                                                       const T *b, int64_t ldb, T beta, T *c, int64_t ldc)      \
    {                                                                                                           \
        if (!l->bf16_operands && !l->f16_operands) {                                                            \
            ge2_cpu_gemm_##SUF(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);                           \
            return GE2_OK;                                                                                      \
        }                                                                                                       \
        T *ra = ge2_cpu_half_copy_##SUF(l, a, (ta ? k : m) * lda);                                              \
        T *rb = ge2_cpu_half_copy_##SUF(l, b, (tb ? n : k) * ldb);                                              \
        if (ra && rb)                                                                                           \
            ge2_cpu_gemm_##SUF(ta, tb, m, n, k, alpha, ra, lda, rb, ldb, beta, c, ldc);                         \
        const bool ok = ra && rb;                                                                               \
        ge2_free(ra);                                                                                           \
        ge2_free(rb);                                                                                           \
        return ok ? GE2_OK                                                                                      \
                  : ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_%s (node %d): no host memory for 16-bit operands",    \
                              ge2_op_name(l->node->op), l->node->id);                                           \
    }
GE2_CPU_GEMM_LAUNCH(float, f32)
GE2_CPU_GEMM_LAUNCH(double, f64)
#undef GE2_CPU_GEMM_LAUNCH

#endif /* GE2_KERNELS_CPU_GEMM_H */
