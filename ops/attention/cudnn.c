/* ATTENTION and ATTENTION_GRAD under precision BF16 on CUDA: cuDNN 9's fused
 * flash attention (the engines PyTorch's bf16 SDPA runs), built through the
 * backend API as the operation graphs cudnn-frontend lowers
 * sdpa / sdpa_backward to, which cuDNN 9.14 through 9.19 recognise:
 *
 *   forward:  S = scale·Q·Kᵀ, causal mask (GEN_INDEX row >= col, else -inf),
 *             softmax by MAX, SUB, EXP, ADD, LOG (Stats = M + ln Z, the
 *             log-sum-exp our lse holds) and DIV into a bf16 P, O = P·V;
 *   backward: softmax_sum = rowsum(dO ⊙ O), P again from Stats, dV = Pᵀ·dO,
 *             dS = scale·P ⊙ (dO·Vᵀ - softmax_sum), dK = dSᵀ·Q, dQ = dS·K
 *             written directly: the deterministic form (no fp32 dQ
 *             accumulator summed with atomics), so replays equal eager steps.
 *   dropout (train steps with ge2_attention_attrs.dropout p > 0), as cudnn-frontend
 *             lowers it: a Bernoulli(1 - p) RNG mask M from device seed and
 *             offset tensors, P·M·1/(1-p) into P·V and Pᵀ·dO, M ⊙ dO·Vᵀ in
 *             dS, softmax_sum scaled by 1 - p and dS by 1/(1-p).
 *
 * cuDNN's masks are its own Philox numbers, not ge2's (attention.h): the
 * seed it reads is the launch's own, the graph's seed mixed with the op's
 * stream, so two layers draw different masks; the offset is the control
 * block's, which the step advances on the device, so each replay draws
 * new ones, and the backward (same seed, same offset) the forward's.
 *
 * Operands: bf16 copies of q, k, v (and dy, y) rounded into the launch's
 * scratch in their own layout, which the tensors' strides describe (heads
 * inside or outside the positions); cuDNN writes bf16 y (dq, dk, dv) there,
 * widened into the fp32 outputs, and Stats straight into lse. Plans are
 * built once per shape for the whole process (the six layers of a GPT
 * share one) before capture, and their workspace is part of the launch's
 * scratch in the arena (bf16_scratch_bytes). Where cuDNN or an
 * engine is missing, or the shape is not one it takes, the fp32 kernels
 * run (the kernel report says why). */
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <cudnn_graph.h>

#include "graph/alloc.h"
#include "graph/rng.h"
#include "kernels/cuda/bf16_copy.h"
#include "kernels/cuda/cudnn.h"
#include "ops/attention/attention.h"

/* The non-virtual tensors' ids (the variant pack's) */
enum {
    U_Q = 1,
    U_K,
    U_V,
    U_O,
    U_STATS,
    U_DO,
    U_DQ,
    U_DK,
    U_DV,
    U_SCALE,
    U_NEG_INF,
    U_KEEP,
    U_SOFTMAX_SUM,
    U_SEED,
    U_OFFSET,
    U_DROP_SCALE
};

/* One shape of attention: [b, h, t, d] with the heads h inside the
 * positions (ge2_attn_geom's h; 1 when outside, the batch then counting
 * every head); packed, q, k, v and their gradients 3·h·d values a position;
 * dropout p (0: none, as in every eval step). */
typedef struct sdpa_key {
    bool backward, causal, packed;
    int64_t b, h, t, d;
    double dropout;
} sdpa_key;

/* ------------------------------------------------------- the graphs */

#define SDPA_MAX_DESCS 176
#define SDPA_MAX_OPS 40 /* the backward with dropout has 26 */

typedef struct sdpa_graph {
    ge2_cudnn_desc owned[SDPA_MAX_DESCS]; /* every descriptor made, kept for the plan's life */
    int n_owned;
    ge2_cudnn_desc ops[SDPA_MAX_OPS];
    int n_ops;
    int64_t next_virtual_uid;
    ge2_status st; /* the first failure; later calls do nothing */
} sdpa_graph;

static ge2_cudnn_desc own(sdpa_graph *g, ge2_status st, ge2_cudnn_desc d)
{
    if (st != GE2_OK || g->n_owned == SDPA_MAX_DESCS) {
        g->st = st != GE2_OK ? st : ge2_error(GE2_ERR_STATE, "cuDNN attention: more than %d descriptors",
                                                SDPA_MAX_DESCS);
        ge2_cudnn_free(d);
        return NULL;
    }
    return g->owned[g->n_owned++] = d;
}

static ge2_cudnn_desc tensor(sdpa_graph *g, int64_t uid, int type, const int64_t dims[4], const int64_t strides[4],
                             bool is_virtual, bool by_value)
{
    if (g->st != GE2_OK)
        return NULL;
    const ge2_cudnn_tensor_spec spec = {uid, type, 4, dims, strides, is_virtual, by_value, 16};
    ge2_cudnn_desc d = NULL;
    ge2_status st = ge2_cudnn_tensor_of(&spec, &d);
    return own(g, st, d);
}

static ge2_cudnn_desc virtual_tensor(sdpa_graph *g, int type, const int64_t dims[4], const int64_t strides[4])
{
    return tensor(g, g->next_virtual_uid++, type, dims, strides, true, false);
}

/* A descriptor of type with attributes (name, type, count, values) set and finalized */
typedef struct sdpa_attr {
    int name, type;
    int64_t count;
    const void *values;
} sdpa_attr;

static ge2_cudnn_desc described(sdpa_graph *g, int type, const sdpa_attr *attrs, int n)
{
    if (g->st != GE2_OK)
        return NULL;
    ge2_cudnn_desc d = NULL;
    ge2_status st = ge2_cudnn_new(type, &d);
    for (int i = 0; st == GE2_OK && i < n; i++)
        if (attrs[i].values)
            st = ge2_cudnn_set(d, attrs[i].name, attrs[i].type, attrs[i].count, attrs[i].values);
    if (st == GE2_OK)
        st = ge2_cudnn_finalize(d);
    return own(g, st, d);
}

static void add_op(sdpa_graph *g, ge2_cudnn_desc op)
{
    if (g->st != GE2_OK || !op)
        return;
    if (g->n_ops == SDPA_MAX_OPS) {
        g->st = ge2_error(GE2_ERR_STATE, "cuDNN attention: more than %d operations", SDPA_MAX_OPS);
        return;
    }
    g->ops[g->n_ops++] = op;
}

/* y = mode(x[, b[, t]]) in precision prec; axis for GEN_INDEX (else < 0) */
static void pointwise(sdpa_graph *g, cudnnPointwiseMode_t mode, cudnnDataType_t prec, ge2_cudnn_desc x,
                      ge2_cudnn_desc b, ge2_cudnn_desc t, ge2_cudnn_desc y, int64_t axis)
{
    const sdpa_attr pw[] = {{CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode},
                            {CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec},
                            {CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, axis >= 0 ? &axis : NULL}};
    ge2_cudnn_desc desc = described(g, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, pw, 3);
    const float one = 1.0f;
    const sdpa_attr op[] = {
        {CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &desc},
        {CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x},
        {CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, b ? &b : NULL},
        {CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, t ? &t : NULL},
        {CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y},
        {CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &one},
        {CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &one}};
    add_op(g, described(g, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, op, 7));
}

/* y = the sum or max of x over the dims where y has 1 */
static void reduction(sdpa_graph *g, cudnnReduceTensorOp_t which, ge2_cudnn_desc x, ge2_cudnn_desc y)
{
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    const sdpa_attr red[] = {{CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32},
                             {CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &which}};
    ge2_cudnn_desc desc = described(g, CUDNN_BACKEND_REDUCTION_DESCRIPTOR, red, 2);
    const sdpa_attr op[] = {{CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &desc},
                            {CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x},
                            {CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y}};
    add_op(g, described(g, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, op, 3));
}

/* c [b, h, m, n] = a [b, h, m, k] · b [b, h, k, n], fp32 sums */
static void matmul(sdpa_graph *g, ge2_cudnn_desc a, ge2_cudnn_desc b, ge2_cudnn_desc c)
{
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    const sdpa_attr mm[] = {{CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32}};
    ge2_cudnn_desc desc = described(g, CUDNN_BACKEND_MATMUL_DESCRIPTOR, mm, 1);
    const sdpa_attr op[] = {{CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a},
                            {CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b},
                            {CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c},
                            {CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &desc}};
    add_op(g, described(g, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, op, 4));
}

/* y: x seen through other dims and strides (a transpose) */
static void reshape(sdpa_graph *g, ge2_cudnn_desc x, ge2_cudnn_desc y)
{
    const sdpa_attr op[] = {{CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x},
                            {CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y}};
    add_op(g, described(g, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, op, 2));
}

/* The shapes and strides the graphs use */
typedef struct sdpa_dims {
    int64_t rows[4], rows_t[4];             /* q, k, v, y [b, h, t, d] and k, v as [b, h, d, t] */
    int64_t row_strides[4], row_strides_t[4]; /* y, dy */
    int64_t qkv_strides[4], qkv_strides_t[4]; /* q, k, v, dq, dk, dv: row_strides but packed */
    int64_t scores[4], score_strides[4], score_strides_t[4]; /* [b, h, t, t], and transposed */
    int64_t stats[4], stats_strides[4];     /* [b, h, t, 1]: lse's layout */
    int64_t sums_strides[4];                /* softmax_sum, dense [b, h, t, 1] */
    int64_t scalar[4];
} sdpa_dims;

static sdpa_dims dims_of(const sdpa_key *k)
{
    const int64_t b = k->b, h = k->h, t = k->t, d = k->d;
    /* element (bb, hh, tt, dd) of q is at ((bb·t + tt)·h + hh)·d + dd (ge2_attn_row) */
    const int64_t qld = (k->packed ? 3 : 1) * h * d; /* a position's values in q's tensor (ge2_attn_qkv_at) */
    sdpa_dims s = {{b, h, t, d}, {b, h, d, t}, {t * h * d, d, h * d, 1}, {t * h * d, d, 1, h * d},
                   {t * qld, d, qld, 1}, {t * qld, d, 1, qld},
                   {b, h, t, t}, {h * t * t, t * t, t, 1}, {h * t * t, t * t, 1, t},
                   {b, h, t, 1}, {t * h, 1, h, 1}, {h * t, t, 1, 1}, {1, 1, 1, 1}};
    return s;
}

/* x where row >= column (query sees key), else -inf */
static ge2_cudnn_desc causal_mask(sdpa_graph *g, const sdpa_dims *s, ge2_cudnn_desc x, ge2_cudnn_desc neg_inf)
{
    ge2_cudnn_desc row = virtual_tensor(g, CUDNN_DATA_INT32, s->scores, s->score_strides);
    ge2_cudnn_desc col = virtual_tensor(g, CUDNN_DATA_INT32, s->scores, s->score_strides);
    pointwise(g, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, x, NULL, NULL, row, 2);
    pointwise(g, CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, x, NULL, NULL, col, 3);
    ge2_cudnn_desc keep = virtual_tensor(g, CUDNN_DATA_BOOLEAN, s->scores, s->score_strides);
    pointwise(g, CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, col, NULL, keep, -1);
    ge2_cudnn_desc y = virtual_tensor(g, CUDNN_DATA_FLOAT, s->scores, s->score_strides);
    pointwise(g, CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, x, neg_inf, keep, y, -1);
    return y;
}

/* A bf16 operand [b, h, t, d] (k and v as [b, h, d, t] where transposed):
 * y and dy dense, q, k, v and their gradients in their tensor's layout */
static ge2_cudnn_desc operand(sdpa_graph *g, const sdpa_dims *s, int64_t uid, bool transposed)
{
    const bool qkv = uid != U_O && uid != U_DO;
    const int64_t *strides = qkv ? (transposed ? s->qkv_strides_t : s->qkv_strides)
                                 : (transposed ? s->row_strides_t : s->row_strides);
    return tensor(g, uid, CUDNN_DATA_BFLOAT16, transposed ? s->rows_t : s->rows, strides, false, false);
}

/* A by-value fp32 scalar (host memory in the variant pack) */
static ge2_cudnn_desc scalar(sdpa_graph *g, const sdpa_dims *s, int64_t uid)
{
    return tensor(g, uid, CUDNN_DATA_FLOAT, s->scalar, s->scalar, false, true);
}

/* mode(x[, b]) into a new fp32 [b, h, t, t] of scores */
static ge2_cudnn_desc on_scores(sdpa_graph *g, const sdpa_dims *s, cudnnPointwiseMode_t mode, ge2_cudnn_desc x,
                                ge2_cudnn_desc b)
{
    ge2_cudnn_desc y = virtual_tensor(g, CUDNN_DATA_FLOAT, s->scores, s->score_strides);
    pointwise(g, mode, CUDNN_DATA_FLOAT, x, b, NULL, y, -1);
    return y;
}

/* cuDNN reads the offset in place, as a tensor aligned as every other (16 bytes) */
_Static_assert(offsetof(ge2_control, rng_offset) % 16 == 0, "ge2_control.rng_offset must be 16-byte aligned");

/* The dropout mask [b, h, t, t]: 1 where a weight is kept (probability
 * 1 - p), else 0, drawn from the device seed and offset (int64 scalars) */
static ge2_cudnn_desc dropout_mask(sdpa_graph *g, const sdpa_dims *s, double p)
{
    ge2_cudnn_desc seed = tensor(g, U_SEED, CUDNN_DATA_INT64, s->scalar, s->scalar, false, false);
    ge2_cudnn_desc offset = tensor(g, U_OFFSET, CUDNN_DATA_INT64, s->scalar, s->scalar, false, false);
    const cudnnRngDistribution_t bernoulli = CUDNN_RNG_DISTRIBUTION_BERNOULLI;
    const double keep = 1.0 - p;
    const sdpa_attr rng[] = {{CUDNN_ATTR_RNG_DISTRIBUTION, CUDNN_TYPE_RNG_DISTRIBUTION, 1, &bernoulli},
                             {CUDNN_ATTR_RNG_BERNOULLI_DIST_PROBABILITY, CUDNN_TYPE_DOUBLE, 1, &keep}};
    ge2_cudnn_desc desc = described(g, CUDNN_BACKEND_RNG_DESCRIPTOR, rng, 2);
    ge2_cudnn_desc mask = virtual_tensor(g, CUDNN_DATA_FLOAT, s->scores, s->score_strides);
    const sdpa_attr op[] = {{CUDNN_ATTR_OPERATION_RNG_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mask},
                            {CUDNN_ATTR_OPERATION_RNG_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &desc},
                            {CUDNN_ATTR_OPERATION_RNG_SEED, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &seed},
                            {CUDNN_ATTR_OPERATION_RNG_OFFSET_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &offset}};
    add_op(g, described(g, CUDNN_BACKEND_OPERATION_RNG_DESCRIPTOR, op, 4));
    return mask;
}

/* x ⊙ mask · drop_scale (1/(1-p)) into y: the kept weights */
static void dropped(sdpa_graph *g, const sdpa_dims *s, ge2_cudnn_desc x, ge2_cudnn_desc mask,
                    ge2_cudnn_desc drop_scale, ge2_cudnn_desc y)
{
    ge2_cudnn_desc kept = on_scores(g, s, CUDNN_POINTWISE_MUL, x, mask);
    pointwise(g, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, kept, drop_scale, NULL, y, -1);
}

/* scale · q·kᵀ, fp32 [b, h, t, t] */
static ge2_cudnn_desc scaled_scores(sdpa_graph *g, const sdpa_dims *s, ge2_cudnn_desc q, ge2_cudnn_desc kt,
                                    ge2_cudnn_desc scale)
{
    ge2_cudnn_desc s0 = virtual_tensor(g, CUDNN_DATA_FLOAT, s->scores, s->score_strides);
    matmul(g, q, kt, s0);
    return on_scores(g, s, CUDNN_POINTWISE_MUL, s0, scale);
}

static void build_forward(sdpa_graph *g, const sdpa_key *k)
{
    const sdpa_dims s = dims_of(k);
    const int bf16 = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
    ge2_cudnn_desc q = operand(g, &s, U_Q, false), kt = operand(g, &s, U_K, true);
    ge2_cudnn_desc v = operand(g, &s, U_V, false), o = operand(g, &s, U_O, false);
    ge2_cudnn_desc stats = tensor(g, U_STATS, f32, s.stats, s.stats_strides, false, false);
    ge2_cudnn_desc scale = scalar(g, &s, U_SCALE), neg_inf = k->causal ? scalar(g, &s, U_NEG_INF) : NULL;

    ge2_cudnn_desc s1 = scaled_scores(g, &s, q, kt, scale);
    ge2_cudnn_desc s2 = k->causal ? causal_mask(g, &s, s1, neg_inf) : s1;
    ge2_cudnn_desc m = virtual_tensor(g, f32, s.stats, s.sums_strides);
    reduction(g, CUDNN_REDUCE_TENSOR_MAX, s2, m);
    ge2_cudnn_desc e = on_scores(g, &s, CUDNN_POINTWISE_EXP, on_scores(g, &s, CUDNN_POINTWISE_SUB, s2, m), NULL);
    ge2_cudnn_desc z = virtual_tensor(g, f32, s.stats, s.sums_strides);
    reduction(g, CUDNN_REDUCE_TENSOR_ADD, e, z);
    ge2_cudnn_desc log_z = virtual_tensor(g, f32, s.stats, s.sums_strides);
    pointwise(g, CUDNN_POINTWISE_LOG, CUDNN_DATA_FLOAT, z, NULL, NULL, log_z, -1);
    pointwise(g, CUDNN_POINTWISE_ADD, CUDNN_DATA_FLOAT, m, log_z, NULL, stats, -1);
    ge2_cudnn_desc p = virtual_tensor(g, bf16, s.scores, s.score_strides); /* P·V multiplies bf16 */
    if (k->dropout > 0) {
        ge2_cudnn_desc p0 = virtual_tensor(g, f32, s.scores, s.score_strides);
        pointwise(g, CUDNN_POINTWISE_DIV, CUDNN_DATA_FLOAT, e, z, NULL, p0, -1);
        dropped(g, &s, p0, dropout_mask(g, &s, k->dropout), scalar(g, &s, U_DROP_SCALE), p);
    } else {
        pointwise(g, CUDNN_POINTWISE_DIV, CUDNN_DATA_FLOAT, e, z, NULL, p, -1);
    }
    matmul(g, p, v, o);
}

static void build_backward(sdpa_graph *g, const sdpa_key *k)
{
    const sdpa_dims s = dims_of(k);
    const int bf16 = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
    ge2_cudnn_desc q = operand(g, &s, U_Q, false), kt = operand(g, &s, U_K, true), vt = operand(g, &s, U_V, true);
    ge2_cudnn_desc o = operand(g, &s, U_O, false), d_o = operand(g, &s, U_DO, false);
    ge2_cudnn_desc dq = operand(g, &s, U_DQ, false), dk = operand(g, &s, U_DK, false), dv = operand(g, &s, U_DV, false);
    ge2_cudnn_desc stats = tensor(g, U_STATS, f32, s.stats, s.stats_strides, false, false);
    ge2_cudnn_desc scale = scalar(g, &s, U_SCALE), neg_inf = k->causal ? scalar(g, &s, U_NEG_INF) : NULL;
    ge2_cudnn_desc keep = scalar(g, &s, U_KEEP);
    ge2_cudnn_desc softmax_sum = tensor(g, U_SOFTMAX_SUM, f32, s.stats, s.sums_strides, false, false);

    /* softmax_sum = rowsum(dO ⊙ O) · keep (1, or 1 - p under dropout) */
    ge2_cudnn_desc x0 = virtual_tensor(g, f32, s.rows, s.row_strides);
    pointwise(g, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, d_o, o, NULL, x0, -1);
    ge2_cudnn_desc x1 = virtual_tensor(g, f32, s.stats, s.sums_strides);
    reduction(g, CUDNN_REDUCE_TENSOR_ADD, x0, x1);
    pointwise(g, CUDNN_POINTWISE_MUL, CUDNN_DATA_FLOAT, x1, keep, NULL, softmax_sum, -1);
    /* P = exp(mask(scale·Q·Kᵀ - Stats)) */
    ge2_cudnn_desc s1 = scaled_scores(g, &s, q, kt, scale);
    ge2_cudnn_desc s2 = on_scores(g, &s, CUDNN_POINTWISE_SUB, s1, stats);
    ge2_cudnn_desc p = on_scores(g, &s, CUDNN_POINTWISE_EXP, k->causal ? causal_mask(g, &s, s2, neg_inf) : s2, NULL);
    /* dV = Pᵀ·dO (P's kept weights, under dropout) */
    ge2_cudnn_desc mask = k->dropout > 0 ? dropout_mask(g, &s, k->dropout) : NULL, pk = p;
    ge2_cudnn_desc drop_scale = mask ? scalar(g, &s, U_DROP_SCALE) : NULL;
    if (mask) {
        pk = virtual_tensor(g, f32, s.scores, s.score_strides);
        dropped(g, &s, p, mask, drop_scale, pk);
    }
    ge2_cudnn_desc pt = virtual_tensor(g, bf16, s.scores, s.score_strides_t);
    reshape(g, pk, pt);
    matmul(g, pt, d_o, dv);
    /* dS = scale·P ⊙ (dO·Vᵀ - softmax_sum); under dropout
     * scale/(1-p)·P ⊙ (M ⊙ dO·Vᵀ - softmax_sum), whose softmax_sum was scaled by 1 - p */
    ge2_cudnn_desc dp = virtual_tensor(g, f32, s.scores, s.score_strides);
    matmul(g, d_o, vt, dp);
    ge2_cudnn_desc a1 = on_scores(g, &s, CUDNN_POINTWISE_SUB, mask ? on_scores(g, &s, CUDNN_POINTWISE_MUL, dp, mask) : dp,
                                  softmax_sum);
    ge2_cudnn_desc ds0 = on_scores(g, &s, CUDNN_POINTWISE_MUL, a1, p);
    if (mask)
        ds0 = on_scores(g, &s, CUDNN_POINTWISE_MUL, ds0, drop_scale);
    ge2_cudnn_desc ds = on_scores(g, &s, CUDNN_POINTWISE_MUL, ds0, scale);
    /* dK = dSᵀ·Q */
    ge2_cudnn_desc dst = virtual_tensor(g, bf16, s.scores, s.score_strides_t);
    reshape(g, ds, dst);
    matmul(g, dst, q, dk);
    /* dQ = dS·K, K seen again as [b, h, t, d]: straight into dQ, no atomics */
    ge2_cudnn_desc kv = virtual_tensor(g, f32, s.rows, s.qkv_strides);
    reshape(g, kt, kv);
    matmul(g, ds, kv, dq);
}

/* ------------------------------------------------------- the plans */

typedef struct sdpa_plan {
    sdpa_key key;
    ge2_status status; /* GE2_OK: plan usable; else why says what */
    char why[160];
    ge2_cudnn_plan plan;
    sdpa_graph graph;
} sdpa_plan;

#define SDPA_MAX_PLANS 32

static struct {
    pthread_mutex_t lock;
    sdpa_plan *plans[SDPA_MAX_PLANS];
    int n;
} cache = {.lock = PTHREAD_MUTEX_INITIALIZER};

static bool same_key(const sdpa_key *a, const sdpa_key *b)
{
    return a->backward == b->backward && a->causal == b->causal && a->packed == b->packed && a->b == b->b &&
           a->h == b->h && a->t == b->t && a->d == b->d && a->dropout == b->dropout;
}

/* The plan of key, built on first use; NULL when out of room or memory. */
static const sdpa_plan *plan_of(const sdpa_key *key)
{
    pthread_mutex_lock(&cache.lock);
    sdpa_plan *found = NULL;
    for (int i = 0; i < cache.n && !found; i++)
        if (same_key(&cache.plans[i]->key, key))
            found = cache.plans[i];
    if (!found && cache.n < SDPA_MAX_PLANS && (found = ge2_calloc(1, sizeof *found))) {
        found->key = *key;
        found->graph.next_virtual_uid = 100;
        (key->backward ? build_backward : build_forward)(&found->graph, key);
        found->status = found->graph.st;
        if (found->status == GE2_OK)
            found->status = ge2_cudnn_plan_new(found->graph.ops, found->graph.n_ops, GE2_CUDNN_ANY, NULL, NULL,
                                               &found->plan, found->why, sizeof found->why);
        else
            snprintf(found->why, sizeof found->why, "%s", ge2_last_error());
        if (found->status != GE2_OK && found->why[0] == '\0')
            snprintf(found->why, sizeof found->why, "%s", ge2_last_error());
        cache.plans[cache.n++] = found;
    }
    pthread_mutex_unlock(&cache.lock);
    return found;
}

/* ------------------------------------------------ launches and scratch */

/* What a launch needs of cuDNN: its shape, or why it takes the fp32 kernels */
static bool key_of(const ge2_launch *l, sdpa_key *key, char *why, size_t why_size)
{
    const bool backward = l->node->op == GE2_OP_ATTENTION_GRAD;
    const ge2_view *q = &l->in[backward ? 1 : 0];
    const ge2_attn_geom g = ge2_attn_geom_of(q->shape, GE2_ATTRS(ge2_attention_attrs, l->node->attrs));
    if (!l->bf16_operands) {
        snprintf(why, why_size, "fp32");
        return false;
    }
    if (q->dtype != GE2_F32 && q->dtype != GE2_BF16) {
        snprintf(why, why_size, "%s operands", ge2_dtype_name(q->dtype));
        return false;
    }
    if (g.d % 8 != 0 || g.d > 128 || g.t < 2) {
        snprintf(why, why_size, "cuDNN takes head sizes of 8 to 128 in steps of 8 and 2 positions or more, not %lld "
                 "x %lld", (long long)g.t, (long long)g.d);
        return false;
    }
    if (ge2_cudnn_available() != GE2_OK) {
        snprintf(why, why_size, "%s", ge2_last_error());
        return false;
    }
    /* cuDNN up to 9.15.0 can fault in a replayed backward whose key count is
     * not a multiple of 128 (cudnn-frontend works around it with a padding
     * mask, fixed in 9.15.1); both directions go to cuDNN or neither */
    unsigned major = 0, minor = 0, patch = 0;
    if (sscanf(ge2_cudnn_version(), "cuDNN %u.%u.%u", &major, &minor, &patch) == 3 &&
        major * 10000 + minor * 100 + patch < 91501 && g.t % 128 != 0) {
        snprintf(why, why_size, "%s needs a multiple of 128 positions, not %lld", ge2_cudnn_version(),
                 (long long)g.t);
        return false;
    }
    const ge2_attention_attrs *a = GE2_ATTRS(ge2_attention_attrs, l->node->attrs);
    *key = (sdpa_key){backward, a->causal, a->packed, g.heads / g.h, g.h, g.t, g.d,
                      l->training && a->dropout > 0 ? a->dropout : 0.0};
    return true;
}

/* Where each part lives in the scratch: offsets in bytes */
typedef struct sdpa_layout {
    /* the copy slots, the launch's inputs less the backward's lse, then
     * its outputs (forward: q, k, v, y or qkv, y; backward: dy, q, k, v, y,
     * dq, dk, dv or dy, qkv, y, dqkv): the bf16 copies of f32 tensors (a
     * bf16 tensor, the storage pass's, is used in place and has no room
     * here) */
    size_t copy[8];
    int n_inputs, n_copies;
    size_t stats;   /* forward without an lse output: its Stats */
    size_t sums;    /* backward: softmax_sum */
    size_t workspace, total;
} sdpa_layout;

static size_t round256(size_t n) { return (n + 255) / 256 * 256; }

/* Copy slot i's tensor */
static const ge2_view *slot_view(const ge2_launch *l, const sdpa_layout *s, int i)
{
    return i < s->n_inputs ? &l->in[i] : &l->out[i - s->n_inputs];
}

static sdpa_layout layout_of(const sdpa_key *key, size_t workspace_bytes, const ge2_launch *l)
{
    sdpa_layout s = {{0}, key->backward ? l->n_in - 1 : l->n_in, 0, 0, 0, 0, 0};
    s.n_copies = s.n_inputs + (key->backward ? l->n_out : 1);
    const int64_t rows = key->b * key->h * key->t;
    size_t at = 0;
    for (int i = 0; i < s.n_copies; i++) {
        const ge2_view *v = slot_view(l, &s, i);
        s.copy[i] = at;
        if (!(v->data && v->dtype == GE2_BF16))
            at += ge2_bf16_copy_bytes(ge2_shape_numel(v->shape));
    }
    s.stats = s.sums = at;
    at += round256((size_t)rows * sizeof(float));
    s.workspace = at;
    s.total = at + round256(workspace_bytes);
    return s;
}

/* A bf16 launch's state (backend_data): the plan it runs, or NULL and the
 * reason the fp32 kernels run instead, in its description */
typedef struct sdpa_launch {
    const sdpa_plan *plan;
    sdpa_layout layout;
    /* the by-value scalars, host memory the variant pack points to: keep is
     * the chance a weight is kept (1 without dropout), drop_scale 1/keep */
    float scale, neg_inf, keep, drop_scale;
    int64_t *seed; /* under dropout: the launch's seed in device memory (dropout_seed) */
    char description[224];
} sdpa_launch;

/* The seed a dropout launch's masks draw from: the graph's (the control
 * block's) mixed with the op's stream (graph/rng.h's ge2_mix64), so layers
 * of one shape draw different masks; copied once into device memory of
 * its own before capture */
static ge2_status dropout_seed(const ge2_launch *l, sdpa_launch *s)
{
    uint64_t seed = 0;
    cudaError_t e = cudaStreamSynchronize((cudaStream_t)l->stream);
    if (e == cudaSuccess)
        e = cudaMemcpy(&seed, &l->control->rng_seed, sizeof seed, cudaMemcpyDeviceToHost);
    const int64_t mixed = (int64_t)ge2_mix64(seed ^ (GE2_MIX64_GAMMA * (GE2_ATTRS(ge2_attention_attrs, l->node->attrs)->stream + 1ull)));
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&s->seed, sizeof mixed);
    if (e == cudaSuccess)
        e = cudaMemcpy(s->seed, &mixed, sizeof mixed, cudaMemcpyHostToDevice);
    if (e != cudaSuccess)
        return ge2_error(GE2_ERR_CUDA, "ge2_%s (node %d): the dropout seed: %s", ge2_op_name(l->node->op),
                         l->node->id, cudaGetErrorString(e));
    return GE2_OK;
}

/* The log-sum-exp cuDNN reads or writes as Stats (NULL: the forward's goes to the scratch) */
static const void *lse_of(const ge2_launch *l)
{
    if (l->node->op == GE2_OP_ATTENTION_GRAD)
        return l->in[l->n_in - 1].data;
    return l->n_out > 1 ? l->out[1].data : NULL;
}

/* Whether cuDNN can run launch l given the scratch it asks: its key, plan
 * and scratch layout, else why not */
static bool cudnn_plans(const ge2_launch *l, sdpa_key *key, const sdpa_plan **p, sdpa_layout *layout, char *why,
                        size_t why_size)
{
    if (!key_of(l, key, why, why_size))
        return false;
    const void *lse = lse_of(l);
    if (lse && (uintptr_t)lse % 16 != 0) {
        snprintf(why, why_size, "lse at %p is not 16-byte aligned", lse);
        return false;
    }
    *p = plan_of(key);
    if (!*p || (*p)->status != GE2_OK) {
        snprintf(why, why_size, "cuDNN: %.140s", *p ? (*p)->why : "no room for another plan");
        return false;
    }
    /* under dropout the forward and the backward must draw one mask: both
     * run on cuDNN (its masks) or neither (ge2's) */
    const sdpa_key pair = {!key->backward, key->causal, key->packed, key->b, key->h, key->t, key->d, key->dropout};
    const sdpa_plan *other = key->dropout > 0 ? plan_of(&pair) : *p;
    if (!other || other->status != GE2_OK) {
        snprintf(why, why_size, "cuDNN has no plan for the %s with dropout: %.100s",
                 key->backward ? "forward" : "backward", other ? other->why : "no room for another plan");
        return false;
    }
    *layout = layout_of(key, (*p)->plan.workspace_bytes, l);
    return true;
}

size_t ge2_cudnn_attention_scratch_bytes(const ge2_launch *l)
{
    sdpa_key key;
    const sdpa_plan *p;
    sdpa_layout layout;
    char why[160];
    const bool plans = cudnn_plans(l, &key, &p, &layout, why, sizeof why);
    ge2_clear_error(); /* a launch cuDNN declines is no error: the fp32 kernels run it */
    return plans ? layout.total : 0;
}

/* Whether cuDNN runs launch l: cudnn_plans, and the scratch the backend gave */
static bool cudnn_takes(const ge2_launch *l, sdpa_key *key, const sdpa_plan **p, sdpa_layout *layout, char *why,
                        size_t why_size)
{
    if (!cudnn_plans(l, key, p, layout, why, why_size))
        return false;
    if (!l->scratch || l->scratch_bytes < layout->total) {
        snprintf(why, why_size, "%zu bytes of scratch, cuDNN's attention needs %zu",
                 l->scratch ? l->scratch_bytes : (size_t)0, layout->total);
        return false;
    }
    return true;
}

ge2_status ge2_cudnn_attention_prepare(ge2_launch *l, const char *fallback)
{
    if (!l->bf16_operands)
        return GE2_OK;
    sdpa_launch *s = ge2_calloc(1, sizeof *s);
    if (!s)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_%s (node %d): out of host memory", ge2_op_name(l->node->op),
                         l->node->id);
    l->backend_data = s;
    sdpa_key key;
    char why[160];
    const sdpa_plan *p;
    sdpa_layout layout;
    if (cudnn_takes(l, &key, &p, &layout, why, sizeof why)) {
        s->plan = p;
        s->layout = layout;
        s->scale = (float)ge2_attn_scale(GE2_ATTRS(ge2_attention_attrs, l->node->attrs), key.d);
        s->neg_inf = -INFINITY;
        s->keep = (float)(1.0 - key.dropout);
        s->drop_scale = key.dropout > 0 ? (float)(1.0 / (1.0 - key.dropout)) : 1.0f;
        const ge2_status st = key.dropout > 0 ? dropout_seed(l, s) : GE2_OK;
        if (st != GE2_OK)
            ge2_cudnn_attention_release(l); /* a failed prepare leaves nothing behind */
        if (st != GE2_OK)
            return st;
        snprintf(s->description, sizeof s->description,
                 "cuDNN flash attention (bf16 operands, fp32 softmax), engine %lld%s%s; scratch %.2f MiB, cuDNN's "
                 "workspace %.2f of it", (long long)p->plan.engine, key.backward ? ", deterministic dQ" : "",
                 key.dropout > 0 ? ", cuDNN's dropout masks" : "", (double)layout.total / (1 << 20),
                 (double)(layout.total - layout.workspace) / (1 << 20));
        return GE2_OK;
    }
    snprintf(s->description, sizeof s->description, "%s; not cuDNN under bf16: %s", fallback, why);
    ge2_clear_error();
    return GE2_OK;
}

bool ge2_cudnn_attention_runs(const ge2_launch *l)
{
    return l->backend_data && ((const sdpa_launch *)l->backend_data)->plan;
}

void ge2_cudnn_attention_release(ge2_launch *l)
{
    const sdpa_launch *s = l->backend_data;
    if (s && s->seed)
        cudaFree(s->seed);
    ge2_free(l->backend_data);
    l->backend_data = NULL;
}

const char *ge2_cudnn_attention_describe(const ge2_launch *l)
{
    return l->backend_data ? ((const sdpa_launch *)l->backend_data)->description : NULL;
}

ge2_status ge2_cudnn_attention_launch(const ge2_launch *l)
{
    const sdpa_launch *s = l->backend_data;
    const sdpa_key *key = &s->plan->key;
    if ((uintptr_t)lse_of(l) % 16 != 0)
        return ge2_error(GE2_ERR_STATE, "ge2_%s (node %d): lse moved to %p since prepare; cuDNN needs 16-byte "
                         "alignment", ge2_op_name(l->node->op), l->node->id, lse_of(l));
    const ge2_attn_slots o = ge2_attn_slots_of(l->node, ge2_attn_geom_of(l->in[key->backward ? 1 : 0].shape,
                                                                           GE2_ATTRS(ge2_attention_attrs, l->node->attrs)));
    char *scratch = l->scratch;
    char *c[8];
    for (int i = 0; i < s->layout.n_copies; i++)
        c[i] = scratch + s->layout.copy[i];
    ge2_bf16_spans in = {0}, out = {0};
    int64_t uids[16];
    void *ptrs[16];
    int m = 0;
#define PACK(uid, ptr) (uids[m] = (uid), ptrs[m++] = (void *)(ptr))
    /* f32 tensors are rounded into their copies (outputs widened from
     * theirs after); bf16 ones (the storage pass's) are used in place */
    for (int i = 0; i < s->layout.n_copies; i++) {
        const ge2_view *v = slot_view(l, &s->layout, i);
        const int64_t n = ge2_shape_numel(v->shape);
        if (v->data && v->dtype == GE2_BF16)
            c[i] = v->data;
        else if (v->data && i < s->layout.n_inputs)
            ge2_bf16_span_add(&in, v->data, c[i], n);
        else if (v->data)
            ge2_bf16_span_add(&out, c[i], v->data, n);
    }
    /* bf16 values: k and v (dk and dv) start k_at and v_at into theirs */
    const size_t k_at = 2 * (size_t)o.k_at, v_at = 2 * (size_t)o.v_at;
    PACK(U_Q, c[o.q]), PACK(U_K, c[o.k] + k_at), PACK(U_V, c[o.v] + v_at);
    if (!key->backward) { /* q, k, v -> y, lse */
        void *lse = l->n_out > 1 && l->out[1].data ? l->out[1].data : scratch + s->layout.stats;
        PACK(U_O, c[s->layout.n_inputs]), PACK(U_STATS, lse);
    } else { /* dy, q, k, v, y, lse -> dq, dk, dv */
        const int n_in = s->layout.n_inputs;
        PACK(U_DO, c[o.dy]), PACK(U_O, c[o.y]), PACK(U_STATS, l->in[o.lse].data);
        PACK(U_DQ, c[n_in + o.dq]), PACK(U_DK, c[n_in + o.dk] + k_at), PACK(U_DV, c[n_in + o.dv] + v_at);
        PACK(U_SOFTMAX_SUM, scratch + s->layout.sums), PACK(U_KEEP, &s->keep);
    }
    PACK(U_SCALE, &s->scale);
    if (key->causal)
        PACK(U_NEG_INF, &s->neg_inf);
    if (key->dropout > 0) /* the offset the step advances on the device */
        PACK(U_SEED, s->seed), PACK(U_OFFSET, &l->control->rng_offset), PACK(U_DROP_SCALE, &s->drop_scale);
#undef PACK
    GE2_TRY(ge2_cuda_bf16_round(l, &in));
    ge2_status st = ge2_cudnn_execute(&s->plan->plan, l->stream, m, uids, ptrs, scratch + s->layout.workspace);
    if (st != GE2_OK) {
        char cause[256];
        snprintf(cause, sizeof cause, "%s", ge2_last_error());
        return ge2_error(st, "ge2_%s (node %d): %s", ge2_op_name(l->node->op), l->node->id, cause);
    }
    return ge2_cuda_bf16_widen(l, &out);
}
