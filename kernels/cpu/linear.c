/* LINEAR and MATMUL on the CPU: the GEMM through cblas, then LINEAR's
 * bias + activation epilogue in one pass over the output. */
#include <cblas.h>

#include "kernels/activation_math.h"
#include "kernels/cpu/cpu_util.h"

static void gemm_f32(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                     int64_t ldb, float *c)
{
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k,
                1.0f, a, (int)lda, b, (int)ldb, 0.0f, c, (int)n);
}

static void gemm_f64(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double *a, int64_t lda, const double *b,
                     int64_t ldb, double *c)
{
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k,
                1.0, a, (int)lda, b, (int)ldb, 0.0, c, (int)n);
}

/* in: x [B, in], w [out, in], b [out] (optional); out: y [B, out], z [B, out] (pre-activation, optional) */
#define LINEAR(T, SUF)                                                                                            \
    static ge2_status linear_##SUF(const ge2_launch *l)                                                         \
    {                                                                                                           \
        const T *x = l->in[0].data, *w = l->in[1].data, *b = l->n_in > 2 ? l->in[2].data : NULL;                \
        T *y = l->out[0].data, *z = l->n_out > 1 ? l->out[1].data : NULL;                                       \
        int64_t rows = l->in[0].shape.dim[0], k = l->in[0].shape.dim[1], n = l->in[1].shape.dim[0];            \
        T *acc = z ? z : y;                                                                                     \
        if (!acc)                                                                                               \
            return GE2_OK;                                                                                      \
        gemm_##SUF(false, true, rows, n, k, x, k, w, k, acc);                                                   \
        ge2_activation act = l->node->attrs.linear.act;                                                         \
        float slope = l->node->attrs.linear.slope;                                                              \
        for (int64_t r = 0; r < rows; r++)                                                                      \
            for (int64_t c = 0; c < n; c++) {                                                                   \
                T v = acc[r * n + c] + (b ? b[c] : (T)0);                                                       \
                if (z)                                                                                          \
                    z[r * n + c] = v;                                                                           \
                if (y)                                                                                          \
                    y[r * n + c] = ge2_act_##SUF(act, v, slope);                                                \
            }                                                                                                   \
        return GE2_OK;                                                                                          \
    }

/* in: a [M, K] or [N, M, K] (or its transpose), b [K, N2] or [N, K, N2] (or its transpose); out: y [M, N2] / [N, M, N2] */
#define MATMUL(T, SUF)                                                                                            \
    static ge2_status matmul_##SUF(const ge2_launch *l)                                                         \
    {                                                                                                           \
        const T *a = l->in[0].data, *b = l->in[1].data;                                                         \
        T *y = l->out[0].data;                                                                                  \
        if (!y)                                                                                                 \
            return GE2_OK;                                                                                      \
        bool ta = l->node->attrs.matmul.trans_a, tb = l->node->attrs.matmul.trans_b;                            \
        ge2_shape sa = l->in[0].shape, sb = l->in[1].shape;                                                     \
        int nd = sa.ndim;                                                                                       \
        int64_t batch = nd == 3 ? sa.dim[0] : 1;                                                                \
        int64_t m = sa.dim[nd - 2 + ta], k = sa.dim[nd - 1 - ta], n = sb.dim[nd - 1 - tb];                      \
        for (int64_t i = 0; i < batch; i++)                                                                     \
            gemm_##SUF(ta, tb, m, n, k, a + i * m * k, sa.dim[nd - 1], b + i * k * n, sb.dim[nd - 1],           \
                       y + i * m * n);                                                                          \
        return GE2_OK;                                                                                          \
    }

GE2_CPU_DEFINE_BOTH(LINEAR)
GE2_CPU_DEFINE_BOTH(MATMUL)

ge2_status ge2_cpu_linear(const ge2_launch *l) { return GE2_CPU_DISPATCH(linear, l, l->in[0].dtype); }
ge2_status ge2_cpu_matmul(const ge2_launch *l) { return GE2_CPU_DISPATCH(matmul, l, l->in[0].dtype); }
