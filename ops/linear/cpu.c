/* The GEMM family on the CPU: the GEMM through cblas, then the epilogue in
 * one pass over the output (LINEAR: bias + activation + stash; the backward
 * GEMMs: activation derivative and bias gradient). With bf16 precision the
 * GEMM's operands are rounded copies (made per launch: the CPU backend is
 * the reference, not the fast path); the epilogue stays in the kernel's
 * type. */
#include <string.h>

#include "kernels/activation_math.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/gemm.h"
#include "ops/linear/linear.h"

/* c [m, n] = op(a) · op(b), c dense; a and b rounded to bf16 first when the
 * launch's precision says so (ge2.h, ge2_precision) */
#define GEMM(T, SUF)                                                                                              \
    static ge2_status gemm_##SUF(const ge2_launch *l, bool ta, bool tb, int64_t m, int64_t n, int64_t k,        \
                                 const T *a, int64_t lda, const T *b, int64_t ldb, T *c)                        \
    {                                                                                                           \
        return ge2_cpu_gemm_launch_##SUF(l, ta, tb, m, n, k, 1, a, lda, b, ldb, 0, c, n);                      \
    }
GE2_CPU_DEFINE_BOTH(GEMM)

/* in: x [B, in], w [out, in], b [out] (optional); out: y [B, out], stash (optional): z [B, out] or
 * the relu bit-mask [B, ge2_relu_mask_row_bytes(out)] (kernels/relu_mask.h) */
#define LINEAR(T, SUF)                                                                                            \
    static ge2_status linear_##SUF(const ge2_launch *l)                                                         \
    {                                                                                                           \
        const T *x = l->in[0].data, *w = l->in[1].data, *b = l->n_in > 2 ? l->in[2].data : NULL;                \
        T *y = l->out[0].data;                                                                                  \
        void *stash = l->n_out > 1 ? l->out[1].data : NULL;                                                     \
        bool mask = stash && l->out[1].dtype == GE2_U8;                                                         \
        T *z = mask ? NULL : stash;                                                                             \
        int64_t rows = l->in[0].shape.dim[0], k = l->in[0].shape.dim[1], n = l->in[1].shape.dim[0];            \
        int64_t mask_row = ge2_relu_mask_row_bytes(n);                                                          \
        T *acc = z ? z : y;                                                                                     \
        if (!acc)                                                                                               \
            return GE2_OK;                                                                                      \
        GE2_TRY(gemm_##SUF(l, false, true, rows, n, k, x, k, w, k, acc));                                       \
        if (mask)                                                                                               \
            memset(stash, 0, (size_t)(rows * mask_row));                                                       \
        ge2_activation act = GE2_ATTRS(ge2_linear_attrs, l->node->attrs)->act;                                                         \
        float slope = GE2_ATTRS(ge2_linear_attrs, l->node->attrs)->slope;                                                              \
        for (int64_t r = 0; r < rows; r++)                                                                      \
            for (int64_t c = 0; c < n; c++) {                                                                   \
                T v = acc[r * n + c] + (b ? b[c] : (T)0);                                                       \
                if (z)                                                                                          \
                    z[r * n + c] = v;                                                                           \
                if (mask && v > (T)0)                                                                           \
                    ((uint8_t *)stash)[r * mask_row + (c >> 3)] |= (uint8_t)(1u << (c & 7));                    \
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
        bool ta = GE2_ATTRS(ge2_matmul_attrs, l->node->attrs)->trans_a, tb = GE2_ATTRS(ge2_matmul_attrs, l->node->attrs)->trans_b;                            \
        ge2_shape sa = l->in[0].shape, sb = l->in[1].shape;                                                     \
        int nd = sa.ndim;                                                                                       \
        int64_t batch = nd == 3 ? sa.dim[0] : 1;                                                                \
        int64_t m = sa.dim[nd - 2 + ta], k = sa.dim[nd - 1 - ta], n = sb.dim[nd - 1 - tb];                      \
        for (int64_t i = 0; i < batch; i++)                                                                     \
            GE2_TRY(gemm_##SUF(l, ta, tb, m, n, k, a + i * m * k, sa.dim[nd - 1], b + i * k * n,              \
                               sb.dim[nd - 1], y + i * m * n));                                                 \
        return GE2_OK;                                                                                          \
    }

/* db [n] = column sums of g [rows, n]; NULL db: not wanted */
#define COLUMN_SUMS(T, SUF)                                                                                       \
    static void column_sums_##SUF(const T *g, int64_t rows, int64_t n, T *db)                                   \
    {                                                                                                           \
        if (!db)                                                                                                \
            return;                                                                                             \
        for (int64_t c = 0; c < n; c++)                                                                         \
            db[c] = 0;                                                                                          \
        for (int64_t r = 0; r < rows; r++)                                                                      \
            for (int64_t c = 0; c < n; c++)                                                                     \
                db[c] += g[r * n + c];                                                                          \
    }

/* in: dz [B, out], w [out, in], saved (optional): z or y [B, in], or the relu bit-mask [B, mask_row(in)];
 * out: dx [B, in] = (dz · w) ⊙ act'(saved), db [in] (optional) = column sums of dx, act(z) [B, in]
 * (made again: output `again`, the last). With act(z), dz · w goes into its tensor first and
 * each element of z is read before dx's is written: dx may be z's memory
 * (ops.c, grad_input_over_z). */
#define LINEAR_GRAD_INPUT(T, SUF)                                                                                 \
    static ge2_status linear_grad_input_##SUF(const ge2_launch *l, int again_at)                                \
    {                                                                                                           \
        const T *dz = l->in[0].data, *w = l->in[1].data;                                                        \
        const void *saved = l->n_in > 2 ? l->in[2].data : NULL;                                                 \
        bool mask = saved && l->in[2].dtype == GE2_U8;                                                          \
        const int db_at = ge2_linear_grad_input_db(l->n_out, again_at);                                         \
        T *dx = l->out[0].data, *db = db_at >= 0 ? l->out[db_at].data : NULL;                                   \
        T *again = again_at >= 0 ? l->out[again_at].data : NULL;                                                \
        int64_t rows = l->in[0].shape.dim[0], k = l->in[0].shape.dim[1], n = l->in[1].shape.dim[1];            \
        int64_t mask_row = ge2_relu_mask_row_bytes(n);                                                          \
        const ge2_act_attrs *a = GE2_ATTRS(ge2_act_attrs, l->node->attrs);                                                           \
        if (again && dx) {                                                                                      \
            GE2_TRY(gemm_##SUF(l, false, false, rows, n, k, dz, k, w, n, again));                               \
            for (int64_t i = 0; i < rows * n; i++) {                                                            \
                const T d = again[i], z = ((const T *)saved)[i];                                                \
                again[i] = ge2_act_##SUF(a->act, z, a->slope);                                                  \
                dx[i] = d * ge2_act_grad_##SUF(a->act, z, a->from_output, a->slope);                            \
            }                                                                                                   \
            column_sums_##SUF(dx, rows, n, db);                                                                 \
            return GE2_OK;                                                                                      \
        }                                                                                                       \
        for (int64_t i = 0; again && i < rows * n; i++)                                                         \
            again[i] = ge2_act_##SUF(a->act, ((const T *)saved)[i], a->slope);                                  \
        if (!dx)                                                                                                \
            return GE2_OK;                                                                                      \
        GE2_TRY(gemm_##SUF(l, false, false, rows, n, k, dz, k, w, n, dx));                                      \
        for (int64_t r = 0; saved && r < rows; r++)                                                             \
            for (int64_t c = 0; c < n; c++)                                                                     \
                dx[r * n + c] *= mask ? (T)ge2_relu_mask_bit((const uint8_t *)saved + r * mask_row, c)         \
                                      : ge2_act_grad_##SUF(a->act, ((const T *)saved)[r * n + c],              \
                                                           a->from_output, a->slope);                           \
        column_sums_##SUF(dx, rows, n, db);                                                                     \
        return GE2_OK;                                                                                          \
    }

/* in: dz [B, out], x [B, in]; out: dw [out, in] = dzᵀ · x, db [out] (optional) = column sums of dz */
#define LINEAR_GRAD_WEIGHT(T, SUF)                                                                                \
    static ge2_status linear_grad_weight_##SUF(const ge2_launch *l)                                             \
    {                                                                                                           \
        const T *dz = l->in[0].data, *x = l->in[1].data;                                                        \
        T *dw = l->out[0].data, *db = l->n_out > 1 ? l->out[1].data : NULL;                                     \
        int64_t rows = l->in[0].shape.dim[0], m = l->in[0].shape.dim[1], n = l->in[1].shape.dim[1];            \
        if (dw)                                                                                                 \
            GE2_TRY(gemm_##SUF(l, true, false, m, n, rows, dz, m, x, n, dw));                                   \
        column_sums_##SUF(dz, rows, m, db);                                                                     \
        return GE2_OK;                                                                                          \
    }

GE2_CPU_DEFINE_BOTH(LINEAR)
GE2_CPU_DEFINE_BOTH(MATMUL)
GE2_CPU_DEFINE_BOTH(COLUMN_SUMS)
GE2_CPU_DEFINE_BOTH(LINEAR_GRAD_INPUT)
GE2_CPU_DEFINE_BOTH(LINEAR_GRAD_WEIGHT)

/* (bf16 operand tensors arrive widened: ge2_op_run_cpu) */
ge2_status ge2_cpu_linear(const ge2_launch *l) { return GE2_CPU_DISPATCH(linear, l, l->in[0].dtype); }
ge2_status ge2_cpu_matmul(const ge2_launch *l) { return GE2_CPU_DISPATCH(matmul, l, l->in[0].dtype); }
ge2_status ge2_cpu_linear_grad_input_with(const ge2_launch *l, int again)
{
    const ge2_dtype dtype = l->in[0].dtype;
    return dtype == GE2_F64   ? linear_grad_input_f64(l, again)
           : dtype == GE2_F32 ? linear_grad_input_f32(l, again)
                              : ge2_cpu_bad_dtype(l, dtype);
}
ge2_status ge2_cpu_linear_grad_input(const ge2_launch *l) { return ge2_cpu_linear_grad_input_with(l, -1); }
ge2_status ge2_cpu_linear_grad_weight(const ge2_launch *l) { return GE2_CPU_DISPATCH(linear_grad_weight, l, l->in[0].dtype); }
