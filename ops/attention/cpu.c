/* ATTENTION and its backward ops on the CPU: plain loops, sums in double,
 * one output row at a time in index order (attention.h has the math). */
#include <math.h>
#include <stdlib.h>

#include "graph/alloc.h"
#include "kernels/cpu/cpu_util.h"
#include "ops/attention/attention.h"

/* The dropout factor m_tj of head hd's weight (t, j): 1 without dropout,
 * else 0 or the scale (attention.h) */
static double drop_factor(const ge2_attn_dropout *d, int64_t hd, int64_t t, int64_t j, int64_t T)
{
    if (d->threshold == 0)
        return 1.0;
    const ge2_philox4 r = ge2_attn_drop_draw(d->control->rng_seed, d->control->rng_offset, d->stream, hd, t, j, T);
    return ge2_attn_drop_keeps(r, j, d->threshold) ? ge2_attn_drop_scale(d->threshold) : 0.0;
}

/* Keys query t sees: 0..t when causal, else all; queries key j is seen by: j..T-1, or all. */
static int64_t last_key(bool causal, int64_t t, int64_t T) { return causal ? t : T - 1; }
static int64_t first_query(bool causal, int64_t j) { return causal ? j : 0; }

#define DOT(a, b, n)                                                                                            \
    ({                                                                                                          \
        double s_ = 0;                                                                                          \
        for (int64_t d_ = 0; d_ < (n); d_++)                                                                    \
            s_ += (double)(a)[d_] * (double)(b)[d_];                                                            \
        s_;                                                                                                     \
    })

/* in: q, k, v (heads × T rows of D, ge2_attn_row; or qkv); out: y likewise, lse a value per row */
#define ATTENTION(T_, SUF)                                                                                      \
    static ge2_status attention_##SUF(const ge2_launch *l)                                                      \
    {                                                                                                           \
        const ge2_attn_geom g = ge2_attn_geom_of(l->in[0].shape, GE2_ATTRS(ge2_attention_attrs, l->node->attrs));                    \
        const ge2_attn_slots o = ge2_attn_slots_of(l->node, g);                                                 \
        const T_ *q = l->in[o.q].data, *k = (const T_ *)l->in[o.k].data + o.k_at;                               \
        const T_ *v = (const T_ *)l->in[o.v].data + o.v_at;                                                     \
        T_ *y = l->out[0].data, *lse = l->n_out > 1 ? l->out[1].data : NULL;                                    \
        const bool causal = GE2_ATTRS(ge2_attention_attrs, l->node->attrs)->causal;                                                    \
        const double scale = ge2_attn_scale(GE2_ATTRS(ge2_attention_attrs, l->node->attrs), g.d);                                    \
        const ge2_attn_dropout drop = ge2_attn_dropout_of(l);                                                   \
        double *s = ge2_malloc(sizeof(double) * (size_t)g.t), *acc = ge2_malloc(sizeof(double) * (size_t)g.d);  \
        if (!s || !acc) {                                                                                       \
            ge2_free(s);                                                                                        \
            ge2_free(acc);                                                                                      \
            return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_attention: %lld scores", (long long)g.t);              \
        }                                                                                                       \
        for (int64_t hd = 0; hd < g.heads; hd++)                                                                \
            for (int64_t t = 0; t < g.t; t++) {                                                                 \
                const int64_t row = ge2_attn_row(g, hd, t), last = last_key(causal, t, g.t);                    \
                double m = -INFINITY, sum = 0;                                                                  \
                for (int64_t j = 0; j <= last; j++) {                                                           \
                    s[j] = scale * DOT(q + ge2_attn_qkv_at(g, row), k + ge2_attn_qkv_at(g, ge2_attn_row(g, hd, j)), \
                                       g.d);                                                                    \
                    m = s[j] > m ? s[j] : m;                                                                    \
                }                                                                                               \
                for (int64_t j = 0; j <= last; j++)                                                             \
                    sum += exp(s[j] - m);                                                                       \
                const double z = m + log(sum);                                                                  \
                for (int64_t d = 0; d < g.d; d++)                                                               \
                    acc[d] = 0;                                                                                 \
                for (int64_t j = 0; j <= last; j++) {                                                           \
                    const double p = exp(s[j] - z) * drop_factor(&drop, hd, t, j, g.t);                         \
                    for (int64_t d = 0; d < g.d; d++)                                                           \
                        acc[d] += p * v[ge2_attn_qkv_at(g, ge2_attn_row(g, hd, j)) + d];                        \
                }                                                                                               \
                for (int64_t d = 0; y && d < g.d; d++)                                                          \
                    y[row * g.d + d] = (T_)acc[d];                                                              \
                if (lse)                                                                                        \
                    lse[row] = (T_)z;                                                                           \
            }                                                                                                   \
        ge2_free(s);                                                                                            \
        ge2_free(acc);                                                                                          \
        return GE2_OK;                                                                                          \
    }

/* p (times its dropout factor: the weight y used) and ds of head hd's query
 * t (its row) and key j (the key's row) */
#define P_DS(p, ds, hd, t, j, row, key)                                                                         \
    const double p0_ = exp(scale * DOT(q + ge2_attn_qkv_at(g, row), k + ge2_attn_qkv_at(g, key), g.d) - lse[row]); \
    const double m_ = drop_factor(&drop, hd, t, j, g.t), p = p0_ * m_;                                          \
    const double ds = p0_ * (m_ * DOT(dy + (row) * g.d, v + ge2_attn_qkv_at(g, key), g.d) - delta[row])

/* in: dy, q, k, v (or qkv), y (rows), lse; out: dq (each row's sum over
 * keys in key order), dk and dv (each key's sums over queries in query
 * order), or dqkv; an output whose data is NULL is skipped. delta_t =
 * dy_t·y_t once per row. */
#define ATTENTION_GRAD(T_, SUF)                                                                                 \
    static ge2_status attention_grad_##SUF(const ge2_launch *l)                                                 \
    {                                                                                                           \
        const ge2_attn_geom g = ge2_attn_geom_of(l->in[1].shape, GE2_ATTRS(ge2_attention_attrs, l->node->attrs));                    \
        const ge2_attn_slots o = ge2_attn_slots_of(l->node, g);                                                 \
        const T_ *dy = l->in[o.dy].data, *q = l->in[o.q].data, *k = (const T_ *)l->in[o.k].data + o.k_at;       \
        const T_ *v = (const T_ *)l->in[o.v].data + o.v_at, *y = l->in[o.y].data, *lse = l->in[o.lse].data;     \
        T_ *dq = l->out[o.dq].data, *dk = NULL, *dv = NULL;                                                     \
        if (l->out[o.dk].data)                                                                                  \
            dk = (T_ *)l->out[o.dk].data + o.k_at;                                                              \
        if (l->out[o.dv].data)                                                                                  \
            dv = (T_ *)l->out[o.dv].data + o.v_at;                                                              \
        const bool causal = GE2_ATTRS(ge2_attention_attrs, l->node->attrs)->causal;                                                    \
        const double scale = ge2_attn_scale(GE2_ATTRS(ge2_attention_attrs, l->node->attrs), g.d);                                    \
        const ge2_attn_dropout drop = ge2_attn_dropout_of(l);                                                   \
        const int64_t rows = g.heads * g.t;                                                                     \
        double *acc = ge2_malloc(sizeof(double) * (size_t)(2 * g.d + rows)), *sv = acc + g.d, *delta = sv + g.d; \
        if (!acc)                                                                                               \
            return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_attention_grad: %lld rows of %lld values",             \
                             (long long)rows, (long long)g.d);                                                  \
        for (int64_t row = 0; row < rows; row++)                                                                \
            delta[row] = DOT(dy + row * g.d, y + row * g.d, g.d);                                               \
        for (int64_t hd = 0; dq && hd < g.heads; hd++)                                                          \
            for (int64_t t = 0; t < g.t; t++) {                                                                 \
                const int64_t row = ge2_attn_row(g, hd, t);                                                     \
                for (int64_t d = 0; d < g.d; d++)                                                               \
                    acc[d] = 0;                                                                                 \
                for (int64_t j = 0; j <= last_key(causal, t, g.t); j++) {                                       \
                    const int64_t key = ge2_attn_row(g, hd, j);                                                 \
                    P_DS(p, ds, hd, t, j, row, key);                                                            \
                    (void)p;                                                                                    \
                    for (int64_t d = 0; d < g.d; d++)                                                           \
                        acc[d] += ds * k[ge2_attn_qkv_at(g, key) + d];                                          \
                }                                                                                               \
                for (int64_t d = 0; d < g.d; d++)                                                               \
                    dq[ge2_attn_qkv_at(g, row) + d] = (T_)(scale * acc[d]);                                     \
            }                                                                                                   \
        for (int64_t hd = 0; (dk || dv) && hd < g.heads; hd++)                                                  \
            for (int64_t j = 0; j < g.t; j++) {                                                                 \
                const int64_t key = ge2_attn_row(g, hd, j);                                                     \
                for (int64_t d = 0; d < g.d; d++)                                                               \
                    acc[d] = sv[d] = 0;                                                                         \
                for (int64_t t = first_query(causal, j); t < g.t; t++) {                                        \
                    const int64_t row = ge2_attn_row(g, hd, t);                                                 \
                    P_DS(p, ds, hd, t, j, row, key);                                                            \
                    for (int64_t d = 0; d < g.d; d++) {                                                         \
                        sv[d] += p * dy[row * g.d + d];                                                         \
                        acc[d] += ds * q[ge2_attn_qkv_at(g, row) + d];                                          \
                    }                                                                                           \
                }                                                                                               \
                for (int64_t d = 0; d < g.d; d++) {                                                             \
                    if (dk)                                                                                     \
                        dk[ge2_attn_qkv_at(g, key) + d] = (T_)(scale * acc[d]);                                 \
                    if (dv)                                                                                     \
                        dv[ge2_attn_qkv_at(g, key) + d] = (T_)sv[d];                                            \
                }                                                                                               \
            }                                                                                                   \
        ge2_free(acc);                                                                                          \
        return GE2_OK;                                                                                          \
    }

GE2_CPU_DEFINE_BOTH(ATTENTION)
GE2_CPU_DEFINE_BOTH(ATTENTION_GRAD)

/* A train step's dropout draws from the control block's seed and offset */
static ge2_status require_control(const ge2_launch *l)
{
    if (ge2_attn_dropout_of(l).threshold && !l->control)
        return ge2_error(GE2_ERR_STATE, "ge2_%s (node %d): a train step with dropout without the control block",
                         ge2_op_name(l->node->op), l->node->id);
    return GE2_OK;
}

ge2_status ge2_cpu_attention(const ge2_launch *l)
{
    GE2_TRY(require_control(l));
    return GE2_CPU_DISPATCH(attention, l, l->in[0].dtype);
}

ge2_status ge2_cpu_attention_grad(const ge2_launch *l)
{
    GE2_TRY(require_control(l));
    return GE2_CPU_DISPATCH(attention_grad, l, l->in[1].dtype);
}
