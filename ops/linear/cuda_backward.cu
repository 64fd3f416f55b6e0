// LINEAR's backward GEMMs with their epilogues fused (the fuse pass's backward_gemm rewrite,
// fusion/backward_gemm, makes them), through cuBLASLt with the plan machinery of gemm_lt.cu.
//
// In gemm_lt.cu's column-major mapping (cuBLASLt A = our in[1], B = our in[0],
// D = our out[0] transposed):
//   LINEAR_GRAD_WEIGHT  dW [out, in] = dzᵀ·x:   D [in, out] = x [in, B] · op_T(dz [out, B]).
//                       db [out] sums dz over the batch, which is cuBLASLt B's
//                       reduction dimension k: the BGRADB epilogue.
//   LINEAR_GRAD_INPUT   dx [B, in] = dz·W:      D [in, B] = W [in, out] · dz [out, B].
//                       act' of the previous layer and db [in] (D summed over
//                       its columns) are DRELU_BGRAD (reading LINEAR's relu
//                       bit-mask, same layout since that LINEAR's D was this
//                       D's shape) or DGELU_BGRAD (reading LINEAR's GELU_AUX z).
// What cuBLASLt has no epilogue for (other activations, db without act', any
// epilogue the heuristic refuses) runs as a plain GEMM plus the post kernels
// below: still one op, two or three kernels.
#include "kernels/cuda/gemm_lt_internal.h"

#include <cuda_bf16.h>

#include "kernels/cuda/bf16_copy.h"
#include "kernels/cuda/bf16_store.h"

#include "graph/alloc.h"
extern "C" {
#include "kernels/activation_math.h"
}
#include "ops/linear/linear.h"
#include "ops/reduce/reduce.h"

// ------------------------------------------------------------------ kernels

// LINEAR relu without RELU_AUX: y [rows, n] holds z; one thread per mask
// byte applies relu to its 8 elements in place and writes the byte (padding
// bits 0) of mask [rows, row_bytes].
__global__ void ge2_relu_mask_kernel(int64_t rows, int64_t n, int64_t row_bytes, float *y /* [rows, n] */,
                                     uint8_t *mask /* [rows, row_bytes] */)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < rows * row_bytes;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i / row_bytes, c0 = (i % row_bytes) * 8;
        unsigned byte = 0;
        for (int64_t c = c0; c < c0 + 8 && c < n; c++) {
            float v = y[r * n + c];
            if (v > 0.0f)
                byte |= 1u << (c - c0);
            else
                y[r * n + c] = 0.0f;
        }
        mask[i] = (uint8_t)byte;
    }
}

// d ⊙ act'(saved) for one element (saved NULL: d); saved f32 or bf16; into
// a bf16 dx (DX) with the fast forms (ge2_act_grad_for_bf16)
template <typename DX> static __device__ __forceinline__ float dact_of(const ge2_act_attrs &a, float d, float z)
{
    return d * (sizeof(DX) == 2 ? ge2_act_grad_for_bf16(a.act, z, a.from_output, a.slope)
                                : ge2_act_grad_f32(a.act, z, a.from_output, a.slope));
}

// act(z) stored into A, the form the forward's kernel stores there (ge2_act_for_bf16 into bf16)
template <typename A> static __device__ __forceinline__ float act_of(const ge2_act_attrs &a, float z)
{
    return sizeof(A) == 2 ? ge2_act_for_bf16(a.act, z, a.slope) : ge2_act_f32(a.act, z, a.slope);
}

template <typename DX, typename S>
static __device__ __forceinline__ float dact_at(const ge2_act_attrs &a, const S *saved, float d, int64_t i)
{
    return saved ? dact_of<DX>(a, d, ge2_load(saved + i)) : d;
}

// dx [rows, n] = d ⊙ act'(saved): saved is z or y [rows, n], or relu's
// bit-mask [rows, row_bytes]; neither: dx = d. d may be dx itself (in
// place); a bf16 dx (the storage pass's) is rounded at the store, a bf16 d
// or saved (likewise) widened. again (act(z) made again; saved is z): act(z) too,
// f32 or bf16, from the z this pass loads anyway. With quads (no mask; d,
// dx, saved and again aligned for them), four elements a thread.
template <typename S, typename D, typename DX, typename A>
__global__ void ge2_dact_kernel(int64_t rows, int64_t n, ge2_act_attrs a, const S *saved /* [rows, n] */,
                                const uint8_t *mask /* [rows, row_bytes] */, int64_t row_bytes, bool quads,
                                const D *d /* [rows, n] */, DX *dx /* [rows, n] */, A *again /* [rows, n] */)
{
    const int64_t total = rows * n, first = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    int64_t done = 0;
    if (quads) {
        done = total / 4 * 4;
        for (int64_t q = first; q < total / 4; q += stride) {
            const float4 v = ge2_load4(d + 4 * q);
            const int64_t i = 4 * q;
            if (!saved) {
                ge2_store4(dx + i, v);
                continue;
            }
            const float4 z = ge2_load4(saved + i);
            ge2_store4(dx + i, make_float4(dact_of<DX>(a, v.x, z.x), dact_of<DX>(a, v.y, z.y), dact_of<DX>(a, v.z, z.z),
                                           dact_of<DX>(a, v.w, z.w)));
            if (again)
                ge2_store4(again + i, make_float4(act_of<A>(a, z.x), act_of<A>(a, z.y), act_of<A>(a, z.z),
                                                  act_of<A>(a, z.w)));
        }
    }
    for (int64_t i = done + first; i < total; i += stride) {
        // the row and column only for the mask: 64-bit divisions cost the other paths their speed
        const float g = mask ? ge2_load(d + i) * (float)ge2_relu_mask_bit(mask + (i / n) * row_bytes, i % n)
                             : dact_at<DX>(a, saved, ge2_load(d + i), i);
        if (again)
            ge2_store(&again[i], act_of<A>(a, ge2_load(saved + i)));
        ge2_store(&dx[i], g);
    }
}

// ---------------------------------------------------------------- launchers

static bool has_bgrad(cublasLtEpilogue_t e)
{
    return e == CUBLASLT_EPILOGUE_DRELU_BGRAD || e == CUBLASLT_EPILOGUE_DGELU_BGRAD ||
           e == CUBLASLT_EPILOGUE_BGRADB;
}

ge2_status ge2_gemm_relu_mask_post(const ge2_launch *launch, const ge2_gemm_plan *p)
{
    (void)p;
    float *y = (float *)launch->out[0].data;
    uint8_t *mask = (uint8_t *)launch->out[1].data;
    int64_t rows = launch->out[0].shape.dim[0], n = launch->out[0].shape.dim[1];
    int64_t row_bytes = ge2_relu_mask_row_bytes(n);
    if (!y || !mask || rows * row_bytes == 0)
        return GE2_OK;
    ge2_relu_mask_kernel<<<ge2_cuda_blocks(rows * row_bytes, GE2_CUDA_THREADS), GE2_CUDA_THREADS, 0,
                           ge2_cuda_stream(launch)>>>(rows, n, row_bytes, y, mask);
    GE2_CUDA_CHECK(launch, "ge2_relu_mask_kernel");
    return GE2_OK;
}

// act(z) made again into output at (the plan's post_out; 0: none); NULL: not asked
static const ge2_view *again_of(const ge2_launch *launch, int at)
{
    return at > 0 && launch->out[at].data ? &launch->out[at] : NULL;
}

// LINEAR_GRAD_INPUT's db, when it has one and the plan gave it memory
static float *db_of(const ge2_launch *launch, int again)
{
    const int at = ge2_linear_grad_input_db(launch->n_out, again > 0 ? again : -1);
    return at >= 0 ? (float *)launch->out[at].data : NULL;
}

// dx = d ⊙ act'(saved) (saved absent: dx = d), saved S and d D (f32 or bf16),
// into an f32 or bf16 dx; act(z) made again, A, beside it (NULL: none)
template <typename S, typename D, typename DX, typename A>
static ge2_status dact_into(const ge2_launch *launch, const S *saved, const uint8_t *mask, const D *d, DX *dx,
                            A *again)
{
    const int64_t rows = launch->out[0].shape.dim[0], n = launch->out[0].shape.dim[1];
    const bool quads = !mask && ge2_store4_aligned(d) && ge2_store4_aligned(dx) &&
                       (!saved || ge2_store4_aligned(saved)) && (!again || ge2_store4_aligned(again));
    const int64_t work = quads ? (rows * n + 3) / 4 : rows * n;
    ge2_dact_kernel<<<ge2_cuda_blocks(work, GE2_CUDA_THREADS), GE2_CUDA_THREADS, 0, ge2_cuda_stream(launch)>>>(
        rows, n, (*GE2_ATTRS(ge2_act_attrs, launch->node->attrs)), saved, mask, ge2_relu_mask_row_bytes(n), quads, d, dx, again);
    GE2_CUDA_CHECK(launch, "ge2_dact_kernel");
    return GE2_OK;
}

// The same with act(z) as the storage pass left it: bf16, f32 or not asked
template <typename S, typename D, typename DX>
static ge2_status dact_as(const ge2_launch *launch, const ge2_gemm_plan *p, const S *saved, const uint8_t *mask,
                          const D *d, DX *dx)
{
    const ge2_view *again = again_of(launch, p->post_out);
    if (again && again->dtype == GE2_BF16)
        return dact_into(launch, saved, mask, d, dx, (__nv_bfloat16 *)again->data);
    return dact_into(launch, saved, mask, d, dx, again ? (float *)again->data : (float *)NULL);
}

template <typename D, typename DX>
static ge2_status dact(const ge2_launch *launch, const ge2_gemm_plan *p, const D *d, DX *dx)
{
    const ge2_view *saved = launch->n_in > 2 ? &launch->in[2] : NULL;
    if (saved && saved->dtype == GE2_BF16) // the storage pass's z
        return dact_as(launch, p, (const __nv_bfloat16 *)saved->data, NULL, d, dx);
    const bool mask = saved && saved->dtype == GE2_U8;
    return dact_as(launch, p, saved && !mask ? (const float *)saved->data : NULL,
                   mask ? (const uint8_t *)saved->data : NULL, d, dx);
}

// LINEAR_GRAD_INPUT's unfused rest: act' unless the epilogue applied it, db
// unless it summed it. A bf16 D the GEMM wrote (p->d_bf16: into dx, or into
// act(z)'s tensor when dx has z's memory): act' from it into dx, then db
// sums the rounded dx (what the weight gradient's GEMM reads as its dz). A
// bf16 dx through the scratch (p->d_scratch): the f32 result takes act' and
// gives db, then is rounded into dx (one pass when no db is wanted).
static ge2_status grad_input_post(const ge2_launch *launch, const ge2_gemm_plan *p)
{
    float *db = db_of(launch, p->post_out);
    int64_t rows = launch->out[0].shape.dim[0], n = launch->out[0].shape.dim[1];
    bool dact_done = p->epilogue != CUBLASLT_EPILOGUE_DEFAULT;
    if (p->d_bf16) {
        __nv_bfloat16 *dx = (__nv_bfloat16 *)launch->out[0].data;
        if (launch->n_in > 2 && !dact_done && rows * n > 0)
            GE2_TRY(dact(launch, p, (const __nv_bfloat16 *)ge2_gemm_d(p, launch), dx));
        if (db && !has_bgrad(p->epilogue))
            GE2_TRY(ge2_cuda_column_sums(launch, dx, GE2_BF16, rows, n, db));
        return GE2_OK;
    }
    float *d = (float *)ge2_gemm_d(p, launch);
    if (p->d_scratch && !db)
        return rows * n == 0 ? GE2_OK : dact(launch, p, d, (__nv_bfloat16 *)launch->out[0].data);
    float *dx = p->d_scratch ? d : (float *)launch->out[0].data; // the f32 dx (D itself unless D is act(z)'s tensor)
    if (launch->n_in > 2 && !dact_done && rows * n > 0)
        GE2_TRY(dact(launch, p, d, dx));
    if (db && !has_bgrad(p->epilogue)) // (no rows: zeros)
        GE2_TRY(ge2_cuda_column_sums(launch, dx, GE2_F32, rows, n, db));
    if (!p->d_scratch || rows * n == 0)
        return GE2_OK;
    ge2_bf16_spans spans = {0};
    ge2_bf16_span_add(&spans, d, launch->out[0].data, rows * n);
    return ge2_cuda_bf16_round(launch, &spans);
}

// LINEAR_GRAD_WEIGHT's unfused rest: db = column sums of dz unless BGRADB summed it.
static ge2_status grad_weight_post(const ge2_launch *launch, const ge2_gemm_plan *p)
{
    float *db = launch->n_out > 1 ? (float *)launch->out[1].data : NULL;
    if (db && !has_bgrad(p->epilogue))
        GE2_TRY(ge2_cuda_column_sums(launch, launch->in[0].data, launch->in[0].dtype, launch->in[0].shape.dim[0],
                                     launch->in[0].shape.dim[1], db));
    return GE2_OK;
}

// dz [rows, k], w [k, n][, saved] -> dx [rows, n] = (dz·w) ⊙ act'(saved).
// The bias-gradient form (out[1]) has no tiled equivalent: its column sums
// run across the CTAs that split the rows (fusion/backward_gemm never asks
// it); nor has act(z) made again (its plan binds no tiled GEMM).
static bool grad_input_tiled_bind(const ge2_launch *launch, ge2_tiled_gemm *g)
{
    const ge2_view *dz = &launch->in[0], *w = &launch->in[1];
    memset(g, 0, sizeof *g);
    if (launch->n_out > 1 && launch->out[1].data)
        return false;
    g->m = dz->shape.dim[0];
    g->k = dz->shape.dim[1];
    g->n = w->shape.dim[1];
    g->a = (const float *)dz->data;
    g->a_m = g->k;
    g->a_k = 1;
    g->b = (const float *)w->data;
    g->b_k = g->n;
    g->b_n = 1;
    g->c = (float *)launch->out[0].data;
    g->epilogue = GE2_TILED_DACT;
    g->act = GE2_ACT_NONE;
    if (launch->n_in > 2) {
        const ge2_act_attrs *a = GE2_ATTRS(ge2_act_attrs, launch->node->attrs);
        g->act = a->act;
        g->slope = a->slope;
        g->from_output = a->from_output;
        if (launch->in[2].dtype == GE2_U8)
            g->saved_mask = (const uint8_t *)launch->in[2].data;
        else
            g->saved = (const float *)launch->in[2].data;
    }
    return ge2_tiled_supports(g, NULL, 0);
}

// dz [rows, m], x [rows, n] -> dW [m, n] = dzᵀ·x[, db [m] = row sums of dzᵀ]:
// A(i, l) = dz[l, i], B = x, k = rows.
static bool grad_weight_tiled_bind(const ge2_launch *launch, ge2_tiled_gemm *g)
{
    const ge2_view *dz = &launch->in[0], *x = &launch->in[1];
    memset(g, 0, sizeof *g);
    g->m = dz->shape.dim[1];
    g->k = dz->shape.dim[0];
    g->n = x->shape.dim[1];
    g->a = (const float *)dz->data;
    g->a_m = 1;
    g->a_k = g->m;
    g->b = (const float *)x->data;
    g->b_k = g->n;
    g->b_n = 1;
    g->c = (float *)launch->out[0].data;
    g->row_sums = launch->n_out > 1 ? (float *)launch->out[1].data : NULL;
    g->epilogue = GE2_TILED_PLAIN;
    return ge2_tiled_supports(g, NULL, 0);
}

// Checks a backward GEMM's launch (f32 2-D operands a, b; in[mask_view] may
// be relu's bit-mask) and allocates its plan.
static ge2_status new_plan(ge2_launch *launch, const char *a, const char *b, int mask_view, ge2_gemm_plan **out)
{
    GE2_TRY(ge2_gemm_check_launch(launch, mask_view));
    const ge2_view *x = &launch->in[0], *y = &launch->in[1];
    char s0[64], s1[64];
    if (x->shape.ndim != 2 || y->shape.ndim != 2)
        return ge2_error(GE2_ERR_SHAPE, "ge2_%s (node %d): %s is %s, %s is %s: want 2-D", ge2_cuda_op_name(launch),
                         launch->node->id, a, ge2_shape_str(x->shape, s0, sizeof s0), b,
                         ge2_shape_str(y->shape, s1, sizeof s1));
    *out = (ge2_gemm_plan *)ge2_calloc(1, sizeof **out);
    if (!*out)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_%s (node %d): out of host memory", ge2_cuda_op_name(launch),
                         launch->node->id);
    return GE2_OK;
}

// The fused epilogue first; if the heuristic offers nothing for it (or it
// fails to set up), the plain GEMM with `post` doing the rest.
static ge2_status prepare_with_fallback(ge2_launch *launch, ge2_gemm_plan *p, ge2_gemm_operand a_lt,
                                        ge2_gemm_operand b_lt, ge2_gemm_operand d, bool trans_a_lt,
                                        bool trans_b_lt)
{
    ge2_status st = ge2_gemm_make_layouts(launch, p, a_lt, b_lt, d, 1);
    int found = 0;
    if (st == GE2_OK && p->epilogue != CUBLASLT_EPILOGUE_DEFAULT &&
        ge2_gemm_plan_try(p, launch, trans_a_lt, trans_b_lt, d.cols, &found) != GE2_OK) {
        ge2_clear_error();
        found = 0;
    }
    if (st == GE2_OK && found == 0) {
        p->epilogue = CUBLASLT_EPILOGUE_DEFAULT;
        p->bias_view = p->aux_view = GE2_GEMM_NO_VIEW;
        st = ge2_gemm_plan_try(p, launch, trans_a_lt, trans_b_lt, d.cols, &found);
    } else {
        p->post = NULL; // the fused epilogue did all of it
    }
    return ge2_gemm_plan_commit(launch, p, st, found);
}

// dz [B, out], w [out, in][, saved] -> dx [B, in][, db [in]][, act(z)
// into out[again] (-1: none)]; act' (and db) in cuBLASLt's epilogue when
// fuse and it has one, else in the post kernel
static ge2_status grad_input_prepare_at(ge2_launch *launch, bool fuse, int again_at)
{
    if (again_at > 0 && again_of(launch, again_at) && !launch->out[0].data)
        return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_%s (node %d): act(z) is asked for without dx; "
                         "the CUDA kernels make it beside dx", ge2_cuda_op_name(launch), launch->node->id);
    // dx on z's memory (the planner's takeover, ops.c): the GEMM must not
    // write over z before the post step reads it, so D goes into act(z)'s
    // tensor (same type), which the post step then overwrites element by
    // element; an f32 D in the scratch needs no such room
    int d_out = 0;
    if (again_at >= 0 && launch->n_in > 2 && launch->out[0].data == launch->in[2].data &&
        !ge2_cuda_linear_d_in_scratch(launch)) {
        if (launch->out[again_at].dtype != launch->out[0].dtype)
            return ge2_error(GE2_ERR_STATE, "ge2_%s (node %d): dx has z's memory but act(z) is %s, "
                             "dx %s: no room for the GEMM's result", ge2_cuda_op_name(launch), launch->node->id,
                             ge2_dtype_name(launch->out[again_at].dtype), ge2_dtype_name(launch->out[0].dtype));
        d_out = again_at;
    }
    ge2_gemm_plan *p;
    GE2_TRY(new_plan(launch, "dz", "w", GE2_GEMM_IN(2), &p)); // relu's bit-mask as in[2]
    p->post_out = again_at > 0 ? again_at : 0;
    const int64_t rows = launch->in[0].shape.dim[0], k = launch->in[0].shape.dim[1], n = launch->in[1].shape.dim[1];
    const ge2_act_attrs *a = GE2_ATTRS(ge2_act_attrs, launch->node->attrs);
    const bool mask = launch->n_in > 2 && launch->in[2].dtype == GE2_U8;
    // (cuBLASLt's DGELU reads an f32 z: a bf16 one, the storage pass's, goes to ge2's kernel)
    const bool gelu_z = launch->n_in > 2 && a->act == GE2_ACT_GELU_TANH && !a->from_output && n % 8 == 0 &&
                        launch->in[2].dtype == GE2_F32;
    const bool want_db = db_of(launch, p->post_out) != NULL;
    // act(z) made again comes from ge2's act' kernel, which loads z anyway
    // (after the GEMM: so it needs dx, checked above)
    fuse = fuse && p->post_out == 0;
    p->n_out = rows * n;
    p->tiled_bind = p->post_out == 0 ? grad_input_tiled_bind : NULL;
    // dx stored in bf16 (the storage pass's): the GEMM writes it in bf16,
    // the post step applies act' and sums db from it (cuBLASLt's DGELU
    // epilogues on bf16 were slower than the plain GEMM and the post step:
    // bench/RESULTS.md)
    p->d_bf16 = ge2_cuda_linear_d_bf16(launch);
    p->d_scratch = ge2_cuda_linear_d_in_scratch(launch);
    p->d_out = d_out;
    fuse = fuse && !p->d_scratch && !p->d_bf16;
    if (launch->n_in > 2 || want_db || p->d_scratch) {
        p->post = grad_input_post;
        p->post_name = launch->n_in > 2 ? (want_db ? "dact + db" : "dact") : want_db ? "db" : "bf16 store";
    }
    p->epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    if (fuse && (mask || gelu_z)) {
        p->epilogue = mask ? (want_db ? CUBLASLT_EPILOGUE_DRELU_BGRAD : CUBLASLT_EPILOGUE_DRELU)
                           : (want_db ? CUBLASLT_EPILOGUE_DGELU_BGRAD : CUBLASLT_EPILOGUE_DGELU);
        p->aux_view = GE2_GEMM_IN(2);
        p->aux_ld = mask ? ge2_relu_mask_row_bytes(n) * 8 : n;
        p->bias_view = want_db ? GE2_GEMM_OUT(1) : GE2_GEMM_NO_VIEW;
    }
    // cuBLASLt A = w stored [out, in] (op N), B = dz stored [B, out] (op N), D = dx [B, in].
    ge2_gemm_operand wa = {k, n, 0}, dzb = {rows, k, 0}, dd = {rows, n, 0};
    return prepare_with_fallback(launch, p, wa, dzb, dd, false, false);
}

// The fused act' epilogue or the plain GEMM and the post kernel, whichever
// is faster: cuBLASLt's DGELU epilogue can cost several plain GEMMs
// (bench/RESULTS.md has the measurement)
static ge2_status grad_input_prepare(ge2_launch *launch, bool fuse) { return grad_input_prepare_at(launch, fuse, -1); }

extern "C" ge2_status ge2_cuda_linear_grad_input_prepare(ge2_launch *launch)
{
    return ge2_gemm_prepare_timed(launch, grad_input_prepare);
}

// (no epilogue to time against: act(z) made again takes the post kernel)
extern "C" ge2_status ge2_cuda_linear_grad_input_prepare_with(ge2_launch *launch, int again)
{
    return again < 0 ? ge2_cuda_linear_grad_input_prepare(launch) : grad_input_prepare_at(launch, false, again);
}

// dz [B, out], x [B, in] -> dw [out, in][, db [out]]
extern "C" ge2_status ge2_cuda_linear_grad_weight_prepare(ge2_launch *launch)
{
    ge2_gemm_plan *p;
    GE2_TRY(new_plan(launch, "dz", "x", GE2_GEMM_NO_VIEW, &p));
    const int64_t rows = launch->in[0].shape.dim[0], m = launch->in[0].shape.dim[1], n = launch->in[1].shape.dim[1];
    const bool want_db = launch->n_out > 1 && launch->out[1].data;
    p->n_out = m * n;
    p->tiled_bind = grad_weight_tiled_bind;
    p->post = want_db ? grad_weight_post : NULL;
    p->post_name = "db";
    // BGRADB sums cuBLASLt's B as the GEMM reads it: under bf16 that is the
    // rounded copy of an f32 dz, and db is a reduction of dz, which then
    // stays fp32 (the post kernel sums dz itself, as the CPU does). A bf16
    // dz tensor (the storage pass's) is what both sum.
    const bool bgrad = want_db && (!ge2_launch_half_gemm(launch) || launch->in[0].dtype == GE2_BF16);
    p->epilogue = bgrad ? CUBLASLT_EPILOGUE_BGRADB : CUBLASLT_EPILOGUE_DEFAULT;
    p->bias_view = bgrad ? GE2_GEMM_OUT(1) : GE2_GEMM_NO_VIEW;
    // cuBLASLt A = x stored [B, in] (op N), B = dz stored [B, out] (op T), D = dw [out, in].
    ge2_gemm_operand xa = {rows, n, 0}, dzb = {rows, m, 0}, dd = {m, n, 0};
    return prepare_with_fallback(launch, p, xa, dzb, dd, false, true);
}

extern "C" ge2_status ge2_cuda_linear_grad_input_launch(const ge2_launch *launch)
{
    return ge2_gemm_enqueue(launch, "linear_grad_input");
}

extern "C" ge2_status ge2_cuda_linear_grad_weight_launch(const ge2_launch *launch)
{
    return ge2_gemm_enqueue(launch, "linear_grad_weight");
}
