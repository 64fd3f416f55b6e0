/* MAX_POOL2D and AVG_POOL2D on the CPU, and their backward ops. The
 * backward walks the windows in the forward's order and adds each output's
 * gradient to its input point(s): one thread, one order. */
#include <string.h>

#include "kernels/cpu/cpu_util.h"
#include "ops/pool/pool.h"

/* Window (oy, ox) of one [H, W] plane: for max pooling the offset of its
 * first maximum (NaN counts as the maximum, as in PyTorch), else -1 and
 * *sum the sum of its real elements. */
#define WINDOW(T, SUF)                                                                                            \
    static int64_t window_##SUF(const ge2_pool2d_geom *g, const T *plane, int64_t oy, int64_t ox, bool max,    \
                                double *sum)                                                                    \
    {                                                                                                           \
        int64_t best = -1;                                                                                      \
        double s = 0;                                                                                           \
        for (int64_t i = 0; i < g->kh; i++) {                                                                   \
            int64_t iy = oy * g->sh - g->ph + i;                                                                \
            if (iy < 0 || iy >= g->h)                                                                           \
                continue;                                                                                       \
            for (int64_t j = 0; j < g->kw; j++) {                                                               \
                int64_t ix = ox * g->sw - g->pw + j, at = iy * g->w + ix;                                       \
                if (ix < 0 || ix >= g->w)                                                                       \
                    continue;                                                                                   \
                T v = plane[at];                                                                                \
                if (max && (best < 0 || (plane[best] == plane[best] && (v > plane[best] || v != v))))           \
                    best = at;                                                                                  \
                s += (double)v;                                                                                 \
            }                                                                                                   \
        }                                                                                                       \
        *sum = s;                                                                                               \
        return max ? best : -1;                                                                                 \
    }

/* in: x [N, C, H, W]; out: y [N, C, OH, OW] */
#define POOL2D(T, SUF)                                                                                            \
    static ge2_status pool2d_##SUF(const ge2_launch *l)                                                         \
    {                                                                                                           \
        const T *x = l->in[0].data;                                                                             \
        T *y = l->out[0].data;                                                                                  \
        ge2_pool2d_geom g = ge2_pool2d_geom_of(GE2_ATTRS(ge2_pool2d_attrs, l->node->attrs), l->in[0].shape);                         \
        bool max = l->node->op == GE2_OP_MAX_POOL2D;                                                            \
        double area = (double)(g.kh * g.kw);                                                                    \
        for (int64_t p = 0; y && p < g.n * g.c; p++) {                                                          \
            const T *plane = x + p * g.h * g.w;                                                                 \
            for (int64_t oy = 0; oy < g.oh; oy++)                                                               \
                for (int64_t ox = 0; ox < g.ow; ox++) {                                                         \
                    double sum;                                                                                 \
                    int64_t at = window_##SUF(&g, plane, oy, ox, max, &sum);                                    \
                    y[(p * g.oh + oy) * g.ow + ox] = max ? plane[at] : (T)(sum / area);                         \
                }                                                                                               \
        }                                                                                                       \
        return GE2_OK;                                                                                          \
    }

/* in: dy [N, C, OH, OW], x [N, C, H, W] (read by max pooling only); out: dx [N, C, H, W] */
#define POOL2D_BACKWARD(T, SUF)                                                                                   \
    static ge2_status pool2d_backward_##SUF(const ge2_launch *l)                                                \
    {                                                                                                           \
        const T *dy = l->in[0].data, *x = l->in[1].data;                                                        \
        T *dx = l->out[0].data;                                                                                 \
        ge2_pool2d_geom g = ge2_pool2d_geom_of(GE2_ATTRS(ge2_pool2d_attrs, l->node->attrs), l->in[1].shape);                         \
        bool max = l->node->op == GE2_OP_MAX_POOL2D_BACKWARD;                                                   \
        T inv_area = (T)1 / (T)(g.kh * g.kw);                                                                   \
        if (!dx)                                                                                                \
            return GE2_OK;                                                                                      \
        memset(dx, 0, sizeof(T) * (size_t)(g.n * g.c * g.h * g.w));                                             \
        for (int64_t p = 0; p < g.n * g.c; p++) {                                                               \
            T *dplane = dx + p * g.h * g.w;                                                                     \
            for (int64_t oy = 0; oy < g.oh; oy++)                                                               \
                for (int64_t ox = 0; ox < g.ow; ox++) {                                                         \
                    T d = dy[(p * g.oh + oy) * g.ow + ox];                                                      \
                    if (max) {                                                                                  \
                        double sum;                                                                             \
                        dplane[window_##SUF(&g, x + p * g.h * g.w, oy, ox, true, &sum)] += d;                   \
                        continue;                                                                               \
                    }                                                                                           \
                    for (int64_t i = 0; i < g.kh; i++)                                                          \
                        for (int64_t j = 0; j < g.kw; j++) {                                                    \
                            int64_t iy = oy * g.sh - g.ph + i, ix = ox * g.sw - g.pw + j;                       \
                            if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w)                                     \
                                dplane[iy * g.w + ix] += d * inv_area;                                          \
                        }                                                                                       \
                }                                                                                               \
        }                                                                                                       \
        return GE2_OK;                                                                                          \
    }

GE2_CPU_DEFINE_BOTH(WINDOW)
GE2_CPU_DEFINE_BOTH(POOL2D)
GE2_CPU_DEFINE_BOTH(POOL2D_BACKWARD)

ge2_status ge2_cpu_pool2d(const ge2_launch *l) { return GE2_CPU_DISPATCH(pool2d, l, l->in[0].dtype); }
ge2_status ge2_cpu_pool2d_backward(const ge2_launch *l)
{
    return GE2_CPU_DISPATCH(pool2d_backward, l, l->in[0].dtype);
}
