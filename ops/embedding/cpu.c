/* EMBEDDING and its backward op on the CPU. */
#include <string.h>

#include "graph/control.h"
#include "kernels/cpu/cpu_util.h"
#include "ops/embedding/embedding.h"

static ge2_status bad_id(const ge2_launch *l, int64_t at, int32_t id, int64_t rows)
{
    return ge2_bad_index_error(ge2_op_name(l->node->op), l->node->id, GE2_BAD_ID, at, id, rows);
}

/* in: table [V, C], ids [n] i32; out: y [n, C] */
#define EMBEDDING(T, SUF)                                                                                         \
    static ge2_status embedding_##SUF(const ge2_launch *l)                                                      \
    {                                                                                                           \
        const T *table = l->in[0].data;                                                                         \
        const int32_t *ids = l->in[1].data;                                                                     \
        T *y = l->out[0].data;                                                                                  \
        const int64_t rows = l->in[0].shape.dim[0], c = l->in[0].shape.dim[1];                                  \
        const int64_t n = ge2_shape_numel(l->in[1].shape);                                                      \
        for (int64_t p = 0; y && p < n; p++) {                                                                  \
            if (ids[p] < 0 || ids[p] >= rows)                                                                   \
                return bad_id(l, p, ids[p], rows);                                                              \
            memcpy(y + p * c, table + (int64_t)ids[p] * c, sizeof(T) * (size_t)c);                              \
        }                                                                                                       \
        return GE2_OK;                                                                                          \
    }

/* in: dy [n, C], ids [n]; out: dtable [rows, C], each position's dy added to its row in position order */
#define EMBEDDING_BACKWARD(T, SUF)                                                                                \
    static ge2_status embedding_backward_##SUF(const ge2_launch *l)                                             \
    {                                                                                                           \
        const T *dy = l->in[0].data;                                                                            \
        const int32_t *ids = l->in[1].data;                                                                     \
        T *dt = l->out[0].data;                                                                                 \
        const int64_t rows = l->out[0].shape.dim[0], c = l->out[0].shape.dim[1];                                \
        const int64_t n = ge2_shape_numel(l->in[1].shape);                                                      \
        if (!dt)                                                                                                \
            return GE2_OK;                                                                                      \
        memset(dt, 0, sizeof(T) * (size_t)(rows * c));                                                          \
        for (int64_t p = 0; p < n; p++) {                                                                       \
            if (ids[p] < 0 || ids[p] >= rows)                                                                   \
                return bad_id(l, p, ids[p], rows);                                                              \
            for (int64_t i = 0; i < c; i++)                                                                     \
                dt[(int64_t)ids[p] * c + i] += dy[p * c + i];                                                   \
        }                                                                                                       \
        return GE2_OK;                                                                                          \
    }

GE2_CPU_DEFINE_BOTH(EMBEDDING)
GE2_CPU_DEFINE_BOTH(EMBEDDING_BACKWARD)

ge2_status ge2_cpu_embedding(const ge2_launch *l) { return GE2_CPU_DISPATCH(embedding, l, l->in[0].dtype); }
ge2_status ge2_cpu_embedding_backward(const ge2_launch *l)
{
    return GE2_CPU_DISPATCH(embedding_backward, l, l->in[0].dtype);
}
