/* The convolution family's test cases: for each op a random valid instance
 * (its case body) and its float64 forward reference, registered for the
 * table-driven suites (tests/support/op_cases.h). The references loop over
 * every (output position, kernel tap) pair straight from the definition. */
#include <string.h>

#include "graph/error.h"
#include "ops/conv/conv.h"
#include "tests/support/op_cases.h"

/* ---------------------------------------------------------- case bodies */

/* A random geometry: groups, strides, padding and dilation, sizes small
 * enough for float64 finite differences, and a window that fits. */
static void random_geometry(ge2_case_ctx *c, ge2_attrs *a, ge2_shape *x, ge2_shape *w)
{
    memset(a, 0, sizeof *a);
    int groups = (int)ge2_case_irange(c, 1, 2);
    int64_t n = ge2_case_irange(c, 1, 2), cg = ge2_case_irange(c, 1, 3), og = ge2_case_irange(c, 1, 3);
    int64_t kh = ge2_case_irange(c, 1, 3), kw = ge2_case_irange(c, 1, 3);
    GE2_ATTRS(ge2_conv2d_attrs, *a)->groups = groups;
    for (int i = 0; i < 2; i++) {
        GE2_ATTRS(ge2_conv2d_attrs, *a)->stride[i] = (int)ge2_case_irange(c, 1, 2);
        GE2_ATTRS(ge2_conv2d_attrs, *a)->padding[i] = (int)ge2_case_irange(c, 0, 1);
        GE2_ATTRS(ge2_conv2d_attrs, *a)->dilation[i] = (int)ge2_case_irange(c, 1, 2);
    }
    /* at least the dilated window, so the output has a row and a column */
    int64_t h = GE2_ATTRS(ge2_conv2d_attrs, *a)->dilation[0] * (kh - 1) + 1 + ge2_case_irange(c, 0, 3);
    int64_t wd = GE2_ATTRS(ge2_conv2d_attrs, *a)->dilation[1] * (kw - 1) + 1 + ge2_case_irange(c, 0, 3);
    *x = ge2_shape4(n, groups * cg, h, wd);
    *w = ge2_shape4(groups * og, cg, kh, kw);
}

static ge2_status case_conv2d(ge2_case_ctx *c)
{
    ge2_attrs a;
    ge2_shape xs, ws;
    random_geometry(c, &a, &xs, &ws);
    ge2_tensor *x, *w, *b = NULL, *y;
    GE2_TRY(ge2_case_operand(c, ws, &w));
    GE2_TRY(ge2_case_operand(c, xs, &x));
    if (ge2_case_coin(c))
        GE2_TRY(ge2_case_operand(c, ge2_shape1(ws.dim[0]), &b));
    ge2_conv2d_params p = ge2_conv2d_defaults();
    memcpy(p.stride, GE2_ATTRS(ge2_conv2d_attrs, a)->stride, sizeof p.stride);
    memcpy(p.padding, GE2_ATTRS(ge2_conv2d_attrs, a)->padding, sizeof p.padding);
    memcpy(p.dilation, GE2_ATTRS(ge2_conv2d_attrs, a)->dilation, sizeof p.dilation);
    p.groups = GE2_ATTRS(ge2_conv2d_attrs, a)->groups;
    GE2_TRY(ge2_conv2d(c->inst->graph, x, w, b, &p, &y));
    return ge2_case_last_node(c);
}

static ge2_shape y_shape(const ge2_attrs *a, ge2_shape x, ge2_shape w)
{
    ge2_conv2d_geom g = ge2_conv2d_geom_of(GE2_ATTRS(ge2_conv2d_attrs, *a), x, w);
    return ge2_shape4(g.n, g.o, g.oh, g.ow);
}

/* dy, x (shape), w -> dx */
static ge2_status case_conv2d_grad_input(ge2_case_ctx *c)
{
    ge2_attrs a;
    ge2_shape xs, ws;
    random_geometry(c, &a, &xs, &ws);
    ge2_tensor *ts[3];
    GE2_TRY(ge2_case_plain(c, y_shape(&a, xs, ws), &ts[0]));
    GE2_TRY(ge2_case_plain(c, xs, &ts[1]));
    GE2_TRY(ge2_case_plain(c, ws, &ts[2]));
    return ge2_case_direct(c, GE2_OP_CONV2D_GRAD_INPUT, ts, 3, 1, &a);
}

/* dy, w (shape), x -> dw[, db] */
static ge2_status case_conv2d_grad_weight(ge2_case_ctx *c)
{
    ge2_attrs a;
    ge2_shape xs, ws;
    random_geometry(c, &a, &xs, &ws);
    ge2_tensor *ts[3];
    GE2_TRY(ge2_case_plain(c, y_shape(&a, xs, ws), &ts[0]));
    GE2_TRY(ge2_case_plain(c, ws, &ts[1]));
    GE2_TRY(ge2_case_plain(c, xs, &ts[2]));
    return ge2_case_direct(c, GE2_OP_CONV2D_GRAD_WEIGHT, ts, 3, ge2_case_coin(c) ? 2 : 1, &a);
}

/* ------------------------------------------------- float64 references */

/* Calls visit(n, o, oy, ox, c, i, j, x offset, w offset, y offset) for every
 * output position and every kernel tap that lands inside x. */
typedef struct ref_conv {
    int64_t N, C, H, W, O, Cg, KH, KW, OH, OW, G;
    int sh, sw, ph, pw, dh, dw;
} ref_conv;

static ref_conv ref_conv_of(const ge2_node *node, ge2_shape x, ge2_shape w)
{
    const ge2_conv2d_attrs *a = GE2_ATTRS(ge2_conv2d_attrs, node->attrs);
    ref_conv r = {x.dim[0], x.dim[1], x.dim[2], x.dim[3], w.dim[0], w.dim[1], w.dim[2], w.dim[3], 0, 0,
                  a->groups, a->stride[0], a->stride[1], a->padding[0], a->padding[1], a->dilation[0], a->dilation[1]};
    r.OH = (r.H + 2 * r.ph - r.dh * (r.KH - 1) - 1) / r.sh + 1;
    r.OW = (r.W + 2 * r.pw - r.dw * (r.KW - 1) - 1) / r.sw + 1;
    return r;
}

#define REF_CONV_FOR_EACH(r, BODY)                                                                                \
    for (int64_t n = 0; n < (r).N; n++)                                                                           \
        for (int64_t o = 0; o < (r).O; o++)                                                                       \
            for (int64_t oy = 0; oy < (r).OH; oy++)                                                               \
                for (int64_t ox = 0; ox < (r).OW; ox++)                                                           \
                    for (int64_t cl = 0; cl < (r).Cg; cl++)                                                       \
                        for (int64_t i = 0; i < (r).KH; i++)                                                      \
                            for (int64_t j = 0; j < (r).KW; j++) {                                                \
                                int64_t c = o / ((r).O / (r).G) * (r).Cg + cl;                                    \
                                int64_t iy = oy * (r).sh - (r).ph + i * (r).dh;                                   \
                                int64_t ix = ox * (r).sw - (r).pw + j * (r).dw;                                   \
                                if (iy < 0 || iy >= (r).H || ix < 0 || ix >= (r).W)                               \
                                    continue;                                                                     \
                                int64_t xo = ((n * (r).C + c) * (r).H + iy) * (r).W + ix;                          \
                                int64_t wo = ((o * (r).Cg + cl) * (r).KH + i) * (r).KW + j;                        \
                                int64_t yo = ((n * (r).O + o) * (r).OH + oy) * (r).OW + ox;                        \
                                BODY;                                                                             \
                            }

static void ref_conv2d(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    ref_conv r = ref_conv_of(node, in[0].shape, in[1].shape);
    int64_t ny = ge2_ref_numel(out[0].shape);
    for (int64_t k = 0; k < ny; k++)
        out[0].v[k] = node->n_inputs > 2 ? in[2].v[(k / (r.OH * r.OW)) % r.O] : 0.0;
    REF_CONV_FOR_EACH(r, out[0].v[yo] += in[0].v[xo] * in[1].v[wo])
}

static void ref_conv2d_grad_input(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    ref_conv r = ref_conv_of(node, in[1].shape, in[2].shape);
    memset(out[0].v, 0, sizeof(double) * (size_t)ge2_ref_numel(out[0].shape));
    REF_CONV_FOR_EACH(r, out[0].v[xo] += in[0].v[yo] * in[2].v[wo])
}

static void ref_conv2d_grad_weight(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    ref_conv r = ref_conv_of(node, in[2].shape, in[1].shape);
    memset(out[0].v, 0, sizeof(double) * (size_t)ge2_ref_numel(out[0].shape));
    REF_CONV_FOR_EACH(r, out[0].v[wo] += in[0].v[yo] * in[2].v[xo])
    if (node->n_outputs > 1) {
        memset(out[1].v, 0, sizeof(double) * (size_t)r.O);
        for (int64_t k = 0; k < ge2_ref_numel(in[0].shape); k++)
            out[1].v[(k / (r.OH * r.OW)) % r.O] += in[0].v[k];
    }
}

/* --------------------------------------------------------- registration */

GE2_OP_TEST(conv2d, GE2_CASE_GRADIENT, case_conv2d, ref_conv2d)
GE2_OP_TEST(conv2d_grad_input, GE2_CASE_FORWARD, case_conv2d_grad_input, ref_conv2d_grad_input)
GE2_OP_TEST(conv2d_grad_weight, GE2_CASE_FORWARD, case_conv2d_grad_weight, ref_conv2d_grad_weight)
