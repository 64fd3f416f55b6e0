/* The embedding family's test cases: a random valid instance per op and
 * its float64 reference, for the table-driven suites
 * (tests/support/op_cases.h). Ids repeat (more positions than rows), so the
 * backward's sums over positions are exercised. */
#include "graph/error.h"
#include "ops/embedding/embedding.h"
#include "tests/support/op_cases.h"

/* ids [1..3 dims of 1..4] in [0, rows) */
static ge2_status case_ids(ge2_case_ctx *c, int64_t rows, ge2_tensor **ids)
{
    return ge2_case_feed(c, GE2_ROLE_INPUT, GE2_I32, ge2_case_random_shape(c, 1, 3), rows, false, ids);
}

static ge2_status case_embedding(ge2_case_ctx *c)
{
    const int64_t rows = ge2_case_irange(c, 1, 5), cols = ge2_case_irange(c, 1, 4);
    ge2_tensor *table, *ids, *y;
    GE2_TRY(ge2_case_operand(c, ge2_shape2(rows, cols), &table));
    GE2_TRY(case_ids(c, rows, &ids));
    GE2_TRY(ge2_embedding(c->inst->graph, ids, table, &y));
    return ge2_case_last_node(c);
}

static ge2_status case_embedding_backward(ge2_case_ctx *c)
{
    const int64_t rows = ge2_case_irange(c, 1, 5), cols = ge2_case_irange(c, 1, 4);
    ge2_tensor *ts[2];
    GE2_TRY(case_ids(c, rows, &ts[1]));
    ge2_shape dys = ts[1]->shape;
    dys.dim[dys.ndim++] = cols;
    GE2_TRY(ge2_case_plain(c, dys, &ts[0]));
    ge2_attrs a;
    GE2_ATTRS(ge2_embedding_attrs, a)->rows = rows;
    return ge2_case_direct(c, GE2_OP_EMBEDDING_BACKWARD, ts, 2, 1, &a);
}

/* y[p, i] = table[ids[p], i] */
static void ref_embedding(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    (void)node;
    const int64_t cols = in[0].shape.dim[1], n = ge2_ref_numel(in[1].shape);
    for (int64_t p = 0; p < n; p++)
        for (int64_t i = 0; i < cols; i++)
            out[0].v[p * cols + i] = in[0].v[(int64_t)in[1].v[p] * cols + i];
}

/* dtable[v, i] = Σ over positions p with ids[p] == v of dy[p, i] */
static void ref_embedding_backward(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    const int64_t rows = GE2_ATTRS(ge2_embedding_attrs, node->attrs)->rows, n = ge2_ref_numel(in[1].shape);
    const int64_t cols = in[0].shape.dim[in[0].shape.ndim - 1];
    for (int64_t v = 0; v < rows; v++)
        for (int64_t i = 0; i < cols; i++) {
            double s = 0;
            for (int64_t p = 0; p < n; p++)
                if ((int64_t)in[1].v[p] == v)
                    s += in[0].v[p * cols + i];
            out[0].v[v * cols + i] = s;
        }
}

GE2_OP_TEST(embedding, GE2_CASE_GRADIENT, case_embedding, ref_embedding)
GE2_OP_TEST(embedding_backward, GE2_CASE_FORWARD, case_embedding_backward, ref_embedding_backward)
