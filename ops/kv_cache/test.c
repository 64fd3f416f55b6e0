/* The key-value cache family's test case: a random valid instance and its
 * float64 reference, for the table-driven suites (tests/support/op_cases.h).
 * The caches start random, so rows before the position are attended as
 * they are and the one at it must be the token's own k and v. */
#include <math.h>

#include "graph/error.h"
#include "ops/kv_cache/kv_cache.h"
#include "tests/support/op_cases.h"

static ge2_status case_attention_cached(ge2_case_ctx *c)
{
    const int64_t batch = ge2_case_irange(c, 1, 3), len = ge2_case_irange(c, 1, 5);
    const int heads = (int)ge2_case_irange(c, 1, 3);
    const int64_t channels = heads * ge2_case_irange(c, 1, 4);
    const ge2_shape cache = ge2_shape3(batch, len, channels);
    ge2_tensor *qkv, *keys, *values, *positions, *y;
    GE2_TRY(ge2_case_plain(c, ge2_shape2(batch, 3 * channels), &qkv));
    GE2_TRY(ge2_case_buffer(c, c->dtype, cache, (ge2_init){GE2_INIT_NORMAL, 0.0, 1.0, 0}, &keys));
    GE2_TRY(ge2_case_buffer(c, c->dtype, cache, (ge2_init){GE2_INIT_NORMAL, 0.0, 1.0, 0}, &values));
    GE2_TRY(ge2_case_feed(c, GE2_ROLE_INPUT, GE2_I32, ge2_shape1(batch), len, false, &positions));
    GE2_TRY(ge2_attention_cached(c->inst->graph, qkv, keys, values, positions, heads, &y));
    return ge2_case_last_node(c);
}

/* y[b, h·d + i] = Σ_{t ≤ p} softmax_t(q·k_t / sqrt(d)) v_t[i], with row p of
 * the caches the token's own k and v */
static void ref_attention_cached(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    const int64_t len = in[1].shape.dim[1], c = in[1].shape.dim[2];
    const int64_t heads = ge2_attention_cached_heads(node), d = c / heads;
    for (int64_t b = 0; b < in[1].shape.dim[0]; b++) {
        const int64_t p = (int64_t)in[3].v[b];
        const double *q = in[0].v + b * 3 * c;
        for (int64_t h = 0; h < heads; h++) {
            double s[8], top = -INFINITY, sum = 0;
            for (int64_t t = 0; t <= p; t++) {
                s[t] = 0;
                for (int64_t i = 0; i < d; i++)
                    s[t] += q[h * d + i] * (t == p ? q[c + h * d + i] : in[1].v[(b * len + t) * c + h * d + i]);
                s[t] /= sqrt((double)d);
                top = fmax(top, s[t]);
            }
            for (int64_t t = 0; t <= p; t++)
                sum += (s[t] = exp(s[t] - top));
            for (int64_t i = 0; i < d; i++) {
                double acc = 0;
                for (int64_t t = 0; t <= p; t++)
                    acc += s[t] * (t == p ? q[2 * c + h * d + i] : in[2].v[(b * len + t) * c + h * d + i]);
                out[0].v[b * c + h * d + i] = acc / sum;
            }
        }
    }
}

GE2_OP_TEST(attention_cached, GE2_CASE_FORWARD, case_attention_cached, ref_attention_cached)
