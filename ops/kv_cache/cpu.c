/* ATTENTION_CACHED on the CPU. */
#include <math.h>
#include <string.h>

#include "graph/alloc.h"
#include "graph/control.h"
#include "kernels/cpu/cpu_util.h"
#include "ops/kv_cache/kv_cache.h"

/* in: qkv [B, 3C], k_cache, v_cache [B, T, C] (written at each row's
 * position), positions [B]; out: y [B, C]. Each head's scores, softmax and
 * weighted sum in position order. */
#define ATTENTION_CACHED(T, SUF)                                                                                  \
    static ge2_status attention_cached_##SUF(const ge2_launch *l, T *scores)                                    \
    {                                                                                                           \
        const T *qkv = l->in[0].data;                                                                           \
        T *kc = l->in[1].data, *vc = l->in[2].data, *y = l->out[0].data;                                        \
        const int32_t *positions = l->in[3].data;                                                               \
        const int64_t batch = l->in[1].shape.dim[0], len = l->in[1].shape.dim[1], c = l->in[1].shape.dim[2];    \
        const int64_t heads = ge2_attention_cached_heads(l->node), d = c / heads;                               \
        const T scale = (T)(1.0 / sqrt((double)d));                                                             \
        for (int64_t b = 0; b < batch; b++) /* all checked before any cache is written */                       \
            if (positions[b] < 0 || positions[b] >= len)                                                        \
                return ge2_bad_index_error(ge2_op_name(l->node->op), l->node->id, GE2_BAD_POSITION, b,          \
                                           positions[b], len);                                                  \
        for (int64_t b = 0; b < batch; b++) {                                                                   \
            const int64_t p = positions[b];                                                                     \
            const T *q = qkv + b * 3 * c;                                                                       \
            T *keys = kc + b * len * c, *values = vc + b * len * c;                                             \
            memcpy(keys + p * c, q + c, sizeof(T) * (size_t)c);                                                 \
            memcpy(values + p * c, q + 2 * c, sizeof(T) * (size_t)c);                                           \
            for (int64_t h = 0; y && h < heads; h++) {                                                          \
                T top = -INFINITY, sum = 0;                                                                     \
                for (int64_t t = 0; t <= p; t++) {                                                              \
                    T s = 0;                                                                                    \
                    for (int64_t i = 0; i < d; i++)                                                             \
                        s += q[h * d + i] * keys[t * c + h * d + i];                                            \
                    scores[t] = s * scale;                                                                      \
                    top = scores[t] > top ? scores[t] : top;                                                    \
                }                                                                                               \
                for (int64_t t = 0; t <= p; t++)                                                                \
                    sum += (scores[t] = (T)exp(scores[t] - top));                                               \
                for (int64_t i = 0; i < d; i++) {                                                               \
                    T acc = 0;                                                                                  \
                    for (int64_t t = 0; t <= p; t++)                                                            \
                        acc += scores[t] * values[t * c + h * d + i];                                           \
                    y[b * c + h * d + i] = acc / sum;                                                           \
                }                                                                                               \
            }                                                                                                   \
        }                                                                                                       \
        return GE2_OK;                                                                                          \
    }

GE2_CPU_DEFINE_BOTH(ATTENTION_CACHED)

ge2_status ge2_cpu_attention_cached(const ge2_launch *l)
{
    const int64_t len = l->in[1].shape.dim[1];
    double *scores = ge2_malloc(sizeof(double) * (size_t)(len > 0 ? len : 1)); /* room for either dtype */
    if (!scores)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_attention_cached (node %d): %lld scores", l->node->id,
                         (long long)len);
    const ge2_status st = l->in[0].dtype == GE2_F64   ? attention_cached_f64(l, scores)
                          : l->in[0].dtype == GE2_F32 ? attention_cached_f32(l, (float *)scores)
                                                      : ge2_cpu_bad_dtype(l, l->in[0].dtype);
    ge2_free(scores);
    return st;
}
