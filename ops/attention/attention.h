/* The attention family: ATTENTION (q, k, v [..., T, D] -> y [..., T, D],
 * lse [..., T]: each query's log-sum-exp of its scaled scores), and its
 * backward op ATTENTION_GRAD (dy, q, k, v, y, lse -> dq, dk, dv): one op,
 * because the terms delta_t below serve all three gradients and cuDNN's
 * fused backward makes the three at once. The leading dims are
 * flattened into one batch of heads. With p = exp(s - lse), s = scale · q·kᵀ
 * (masked above the diagonal when causal) and delta_t = dy_t · y_t:
 *     dv_j = Σ_t p_tj dy_t,   ds_tj = p_tj (dy_t · v_j - delta_t),
 *     dq_t = scale Σ_j ds_tj k_j,   dk_j = scale Σ_t ds_tj q_t.
 * Each sum belongs to one output row and runs in index order.
 * Packed (ge2_attention_attrs.packed), q, k, v are one input qkv
 * [..., T, 3H, D] (ATTENTION: qkv -> y, lse; ATTENTION_GRAD: dy, qkv, y,
 * lse -> dqkv): the same math, a position's q, k, v rows 3·H·D values apart
 * (ge2_attn_qkv_at).
 *
 * ops.c holds the definitions (registered by ops/builtin.def's lines); the
 * rest of the folder is their parts: infer.c, backward.c, api.c (the public
 * builder), cpu.c, cuda.cu (with cuda_tiles.h, tensor_cores.cu and
 * candidates.c) and test.c (test cases and float64 references). */
#ifndef GE2_OPS_ATTENTION_ATTENTION_H
#define GE2_OPS_ATTENTION_ATTENTION_H

/* nvcc compiles the CUDA launchers as C++: these are C declarations */
#ifdef __cplusplus
extern "C" {
#endif

#include <math.h>

#include "autograd/autograd.h"
#include "graph/control.h"
#include "graph/op_support.h"
#include "graph/philox.h"
#include "ops/ops.h"

/* The family's node attributes (graph/ir.h: GE2_ATTRS). */
/* ATTENTION and its backward ops: causal masking (query t sees keys 0..t),
 * the score scale (0: 1/sqrt(D)) and the layout: [..., T, D] (heads
 * outside the positions), or with heads_inner [..., T, H, D] (heads inside
 * them, as a [B, T, C] projection reshaped: no copy to split heads), or
 * packed (heads_inner too): q, k and v are one input [..., T, 3H, D] (q's
 * heads, then k's, then v's), a [B, T, 3C] projection reshaped, and the
 * backward makes one dqkv of that shape: no copies to split q, k, v or to
 * join their gradients. */
typedef struct ge2_attention_attrs {
    bool causal;
    bool heads_inner;
    bool packed;
    double scale;
    double dropout;  /* train steps zero each attention weight with this probability (ge2_attention_dropout) */
    uint32_t stream; /* the dropout's random stream (ge2_philox_step_draw): the node's id when dropout was set */
} ge2_attention_attrs;
GE2_ATTRS_FIT(ge2_attention_attrs);

/* q seen as heads × T rows of D values. [..., T, D]: h = 1, each head's
 * rows consecutive. heads_inner, [..., T, H, D]: h = H, a head's rows H
 * rows apart. y, dy and lse are dense rows (lse, y's shape less its last
 * dim, has one value per row); q, k, v and their gradients too, except
 * packed ([..., T, 3H, D]: h = H), where a position's rows start qkv_ld =
 * 3·H·D values apart, q's at 0, k's at H·D, v's at 2·H·D. */
typedef struct ge2_attn_geom {
    int64_t heads, t, d, h;
    int64_t qkv_ld; /* values from a position's first q row to the next position's: h·d, or 3·h·d packed */
} ge2_attn_geom;

/* From q's shape, or packed, qkv's */
static inline ge2_attn_geom ge2_attn_geom_of(ge2_shape q, const ge2_attention_attrs *a)
{
    const int n = q.ndim;
    if (a->packed) { /* infer guarantees 3 dims or more, the second last 3H */
        ge2_attn_geom g = {1, q.dim[n - 3], q.dim[n - 1], q.dim[n - 2] / 3, q.dim[n - 2] * q.dim[n - 1]};
        for (int i = 0; i + 3 < n; i++)
            g.heads *= q.dim[i];
        g.heads *= g.h;
        return g;
    }
    const int inner = a->heads_inner ? 1 : 0; /* infer guarantees 3 dims then */
    ge2_attn_geom g = {1, q.dim[n - 2 - inner], q.dim[n - 1], inner ? q.dim[n - 2] : 1, 0};
    for (int i = 0; i + 2 + inner < n; i++)
        g.heads *= q.dim[i];
    g.heads *= g.h;
    g.qkv_ld = g.h * g.d;
    return g;
}

/* The row of head hd at position t: y's values start at row·D, lse's is
 * lse[row], q's at ge2_attn_qkv_at. Position t + 1 is g.h rows further. */
static inline int64_t ge2_attn_row(ge2_attn_geom g, int64_t hd, int64_t t)
{
    return (hd / g.h * g.t + t) * g.h + hd % g.h;
}

/* Where row's values start in q (k, v, dq, dk, dv): row·D but packed */
static inline int64_t ge2_attn_qkv_at(ge2_attn_geom g, int64_t row)
{
    return row / g.h * g.qkv_ld + row % g.h * g.d;
}

/* Which inputs and outputs hold what, in either form; k and v (dk and dv)
 * start k_at and v_at values into theirs (packed: into qkv, dqkv). */
typedef struct ge2_attn_slots {
    int q, k, v;    /* inputs */
    int dy, y, lse; /* ATTENTION_GRAD's inputs; the forward's y and lse are outputs 0 and 1 */
    int dq, dk, dv; /* ATTENTION_GRAD's outputs */
    int64_t k_at, v_at;
} ge2_attn_slots;

static inline ge2_attn_slots ge2_attn_slots_of(const ge2_node *node, ge2_attn_geom g)
{
    const bool packed = GE2_ATTRS(ge2_attention_attrs, node->attrs)->packed;
    const int q = node->op == GE2_OP_ATTENTION_GRAD ? 1 : 0;
    if (packed)
        return (ge2_attn_slots){q, q, q, 0, q + 1, q + 2, 0, 0, 0, g.h * g.d, 2 * g.h * g.d};
    return (ge2_attn_slots){q, q + 1, q + 2, 0, q + 3, q + 4, 0, 1, 2, 0, 0};
}

/* The score scale: the attrs', or 1/sqrt(D) */
static inline double ge2_attn_scale(const ge2_attention_attrs *a, int64_t d)
{
    return a->scale != 0 ? a->scale : 1.0 / sqrt((double)d);
}

/* Dropout on the attention weights (ge2_attention_attrs.dropout = p > 0, train steps
 * only): weight p_tj of head hd (ge2_attn_geom's flattened index) is kept,
 * scaled by 1/(1-p'), where its 16-bit uniform u satisfies u / 65536 >= p,
 * else zeroed; p' = ceil(65536·p) / 65536 is the chance of zeroing, so the
 * mean factor is 1. u is half j mod 2 (the low half first) of word (j mod 8) / 2
 * of draw (hd·T + t)·ceil(T/8) + j/8 of the op's stream
 * (ge2_philox_step_draw): one draw serves 8 neighbouring keys of a query,
 * so the tensor-core kernels spend little on it. lse stays the softmax's.
 * With m_tj the kept weight's factor (0 or 1/(1-p')), y_t = Σ_j p_tj m_tj v_j
 * and, as delta_t = dy_t·y_t still holds,
 *     dv_j = Σ_t p_tj m_tj dy_t,   ds_tj = p_tj (m_tj dy_t·v_j - delta_t).
 * The CPU and ge2's CUDA kernels draw the same masks; cuDNN's bf16
 * attention draws its own (cudnn.c). */
typedef struct ge2_attn_dropout {
    uint32_t threshold; /* u >= threshold keeps: ceil(p·65536); 0 keeps every weight (no dropout) */
    uint32_t stream;
    float scale;                /* 1/(1-p') (ge2_attn_drop_scale), rounded once to f32 */
    const ge2_control *control; /* the seed and the step's offset (device memory on CUDA) */
} ge2_attn_dropout;

/* The kept weights' factor 1/(1-p') = 65536 / (65536 - threshold) */
static inline double ge2_attn_drop_scale(uint32_t threshold) { return 65536.0 / (65536.0 - threshold); }

/* A launch's dropout: none in an eval step or at p = 0 */
static inline ge2_attn_dropout ge2_attn_dropout_of(const ge2_launch *l)
{
    const ge2_attention_attrs *a = GE2_ATTRS(ge2_attention_attrs, l->node->attrs);
    ge2_attn_dropout d = {0, a->stream, 1.0f, l->control};
    if (l->training && a->dropout > 0) {
        d.threshold = (uint32_t)ceil(a->dropout * 65536.0);
        d.scale = (float)ge2_attn_drop_scale(d.threshold);
    }
    return d;
}

/* The draw of keys 8·(j/8) .. 8·(j/8) + 7 of head hd's query t, T positions */
static inline GE2_HD ge2_philox4 ge2_attn_drop_draw(uint64_t seed, uint64_t offset, uint32_t stream, int64_t hd,
                                                    int64_t t, int64_t j, int64_t T)
{
    return ge2_philox_step_draw(seed, offset, stream, (uint64_t)((hd * T + t) * ((T + 7) / 8) + j / 8));
}

/* Whether key j's weight survives, r its group's draw */
static inline GE2_HD bool ge2_attn_drop_keeps(ge2_philox4 r, int64_t j, uint32_t threshold)
{
    return (r.v[(j & 7) >> 1] >> ((j & 1) * 16) & 0xffffu) >= threshold;
}

/* infer.c */
ge2_status ge2_infer_ATTENTION(const ge2_node *node, const ge2_desc *in, ge2_desc *out);
ge2_status ge2_infer_ATTENTION_GRAD(const ge2_node *node, const ge2_desc *in, ge2_desc *out);

/* backward.c */
ge2_status ge2_backward_attention(ge2_autograd *ag, const ge2_node *node, const int *dy);

/* cpu.c */
ge2_status ge2_cpu_attention(const ge2_launch *l);
ge2_status ge2_cpu_attention_grad(const ge2_launch *l);

/* cuda.cu (f32): enqueue on launch->stream, capturable. prepare grants the
 * tiled kernels their shared memory (and asks cudnn.c under bf16); under
 * TF32 and BF16 the tiled kernels run on TF32 tensor cores;
 * describe names the kernel a launch runs (the kernel report). */
ge2_status ge2_cuda_attention_prepare(ge2_launch *launch);
const char *ge2_cuda_attention_describe(const ge2_launch *launch);
ge2_status ge2_cuda_attention_launch(const ge2_launch *launch);
ge2_status ge2_cuda_attention_grad_launch(const ge2_launch *launch);
/* ge2_launch.scratch: cuDNN's (cudnn.c) where cuDNN takes the launch, else
 * f32 copies of the bf16 inputs (q, k, v, the backward's y) and of a bf16 y
 * for the fp32 kernels */
size_t ge2_cuda_attention_scratch_bytes(const ge2_launch *launch);

/* cuda.cu: the candidate "ge2_attention_3xtf32" (candidates.c): under
 * precision FP32 and FP16 the tiled kernels on tensor cores in three TF32
 * passes (tensor_cores.cu, fp32's accuracy). It applies where the tiled
 * kernels take the launch; its scratch is the op's own. */
bool ge2_cuda_attention_tc_applies(const ge2_launch *launch, char *why, size_t why_size);
ge2_status ge2_cuda_attention_tc_prepare(ge2_launch *launch);
const char *ge2_cuda_attention_tc_describe(const ge2_launch *launch);
ge2_status ge2_cuda_attention_tc_launch(const ge2_launch *launch);
ge2_status ge2_cuda_attention_grad_tc_launch(const ge2_launch *launch);

/* ops.c: q, k, v and the backward's y may be bf16 tensors (ge2_op_def.reads_bf16) */
bool ge2_attention_reads_bf16(const ge2_node *node, int input);

/* cudnn.c: precision BF16 through cuDNN's fused attention. scratch_bytes:
 * what the launch needs of ge2_launch.scratch (0: cuDNN does not take it);
 * prepare (bf16 launches) makes the launch's backend_data: its plan, or the
 * reason the fp32 kernels (described by fallback) run; runs says which;
 * launch enqueues the copies, the plan and the widening. */
size_t ge2_cudnn_attention_scratch_bytes(const ge2_launch *launch);
ge2_status ge2_cudnn_attention_prepare(ge2_launch *launch, const char *fallback);
bool ge2_cudnn_attention_runs(const ge2_launch *launch);
void ge2_cudnn_attention_release(ge2_launch *launch);
const char *ge2_cudnn_attention_describe(const ge2_launch *launch);
ge2_status ge2_cudnn_attention_launch(const ge2_launch *launch);

/* ops.c */
extern const ge2_op_def ge2_op_def_attention;
extern const ge2_op_def ge2_op_def_attention_grad;

#ifdef __cplusplus
}
#endif

#endif /* GE2_OPS_ATTENTION_ATTENTION_H */
