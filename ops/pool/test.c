/* The pooling family's test cases: for each op a random valid instance (its
 * case body) and its float64 forward reference, registered for the
 * table-driven suites (tests/support/op_cases.h). */
#include <math.h>
#include <string.h>

#include "graph/error.h"
#include "ops/pool/pool.h"
#include "tests/support/op_cases.h"

/* ---------------------------------------------------------- case bodies */

/* Window, stride and padding (at most half the window) per axis, and an
 * input the window fits. */
static void random_geometry(ge2_case_ctx *c, ge2_attrs *a, ge2_shape *x)
{
    memset(a, 0, sizeof *a);
    int64_t hw[2];
    for (int i = 0; i < 2; i++) {
        GE2_ATTRS(ge2_pool2d_attrs, *a)->kernel[i] = (int)ge2_case_irange(c, 1, 3);
        GE2_ATTRS(ge2_pool2d_attrs, *a)->stride[i] = (int)ge2_case_irange(c, 1, 3);
        GE2_ATTRS(ge2_pool2d_attrs, *a)->padding[i] = (int)ge2_case_irange(c, 0, GE2_ATTRS(ge2_pool2d_attrs, *a)->kernel[i] / 2);
        hw[i] = GE2_ATTRS(ge2_pool2d_attrs, *a)->kernel[i] + ge2_case_irange(c, 0, 4);
    }
    *x = ge2_shape4(ge2_case_irange(c, 1, 2), ge2_case_irange(c, 1, 3), hw[0], hw[1]);
}

static ge2_status case_pool(ge2_case_ctx *c, bool max)
{
    ge2_attrs a;
    ge2_shape xs;
    random_geometry(c, &a, &xs);
    ge2_pool2d_params p;
    memcpy(p.kernel, GE2_ATTRS(ge2_pool2d_attrs, a)->kernel, sizeof p.kernel);
    memcpy(p.stride, GE2_ATTRS(ge2_pool2d_attrs, a)->stride, sizeof p.stride);
    memcpy(p.padding, GE2_ATTRS(ge2_pool2d_attrs, a)->padding, sizeof p.padding);
    ge2_tensor *x, *y;
    GE2_TRY(ge2_case_operand(c, xs, &x));
    GE2_TRY(max ? ge2_max_pool2d(c->inst->graph, x, &p, &y) : ge2_avg_pool2d(c->inst->graph, x, &p, &y));
    return ge2_case_last_node(c);
}

static ge2_status case_max_pool2d(ge2_case_ctx *c) { return case_pool(c, true); }
static ge2_status case_avg_pool2d(ge2_case_ctx *c) { return case_pool(c, false); }

static ge2_status case_pool_backward(ge2_case_ctx *c, ge2_op op)
{
    ge2_attrs a;
    ge2_shape xs;
    random_geometry(c, &a, &xs);
    ge2_pool2d_geom g = ge2_pool2d_geom_of(GE2_ATTRS(ge2_pool2d_attrs, a), xs);
    ge2_tensor *ts[2];
    GE2_TRY(ge2_case_plain(c, ge2_shape4(g.n, g.c, g.oh, g.ow), &ts[0]));
    GE2_TRY(ge2_case_plain(c, xs, &ts[1]));
    return ge2_case_direct(c, op, ts, 2, 1, &a);
}

static ge2_status case_max_pool2d_backward(ge2_case_ctx *c) { return case_pool_backward(c, GE2_OP_MAX_POOL2D_BACKWARD); }
static ge2_status case_avg_pool2d_backward(ge2_case_ctx *c) { return case_pool_backward(c, GE2_OP_AVG_POOL2D_BACKWARD); }

/* ------------------------------------------------- float64 references */

/* For every output (plane p, oy, ox): the input offsets of its window that
 * lie inside x, in row-major order, and the window's area. */
typedef struct ref_pool {
    int64_t P, H, W, OH, OW, kh, kw, sh, sw, ph, pw;
} ref_pool;

static ref_pool ref_pool_of(const ge2_node *node, ge2_shape x)
{
    const ge2_pool2d_attrs *a = GE2_ATTRS(ge2_pool2d_attrs, node->attrs);
    ref_pool r = {x.dim[0] * x.dim[1], x.dim[2], x.dim[3], 0, 0, a->kernel[0], a->kernel[1],
                  a->stride[0], a->stride[1], a->padding[0], a->padding[1]};
    r.OH = (r.H + 2 * r.ph - r.kh) / r.sh + 1;
    r.OW = (r.W + 2 * r.pw - r.kw) / r.sw + 1;
    return r;
}

/* The input offsets window (p, oy, ox) covers: returns how many, in idx. */
static int ref_window(const ref_pool *r, int64_t p, int64_t oy, int64_t ox, int64_t *idx)
{
    int n = 0;
    for (int64_t i = 0; i < r->kh; i++)
        for (int64_t j = 0; j < r->kw; j++) {
            int64_t iy = oy * r->sh - r->ph + i, ix = ox * r->sw - r->pw + j;
            if (iy >= 0 && iy < r->H && ix >= 0 && ix < r->W)
                idx[n++] = (p * r->H + iy) * r->W + ix;
        }
    return n;
}

/* the first of the window's largest values */
static int64_t ref_argmax(const double *x, const int64_t *idx, int n)
{
    int64_t best = idx[0];
    for (int k = 1; k < n; k++)
        if (x[idx[k]] > x[best])
            best = idx[k];
    return best;
}

static void ref_pool2d(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    ref_pool r = ref_pool_of(node, in[0].shape);
    int64_t idx[64];
    for (int64_t p = 0; p < r.P; p++)
        for (int64_t oy = 0; oy < r.OH; oy++)
            for (int64_t ox = 0; ox < r.OW; ox++) {
                int n = ref_window(&r, p, oy, ox, idx);
                double v = 0;
                if (node->op == GE2_OP_MAX_POOL2D)
                    v = in[0].v[ref_argmax(in[0].v, idx, n)];
                else {
                    for (int k = 0; k < n; k++)
                        v += in[0].v[idx[k]];
                    v /= (double)(r.kh * r.kw);
                }
                out[0].v[(p * r.OH + oy) * r.OW + ox] = v;
            }
}

static void ref_pool2d_backward(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    ref_pool r = ref_pool_of(node, in[1].shape);
    int64_t idx[64];
    memset(out[0].v, 0, sizeof(double) * (size_t)ge2_ref_numel(out[0].shape));
    for (int64_t p = 0; p < r.P; p++)
        for (int64_t oy = 0; oy < r.OH; oy++)
            for (int64_t ox = 0; ox < r.OW; ox++) {
                double d = in[0].v[(p * r.OH + oy) * r.OW + ox];
                int n = ref_window(&r, p, oy, ox, idx);
                if (node->op == GE2_OP_MAX_POOL2D_BACKWARD)
                    out[0].v[ref_argmax(in[1].v, idx, n)] += d;
                else
                    for (int k = 0; k < n; k++)
                        out[0].v[idx[k]] += d / (double)(r.kh * r.kw);
            }
}

/* --------------------------------------------------------- registration */

GE2_OP_TEST(max_pool2d, GE2_CASE_GRADIENT, case_max_pool2d, ref_pool2d)
GE2_OP_TEST(avg_pool2d, GE2_CASE_GRADIENT, case_avg_pool2d, ref_pool2d)
GE2_OP_TEST(max_pool2d_backward, GE2_CASE_FORWARD, case_max_pool2d_backward, ref_pool2d_backward)
GE2_OP_TEST(avg_pool2d_backward, GE2_CASE_FORWARD, case_avg_pool2d_backward, ref_pool2d_backward)
