/* The attention family's test cases: random [heads..., T, D] instances,
 * causal or not, heads inside the positions or not, q, k, v packed in one
 * tensor or not, dropout on the weights or not (p 0.3, so both branches
 * occur and 1/(1-p') is no power of 2; the table runs train steps), with float64 references written from the definitions
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
    GE2_ATTRS(ge2_attention_attrs, a)->causal = ge2_case_coin(c);
    GE2_ATTRS(ge2_attention_attrs, a)->heads_inner = s.ndim >= 3 && ge2_case_coin(c);
    GE2_ATTRS(ge2_attention_attrs, a)->packed = GE2_ATTRS(ge2_attention_attrs, a)->heads_inner && ge2_case_coin(c);
    if (ge2_case_coin(c)) {
        GE2_ATTRS(ge2_attention_attrs, a)->dropout = 0.3;
        GE2_ATTRS(ge2_attention_attrs, a)->stream = (uint32_t)ge2_case_irange(c, 0, 1000);
    }
    return a;
}

/* qkv [..., T, 3H, D] for q [..., T, H, D] */
static ge2_shape packed_shape(ge2_shape q)
{
    q.dim[q.ndim - 2] *= 3;
    return q;
}

static ge2_status case_attention(ge2_case_ctx *c)
{
    ge2_shape s = random_qkv(c);
    ge2_attrs a = random_attrs(c, s);
    ge2_tensor *q, *k, *v, *y;
    if (GE2_ATTRS(ge2_attention_attrs, a)->packed) {
        GE2_TRY(ge2_case_operand(c, packed_shape(s), &q));
        GE2_TRY(ge2_attention_qkv(c->inst->graph, q, GE2_ATTRS(ge2_attention_attrs, a)->causal, &y));
    } else {
        GE2_TRY(ge2_case_operand(c, s, &q));
        GE2_TRY(ge2_case_operand(c, s, &k));
        GE2_TRY(ge2_case_operand(c, s, &v));
        GE2_TRY((GE2_ATTRS(ge2_attention_attrs, a)->heads_inner ? ge2_attention_bthd : ge2_attention)(c->inst->graph, q, k, v,
                                                                              GE2_ATTRS(ge2_attention_attrs, a)->causal, &y));
    }
    if (GE2_ATTRS(ge2_attention_attrs, a)->dropout > 0)
        GE2_TRY(ge2_attention_dropout(c->inst->graph, y, GE2_ATTRS(ge2_attention_attrs, a)->dropout));
    return ge2_case_last_node(c);
}

/* dy, q, k, v, y, lse (packed: dy, qkv, y, lse) */
static ge2_status case_attention_grad(ge2_case_ctx *c)
{
    ge2_shape s = random_qkv(c), ls = s;
    ls.ndim--;
    ge2_attrs a = random_attrs(c, s);
    const bool packed = GE2_ATTRS(ge2_attention_attrs, a)->packed;
    const int n = packed ? 4 : 6;
    ge2_tensor *ts[6];
    for (int i = 0; i < n - 1; i++)
        GE2_TRY(ge2_case_plain(c, packed && i == 1 ? packed_shape(s) : s, &ts[i]));
    GE2_TRY(ge2_case_plain(c, ls, &ts[n - 1]));
    return ge2_case_direct(c, GE2_OP_ATTENTION_GRAD, ts, n, packed ? 1 : 3, &a);
}

/* ------------------------------------------------- float64 references */

/* heads counts (batch, head) pairs: [B..., H, T, D], or heads_inner
 * [B..., T, H, D] with H heads per position, or packed [B..., T, 3H, D] */
typedef struct ref_geom {
    int64_t heads, t, d, per_position;
    double scale;
    bool causal, packed;
} ref_geom;

/* From y's shape (dy's) */
static ref_geom geom_of(const ge2_node *node, ge2_shape y)
{
    const bool inner = GE2_ATTRS(ge2_attention_attrs, node->attrs)->heads_inner;
    ref_geom g = {1, inner ? y.dim[y.ndim - 3] : y.dim[y.ndim - 2], y.dim[y.ndim - 1],
                  inner ? y.dim[y.ndim - 2] : 1, 0, GE2_ATTRS(ge2_attention_attrs, node->attrs)->causal, GE2_ATTRS(ge2_attention_attrs, node->attrs)->packed};
    for (int i = 0; i < y.ndim - 1; i++)
        if (i != (inner ? y.ndim - 3 : y.ndim - 2))
            g.heads *= y.dim[i];
    g.scale = GE2_ATTRS(ge2_attention_attrs, node->attrs)->scale != 0 ? GE2_ATTRS(ge2_attention_attrs, node->attrs)->scale : 1 / sqrt((double)g.d);
    return g;
}

/* The row (of D values; lse's index) of (batch, head) pair h at position t:
 * the row-major index of [B, H, T], or of [B, T, H] when heads are inner */
static int64_t rrow(const ref_geom *g, int64_t h, int64_t t)
{
    const int64_t b = h / g->per_position, head = h % g->per_position;
    return (b * g->t + t) * g->per_position + head;
}

/* Where q's (which 0), k's (1) or v's (2) row of pair h at position t
 * starts in x: tensor first + which of x, or packed, x[first] at index
 * [b, t, which·H + head, 0] of [B, T, 3H, D] */
static int64_t qkv_at(const ref_geom *g, int which, int64_t h, int64_t t)
{
    if (!g->packed)
        return rrow(g, h, t) * g->d;
    const int64_t b = h / g->per_position, head = h % g->per_position;
    return (((b * g->t + t) * 3 + which) * g->per_position + head) * g->d;
}

static double *qkv_row(const ref_geom *g, const ref_tensor *x, int first, int which, int64_t h, int64_t t)
{
    return x[g->packed ? first : first + which].v + qkv_at(g, which, h, t);
}

static double dot(const double *a, const double *b, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static bool sees(const ref_geom *g, int64_t t, int64_t j) { return !g->causal || j <= t; }

/* The dropout factor of pair h's weight (t, j): 1, or 0 or 1/(1-p') by
 * the 16-bit uniform u that ops/attention/attention.h assigns it: half
 * j mod 2 of word (j mod 8)/2 of Philox4x32-10 at counter (group, stream,
 * offset) with group (h·T + t)·ceil(T/8) + j/8, kept when u / 65536 >= p,
 * whose chance is 1 - p', p' = ceil(65536 p) / 65536 */
static double drop_factor(const ge2_node *node, const ref_geom *g, int64_t h, int64_t t, int64_t j)
{
    const double p = GE2_ATTRS(ge2_attention_attrs, node->attrs)->dropout;
    if (p == 0)
        return 1;
    const uint64_t seed = ge2_ref_rng_seed, offset = ge2_ref_rng_offset;
    const uint64_t group = (uint64_t)((h * g->t + t) * ((g->t + 7) / 8) + j / 8);
    ge2_philox4 counter = {{(uint32_t)group, (uint32_t)(group >> 32), GE2_ATTRS(ge2_attention_attrs, node->attrs)->stream,
                            (uint32_t)offset}};
    ge2_philox4 r = ge2_philox4x32_10(counter, (uint32_t)seed, (uint32_t)(seed >> 32) ^ (uint32_t)(offset >> 32));
    const uint32_t word = r.v[(j % 8) / 2], u = (j % 2 ? word >> 16 : word) & 0xffff;
    return u / 65536.0 >= p ? 1 / (1 - ceil(65536 * p) / 65536) : 0;
}

/* softmax over the keys query t sees, then the weighted sum of v */
static void ref_attention(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    const ref_geom g = geom_of(node, out[0].shape);
    for (int64_t h = 0; h < g.heads; h++)
        for (int64_t t = 0; t < g.t; t++) {
            const double *q = qkv_row(&g, in, 0, 0, h, t);
            double m = -INFINITY, z = 0;
            for (int64_t j = 0; j < g.t; j++)
                if (sees(&g, t, j))
                    m = fmax(m, g.scale * dot(q, qkv_row(&g, in, 0, 1, h, j), g.d));
            for (int64_t j = 0; j < g.t; j++)
                if (sees(&g, t, j))
                    z += exp(g.scale * dot(q, qkv_row(&g, in, 0, 1, h, j), g.d) - m);
            for (int64_t d = 0; d < g.d; d++) {
                double y = 0;
                for (int64_t j = 0; j < g.t; j++)
                    if (sees(&g, t, j))
                        y += exp(g.scale * dot(q, qkv_row(&g, in, 0, 1, h, j), g.d) - m) / z *
                             drop_factor(node, &g, h, t, j) * qkv_row(&g, in, 0, 2, h, j)[d];
                out[0].v[rrow(&g, h, t) * g.d + d] = y;
            }
            if (node->n_outputs > 1)
                out[1].v[rrow(&g, h, t)] = m + log(z);
        }
}

/* Inputs of the backward: dy, q, k, v (or qkv), then y and lse */
static int y_input(const ref_geom *g) { return g->packed ? 2 : 4; }

/* p_tj = exp(scale q_t·k_j - lse_t), ds_tj = p_tj (m_tj dy_t·v_j - dy_t·y_t);
 * *p is the weight y used, p_tj m_tj (m: the dropout factor) */
static void p_ds(const ge2_node *node, const ref_geom *g, const ref_tensor *in, int64_t h, int64_t t, int64_t j,
                 double *p, double *ds)
{
    const double *dy = in[0].v + rrow(g, h, t) * g->d, *q = qkv_row(g, in, 1, 0, h, t);
    const double *k = qkv_row(g, in, 1, 1, h, j), *v = qkv_row(g, in, 1, 2, h, j);
    const double *y = in[y_input(g)].v + rrow(g, h, t) * g->d;
    const double p0 = exp(g->scale * dot(q, k, g->d) - in[y_input(g) + 1].v[rrow(g, h, t)]);
    const double m = drop_factor(node, g, h, t, j);
    *p = p0 * m;
    *ds = p0 * (m * dot(dy, v, g->d) - dot(dy, y, g->d));
}

/* dq_t = scale Σ_j ds_tj k_j; dk_j = scale Σ_t ds_tj q_t, dv_j = Σ_t p_tj m_tj dy_t */
static void ref_attention_grad(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    const ref_geom g = geom_of(node, in[0].shape);
    for (int64_t h = 0; h < g.heads; h++)
        for (int64_t t = 0; t < g.t; t++)
            for (int64_t d = 0; d < g.d; d++) {
                double sq = 0, sk = 0, sv = 0, p, ds;
                for (int64_t j = 0; j < g.t; j++) {
                    if (sees(&g, t, j)) { /* t a query, j a key: dq_t */
                        p_ds(node, &g, in, h, t, j, &p, &ds);
                        sq += ds * qkv_row(&g, in, 1, 1, h, j)[d];
                    }
                    if (sees(&g, j, t)) { /* t a key, j a query: dk_t, dv_t */
                        p_ds(node, &g, in, h, j, t, &p, &ds);
                        sk += ds * qkv_row(&g, in, 1, 0, h, j)[d];
                        sv += p * in[0].v[rrow(&g, h, j) * g.d + d];
                    }
                }
                qkv_row(&g, out, 0, 0, h, t)[d] = g.scale * sq;
                qkv_row(&g, out, 0, 1, h, t)[d] = g.scale * sk;
                qkv_row(&g, out, 0, 2, h, t)[d] = sv;
            }
}

GE2_OP_TEST(attention, GE2_CASE_GRADIENT, case_attention, ref_attention)
GE2_OP_TEST(attention_grad, GE2_CASE_FORWARD, case_attention_grad, ref_attention_grad)
