/* The attention family's test cases: random [heads..., T, D] instances,
 * causal or not, with float64 references written from the definitions
 * (attention.h) as plain loops. The gradient case checks the backward op
 * against central differences; its own case checks it on inputs that need
 * not come from a forward (y and lse random), against the formulas. */
#include <math.h>
#include <string.h>

#include "graph/error.h"
#include "ops/attention/attention.h"
#include "tests/support/op_cases.h"

/* [T, D] with up to two leading dims; with 3 or more dims the heads may be
 * inside the positions ([..., T, H, D]) */
static ge2_shape random_qkv(ge2_case_ctx *c)
{
    ge2_shape s = ge2_case_random_shape(c, 2, 4);
    s.dim[s.ndim - 2] = ge2_case_irange(c, 1, 4);
    s.dim[s.ndim - 1] = ge2_case_irange(c, 1, 4);
    return s;
}

static ge2_attrs random_attrs(ge2_case_ctx *c, ge2_shape s)
{
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    a.attention.causal = ge2_case_coin(c);
    a.attention.heads_inner = s.ndim >= 3 && ge2_case_coin(c);
    return a;
}

static ge2_status case_attention(ge2_case_ctx *c)
{
    ge2_shape s = random_qkv(c);
    ge2_attrs a = random_attrs(c, s);
    ge2_tensor *q, *k, *v, *y;
    GE2_TRY(ge2_case_operand(c, s, &q));
    GE2_TRY(ge2_case_operand(c, s, &k));
    GE2_TRY(ge2_case_operand(c, s, &v));
    GE2_TRY((a.attention.heads_inner ? ge2_attention_bthd : ge2_attention)(c->inst->graph, q, k, v,
                                                                          a.attention.causal, &y));
    return ge2_case_last_node(c);
}

static ge2_status case_grad(ge2_case_ctx *c, ge2_op op, int n_out)
{
    ge2_shape s = random_qkv(c), ls = s;
    ls.ndim--;
    ge2_attrs a = random_attrs(c, s);
    ge2_tensor *ts[6];
    for (int i = 0; i < 5; i++)
        GE2_TRY(ge2_case_plain(c, s, &ts[i]));
    GE2_TRY(ge2_case_plain(c, ls, &ts[5]));
    return ge2_case_direct(c, op, ts, 6, n_out, &a);
}

static ge2_status case_attention_grad(ge2_case_ctx *c) { return case_grad(c, GE2_OP_ATTENTION_GRAD, 3); }

/* ------------------------------------------------- float64 references */

/* heads counts (batch, head) pairs: [B..., H, T, D], or heads_inner
 * [B..., T, H, D] with H heads per position */
typedef struct ref_geom {
    int64_t heads, t, d, per_position;
    double scale;
    bool causal;
} ref_geom;

static ref_geom geom_of(const ge2_node *node, ge2_shape q)
{
    const bool inner = node->attrs.attention.heads_inner;
    ref_geom g = {1, inner ? q.dim[q.ndim - 3] : q.dim[q.ndim - 2], q.dim[q.ndim - 1],
                  inner ? q.dim[q.ndim - 2] : 1, 0, node->attrs.attention.causal};
    for (int i = 0; i < q.ndim - 1; i++)
        if (i != (inner ? q.ndim - 3 : q.ndim - 2))
            g.heads *= q.dim[i];
    g.scale = node->attrs.attention.scale != 0 ? node->attrs.attention.scale : 1 / sqrt((double)g.d);
    return g;
}

/* The row (of D values; lse's index) of (batch, head) pair h at position t:
 * the row-major index of [B, H, T], or of [B, T, H] when heads are inner */
static int64_t rrow(const ref_geom *g, int64_t h, int64_t t)
{
    const int64_t b = h / g->per_position, head = h % g->per_position;
    return (b * g->t + t) * g->per_position + head;
}

static double dot(const double *a, const double *b, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static bool sees(const ref_geom *g, int64_t t, int64_t j) { return !g->causal || j <= t; }

/* softmax over the keys query t sees, then the weighted sum of v */
static void ref_attention(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    const ref_geom g = geom_of(node, in[0].shape);
    for (int64_t h = 0; h < g.heads; h++)
        for (int64_t t = 0; t < g.t; t++) {
            const double *q = in[0].v + rrow(&g, h, t) * g.d;
            double m = -INFINITY, z = 0;
            for (int64_t j = 0; j < g.t; j++)
                if (sees(&g, t, j))
                    m = fmax(m, g.scale * dot(q, in[1].v + rrow(&g, h, j) * g.d, g.d));
            for (int64_t j = 0; j < g.t; j++)
                if (sees(&g, t, j))
                    z += exp(g.scale * dot(q, in[1].v + rrow(&g, h, j) * g.d, g.d) - m);
            for (int64_t d = 0; d < g.d; d++) {
                double y = 0;
                for (int64_t j = 0; j < g.t; j++)
                    if (sees(&g, t, j))
                        y += exp(g.scale * dot(q, in[1].v + rrow(&g, h, j) * g.d, g.d) - m) / z *
                             in[2].v[rrow(&g, h, j) * g.d + d];
                out[0].v[rrow(&g, h, t) * g.d + d] = y;
            }
            if (node->n_outputs > 1)
                out[1].v[rrow(&g, h, t)] = m + log(z);
        }
}

/* p_tj = exp(scale q_t·k_j - lse_t), ds_tj = p_tj (dy_t·v_j - dy_t·y_t) */
static void p_ds(const ref_geom *g, const ref_tensor *in, int64_t h, int64_t t, int64_t j, double *p, double *ds)
{
    const double *dy = in[0].v + rrow(g, h, t) * g->d, *q = in[1].v + rrow(g, h, t) * g->d;
    const double *k = in[2].v + rrow(g, h, j) * g->d, *v = in[3].v + rrow(g, h, j) * g->d;
    *p = exp(g->scale * dot(q, k, g->d) - in[5].v[rrow(g, h, t)]);
    *ds = *p * (dot(dy, v, g->d) - dot(dy, in[4].v + rrow(g, h, t) * g->d, g->d));
}

/* dq_t = scale Σ_j ds_tj k_j; dk_j = scale Σ_t ds_tj q_t, dv_j = Σ_t p_tj dy_t */
static void ref_attention_grad(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    const ref_geom g = geom_of(node, in[1].shape);
    for (int64_t h = 0; h < g.heads; h++)
        for (int64_t t = 0; t < g.t; t++)
            for (int64_t d = 0; d < g.d; d++) {
                double sq = 0, sk = 0, sv = 0, p, ds;
                for (int64_t j = 0; j < g.t; j++) {
                    if (sees(&g, t, j)) { /* t a query, j a key: dq_t */
                        p_ds(&g, in, h, t, j, &p, &ds);
                        sq += ds * in[2].v[rrow(&g, h, j) * g.d + d];
                    }
                    if (sees(&g, j, t)) { /* t a key, j a query: dk_t, dv_t */
                        p_ds(&g, in, h, j, t, &p, &ds);
                        sk += ds * in[1].v[rrow(&g, h, j) * g.d + d];
                        sv += p * in[0].v[rrow(&g, h, j) * g.d + d];
                    }
                }
                out[0].v[rrow(&g, h, t) * g.d + d] = g.scale * sq;
                out[1].v[rrow(&g, h, t) * g.d + d] = g.scale * sk;
                out[2].v[rrow(&g, h, t) * g.d + d] = sv;
            }
}

GE2_OP_TEST(attention, GE2_CASE_GRADIENT, case_attention, ref_attention)
GE2_OP_TEST(attention_grad, GE2_CASE_FORWARD, case_attention_grad, ref_attention_grad)
