/* CONV2D and its backward ops on the CPU: im2col (or col2im) per sample and
 * group, then one cblas GEMM each, so every multiply-add is in cblas. Under
 * precision BF16 (FP16) the GEMMs multiply rounded operands and each op
 * rounds its convolution (y before the bias, dx, dw) to bf16 (fp16), as
 * the CUDA side's cuDNN engines of that type write them.
 *
 * The column matrix of sample n, group g is [Cg·KH·KW, OH·OW]: row
 * (c·KH + i)·KW + j holds x[n, g·Cg + c] at the input point under kernel tap
 * (i, j) of every output position, or 0 in the padding. */
#include <string.h>

#include "graph/alloc.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/gemm.h"
#include "ops/conv/conv.h"

/* x: [Cg, H, W] of one sample and group -> col [Cg·KH·KW, OH·OW] */
#define IM2COL(T, SUF)                                                                                            \
    static void im2col_##SUF(const ge2_conv2d_geom *g, const T *x, T *col)                                      \
    {                                                                                                           \
        for (int64_t c = 0; c < g->cg; c++)                                                                     \
            for (int64_t i = 0; i < g->kh; i++)                                                                 \
                for (int64_t j = 0; j < g->kw; j++) {                                                           \
                    T *row = col + ((c * g->kh + i) * g->kw + j) * g->oh * g->ow;                               \
                    for (int64_t oy = 0; oy < g->oh; oy++) {                                                    \
                        int64_t iy = oy * g->sh - g->ph + i * g->dh;                                            \
                        for (int64_t ox = 0; ox < g->ow; ox++) {                                                \
                            int64_t ix = ox * g->sw - g->pw + j * g->dw;                                        \
                            bool in = iy >= 0 && iy < g->h && ix >= 0 && ix < g->w;                             \
                            row[oy * g->ow + ox] = in ? x[(c * g->h + iy) * g->w + ix] : (T)0;                  \
                        }                                                                                       \
                    }                                                                                           \
                }                                                                                               \
    }

/* col [Cg·KH·KW, OH·OW] summed back into dx: [Cg, H, W] of one sample and group */
#define COL2IM(T, SUF)                                                                                            \
    static void col2im_##SUF(const ge2_conv2d_geom *g, const T *col, T *dx)                                     \
    {                                                                                                           \
        for (int64_t c = 0; c < g->cg; c++)                                                                     \
            for (int64_t i = 0; i < g->kh; i++)                                                                 \
                for (int64_t j = 0; j < g->kw; j++) {                                                           \
                    const T *row = col + ((c * g->kh + i) * g->kw + j) * g->oh * g->ow;                         \
                    for (int64_t oy = 0; oy < g->oh; oy++) {                                                    \
                        int64_t iy = oy * g->sh - g->ph + i * g->dh;                                            \
                        if (iy < 0 || iy >= g->h)                                                               \
                            continue;                                                                           \
                        for (int64_t ox = 0; ox < g->ow; ox++) {                                                \
                            int64_t ix = ox * g->sw - g->pw + j * g->dw;                                        \
                            if (ix >= 0 && ix < g->w)                                                           \
                                dx[(c * g->h + iy) * g->w + ix] += row[oy * g->ow + ox];                        \
                        }                                                                                       \
                    }                                                                                           \
                }                                                                                               \
    }

/* in: x [N, C, H, W], w [O, Cg, KH, KW], b [O] (optional); out: y [N, O, OH, OW]
 * y[n, group g] [Og, OH·OW] = w_g [Og, Cg·KH·KW] · col */
#define CONV2D(T, SUF)                                                                                            \
    static ge2_status conv2d_##SUF(const ge2_launch *l, T *col)                                                 \
    {                                                                                                           \
        const T *x = l->in[0].data, *w = l->in[1].data, *b = l->n_in > 2 ? l->in[2].data : NULL;                \
        T *y = l->out[0].data;                                                                                  \
        ge2_conv2d_geom g = ge2_conv2d_geom_of(GE2_ATTRS(ge2_conv2d_attrs, l->node->attrs), l->in[0].shape, l->in[1].shape);         \
        int64_t k = g.cg * g.kh * g.kw, pix = g.oh * g.ow;                                                      \
        for (int64_t n = 0; n < g.n; n++)                                                                       \
            for (int64_t gr = 0; gr < g.groups; gr++) {                                                         \
                im2col_##SUF(&g, x + (n * g.c + gr * g.cg) * g.h * g.w, col);                                   \
                T *yg = y + (n * g.o + gr * g.og) * pix;                                                        \
                GE2_TRY(ge2_cpu_gemm_launch_##SUF(l, false, false, g.og, pix, k, 1,                             \
                        w + gr * g.og * k, k, col, pix, 0, yg, pix));                                           \
                if (l->bf16_operands || l->f16_operands)                                                        \
                    ge2_cpu_half_round_##SUF(l, yg, g.og * pix);                                                   \
                for (int64_t o = 0; b && o < g.og; o++)                                                         \
                    for (int64_t p = 0; p < pix; p++)                                                           \
                        yg[o * pix + p] += b[gr * g.og + o];                                                    \
            }                                                                                                   \
        return GE2_OK;                                                                                          \
    }

/* in: dy [N, O, OH, OW], x (shape), w [O, Cg, KH, KW]; out: dx [N, C, H, W]
 * col = w_gᵀ [Cg·KH·KW, Og] · dy[n, group g], summed back by col2im */
#define CONV2D_GRAD_INPUT(T, SUF)                                                                                 \
    static ge2_status conv2d_grad_input_##SUF(const ge2_launch *l, T *col)                                      \
    {                                                                                                           \
        const T *dy = l->in[0].data, *w = l->in[2].data;                                                        \
        T *dx = l->out[0].data;                                                                                 \
        ge2_conv2d_geom g = ge2_conv2d_geom_of(GE2_ATTRS(ge2_conv2d_attrs, l->node->attrs), l->in[1].shape, l->in[2].shape);         \
        int64_t k = g.cg * g.kh * g.kw, pix = g.oh * g.ow;                                                      \
        memset(dx, 0, sizeof(T) * (size_t)(g.n * g.c * g.h * g.w));                                             \
        for (int64_t n = 0; n < g.n; n++)                                                                       \
            for (int64_t gr = 0; gr < g.groups; gr++) {                                                         \
                const T *dyg = dy + (n * g.o + gr * g.og) * pix;                                                \
                GE2_TRY(ge2_cpu_gemm_launch_##SUF(l, true, false, k, pix, g.og, 1,                              \
                        w + gr * g.og * k, k, dyg, pix, 0, col, pix));                                          \
                col2im_##SUF(&g, col, dx + (n * g.c + gr * g.cg) * g.h * g.w);                                  \
            }                                                                                                   \
        if (l->bf16_operands || l->f16_operands)                                                                \
            ge2_cpu_half_round_##SUF(l, dx, g.n * g.c * g.h * g.w);                                                \
        return GE2_OK;                                                                                          \
    }

/* in: dy [N, O, OH, OW], w (shape), x [N, C, H, W]; out: dw [O, Cg, KH, KW], db [O] (optional)
 * dw_g [Og, Cg·KH·KW] += dy[n, group g] [Og, OH·OW] · colᵀ over the samples */
#define CONV2D_GRAD_WEIGHT(T, SUF)                                                                                \
    static ge2_status conv2d_grad_weight_##SUF(const ge2_launch *l, T *col)                                     \
    {                                                                                                           \
        const T *dy = l->in[0].data, *x = l->in[2].data;                                                        \
        T *dw = l->out[0].data, *db = l->n_out > 1 ? l->out[1].data : NULL;                                     \
        ge2_conv2d_geom g = ge2_conv2d_geom_of(GE2_ATTRS(ge2_conv2d_attrs, l->node->attrs), l->in[2].shape, l->in[1].shape);         \
        int64_t k = g.cg * g.kh * g.kw, pix = g.oh * g.ow;                                                      \
        if (dw) {                                                                                               \
            memset(dw, 0, sizeof(T) * (size_t)(g.o * k));                                                       \
            for (int64_t n = 0; n < g.n; n++)                                                                   \
                for (int64_t gr = 0; gr < g.groups; gr++) {                                                     \
                    im2col_##SUF(&g, x + (n * g.c + gr * g.cg) * g.h * g.w, col);                               \
                    const T *dyg = dy + (n * g.o + gr * g.og) * pix;                                            \
                    GE2_TRY(ge2_cpu_gemm_launch_##SUF(l, false, true, g.og, k, pix, 1,                          \
                            dyg, pix, col, pix, 1, dw + gr * g.og * k, k));                                     \
                }                                                                                               \
            if (l->bf16_operands || l->f16_operands)                                                            \
                ge2_cpu_half_round_##SUF(l, dw, g.o * k);                                                          \
        }                                                                                                       \
        for (int64_t o = 0; db && o < g.o; o++) {                                                               \
            double s = 0;                                                                                       \
            for (int64_t n = 0; n < g.n; n++)                                                                   \
                for (int64_t p = 0; p < pix; p++)                                                               \
                    s += dy[(n * g.o + o) * pix + p];                                                           \
            db[o] = (T)s;                                                                                       \
        }                                                                                                       \
        return GE2_OK;                                                                                          \
    }

GE2_CPU_DEFINE_BOTH(IM2COL)
GE2_CPU_DEFINE_BOTH(COL2IM)
GE2_CPU_DEFINE_BOTH(CONV2D)
GE2_CPU_DEFINE_BOTH(CONV2D_GRAD_INPUT)
GE2_CPU_DEFINE_BOTH(CONV2D_GRAD_WEIGHT)

/* Runs fn with a column buffer for one sample and group of the launch's
 * geometry (x and w at the given inputs): host scratch, as the CPU backend
 * is never captured. */
static ge2_status with_columns(const ge2_launch *l, int x_in, int w_in, ge2_status (*f32)(const ge2_launch *, float *),
                               ge2_status (*f64)(const ge2_launch *, double *))
{
    ge2_dtype dt = l->in[0].dtype;
    if (dt != GE2_F32 && dt != GE2_F64)
        return ge2_cpu_bad_dtype(l, dt);
    ge2_conv2d_geom g = ge2_conv2d_geom_of(GE2_ATTRS(ge2_conv2d_attrs, l->node->attrs), l->in[x_in].shape, l->in[w_in].shape);
    size_t elems = (size_t)(g.cg * g.kh * g.kw * g.oh * g.ow);
    void *col = ge2_malloc(ge2_dtype_size(dt) * (elems ? elems : 1));
    if (!col)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_%s: %zu column elements", ge2_op_name(l->node->op), elems);
    ge2_status st = dt == GE2_F64 ? f64(l, col) : f32(l, col);
    ge2_free(col);
    return st;
}

ge2_status ge2_cpu_conv2d(const ge2_launch *l)
{
    return l->out[0].data ? with_columns(l, 0, 1, conv2d_f32, conv2d_f64) : GE2_OK;
}

ge2_status ge2_cpu_conv2d_grad_input(const ge2_launch *l)
{
    return l->out[0].data ? with_columns(l, 1, 2, conv2d_grad_input_f32, conv2d_grad_input_f64) : GE2_OK;
}

ge2_status ge2_cpu_conv2d_grad_weight(const ge2_launch *l)
{
    return with_columns(l, 2, 1, conv2d_grad_weight_f32, conv2d_grad_weight_f64);
}
