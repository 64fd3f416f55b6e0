// LINEAR and MATMUL on CUDA: plans for the cuBLASLt GEMM wrapper
// (kernels/cuda/gemm_lt.cu), with the epilogue each op needs, and ge2's tiled
// GEMM as the other candidate the kernel registry times.
#include "kernels/cuda/gemm_lt_internal.h"

#include "graph/alloc.h"
extern "C" {
#include "kernels/activation_math.h"
#include "ops/linear/linear.h"
}

#include <stdint.h>
#include <string.h>

// The plan's epilogue choice for LINEAR, fused first; `fused` false asks for
// the plain fallback (GEMM + bias, activation by ge2_gemm_act_kernel, the
// relu bit-mask by ge2_gemm_relu_mask_post). out[1] is z (want_z) or, for
// relu, the bit-mask (want_mask): see kernels/relu_mask.h.
static void linear_choose(ge2_gemm_plan *p, bool want_z, bool want_mask, bool want_y, bool fused)
{
    const bool bias = p->has_bias;
    const cublasLtEpilogue_t plain = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    p->epilogue = plain;
    p->gemm_writes_z = want_z;
    p->act_kernel = want_y && (want_z || p->act != GE2_ACT_NONE);
    p->aux_view = GE2_GEMM_NO_VIEW;
    p->post = NULL;
    if (want_mask && want_y) {
        // relu with its bit-mask: RELU_AUX writes exactly the layout LINEAR_GRAD_INPUT's DRELU reads
        p->act_kernel = false;
        if (fused) {
            p->epilogue = bias ? CUBLASLT_EPILOGUE_RELU_AUX_BIAS : CUBLASLT_EPILOGUE_RELU_AUX;
            p->aux_view = GE2_GEMM_OUT(1);
        } else {
            p->post = ge2_gemm_relu_mask_post;
            p->post_name = "relu mask";
        }
        return;
    }
    if (!fused || !want_y)
        return;
    if (!want_z && p->act == GE2_ACT_RELU) {
        p->epilogue = bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
        p->act_kernel = false;
    } else if (!want_z && p->act == GE2_ACT_GELU_TANH) {
        p->epilogue = bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
        p->act_kernel = false;
    } else if (want_z && p->act == GE2_ACT_GELU_TANH) {
        // cuBLASLt's aux output is exactly the stash: the GELU input.
        p->epilogue = bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
        p->aux_view = GE2_GEMM_OUT(1);
        p->gemm_writes_z = false;
        p->act_kernel = false;
    }
}

// LINEAR's backward GEMMs (DRELU_BGRAD / DGELU_BGRAD / BGRADB) live in ops/linear/cuda_backward.cu.

// x [rows, in], w [out, in][, b [out]] -> y [rows, out][, z or relu's mask]:
// A = x, B(l, j) = w[j, l].
static bool linear_tiled_bind(const ge2_launch *launch, ge2_tiled_gemm *g)
{
    const ge2_view *x = &launch->in[0], *w = &launch->in[1];
    const int64_t in = x->shape.dim[x->shape.ndim - 1];
    memset(g, 0, sizeof *g);
    g->m = in > 0 ? ge2_shape_numel(x->shape) / in : 0;
    g->n = w->shape.dim[0];
    g->k = in;
    g->a = (const float *)x->data;
    g->a_m = in;
    g->a_k = 1;
    g->b = (const float *)w->data;
    g->b_k = 1;
    g->b_n = in;
    g->c = (float *)launch->out[0].data;
    g->epilogue = GE2_TILED_BIAS_ACT;
    g->act = GE2_ATTRS(ge2_linear_attrs, launch->node->attrs)->act;
    g->slope = GE2_ATTRS(ge2_linear_attrs, launch->node->attrs)->slope;
    g->bias = launch->n_in >= 3 ? (const float *)launch->in[2].data : NULL;
    if (launch->n_out >= 2 && launch->out[1].data) {
        if (launch->out[1].dtype == GE2_U8)
            g->mask = (uint8_t *)launch->out[1].data;
        else
            g->z = (float *)launch->out[1].data;
    }
    return ge2_tiled_supports(g, NULL, 0);
}

// The plan with cuBLASLt's fused epilogue where it has one (fuse), else
// the plain GEMM with ge2's act kernel and post step.
static ge2_status linear_prepare(ge2_launch *launch, bool fuse)
{
    int node_id = launch->node->id;
    GE2_TRY(ge2_gemm_check_launch(launch, GE2_GEMM_OUT(1))); // relu's bit-mask beside y
    const ge2_view *x = &launch->in[0], *w = &launch->in[1];
    if (x->shape.ndim < 1 || w->shape.ndim != 2)
        return ge2_error(GE2_ERR_SHAPE, "ge2_linear (node %d): x has %d dims, w has %d (want w [out,in])",
                         node_id, x->shape.ndim, w->shape.ndim);
    const int64_t in = x->shape.dim[x->shape.ndim - 1];
    const int64_t out_f = w->shape.dim[0];
    if (w->shape.dim[1] != in) {
        char xs[64], ws[64];
        return ge2_error(GE2_ERR_SHAPE, "ge2_linear: inner dims differ: x is %s, w is %s",
                         ge2_shape_str(x->shape, xs, sizeof xs), ge2_shape_str(w->shape, ws, sizeof ws));
    }
    const int64_t rows = in > 0 ? ge2_shape_numel(x->shape) / in : 0;

    ge2_gemm_plan *p = (ge2_gemm_plan *)ge2_calloc(1, sizeof *p);
    if (!p)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_linear (node %d): out of host memory", node_id);
    p->has_bias = launch->n_in >= 3 && launch->in[2].data != NULL;
    p->bias_view = p->has_bias ? GE2_GEMM_IN(2) : GE2_GEMM_NO_VIEW;
    p->act = GE2_ATTRS(ge2_linear_attrs, launch->node->attrs)->act;
    p->slope = GE2_ATTRS(ge2_linear_attrs, launch->node->attrs)->slope;
    p->n_out = rows * out_f;
    p->tiled_bind = linear_tiled_bind;
    const bool want_y = launch->out[0].data != NULL;
    const bool stash = launch->n_out >= 2 && launch->out[1].data != NULL;
    const bool want_mask = stash && launch->out[1].dtype == GE2_U8, want_z = stash && !want_mask;
    // y or z stored in bf16 (the storage pass's): the GEMM writes D in bf16
    // (p->d_bf16: the bias is bf16 too) and the act kernel y from it; else
    // the act kernel rounds them at its store, from the GEMM's f32 D (an f32
    // z stash, else the scratch)
    const bool y_bf16 = want_y && launch->out[0].dtype == GE2_BF16, z_bf16 = want_z && launch->out[1].dtype == GE2_BF16;
    fuse = fuse && !y_bf16 && !z_bf16;
    p->d_bf16 = ge2_cuda_linear_d_bf16(launch);
    p->d_scratch = ge2_cuda_linear_d_in_scratch(launch);
    if (p->has_bias && launch->in[2].dtype == GE2_BF16 && !p->d_bf16) {
        ge2_free(p);
        return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_linear (node %d): a bf16 bias needs y%s stored in bf16 (cuBLASLt's "
                         "bias takes the result's type); y is %s", node_id, want_z ? " and its z stash" : "",
                         ge2_dtype_name(launch->out[0].dtype));
    }
    if (z_bf16 && !want_y) {
        ge2_free(p);
        return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_linear (node %d): a bf16 z stash is written beside y; this key "
                         "wants z without y", node_id);
    }
    // the mask's rows are out_f bits padded to 128 (CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD counts bits);
    // GELU's z has D's leading dimension
    p->aux_ld = want_mask ? ge2_relu_mask_row_bytes(out_f) * 8 : out_f;

    // cuBLASLt A = W stored [out, in] (op T), B = x stored [rows, in] (op N), D = [rows, out].
    ge2_gemm_operand wa = {out_f, in, 0}, xb = {rows, in, 0}, dd = {rows, out_f, 0};
    ge2_status st = ge2_gemm_make_layouts(launch, p, wa, xb, dd, 1);
    int found = 0;
    if (st == GE2_OK && fuse) {
        linear_choose(p, want_z, want_mask, want_y, true);
        // GELU's aux ld must be a multiple of 8 elements. Any failure of the
        // fused epilogue only means the plain one is tried next.
        bool aux = p->epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || p->epilogue == CUBLASLT_EPILOGUE_GELU_AUX;
        if (!(aux && out_f % 8 != 0) && ge2_gemm_plan_try(p, launch, true, false, out_f, &found) != GE2_OK) {
            ge2_clear_error();
            found = 0;
        }
    }
    if (st == GE2_OK && found == 0) {
        linear_choose(p, want_z, want_mask, want_y, false);
        if (!p->d_bf16) { // the act kernel rounds y (and stores the bf16 z beside it) from the f32 D
            p->act_kernel = p->act_kernel || y_bf16 || z_bf16;
            p->gemm_writes_z = p->gemm_writes_z && !z_bf16;
        }
        st = ge2_gemm_plan_try(p, launch, true, false, out_f, &found);
    }
    return ge2_gemm_plan_commit(launch, p, st, found);
}

// A fused activation epilogue or the plain GEMM with ge2's act kernel,
// whichever is faster: an epilogue that also writes z (GELU_AUX_BIAS) can
// cost several plain GEMMs (bench/RESULTS.md has the measurement)
extern "C" ge2_status ge2_cuda_linear_prepare(ge2_launch *launch)
{
    return ge2_gemm_prepare_timed(launch, linear_prepare);
}

extern "C" ge2_status ge2_cuda_linear_launch(const ge2_launch *launch)
{
    return ge2_gemm_enqueue(launch, "linear");
}

extern "C" void ge2_cuda_linear_release(ge2_launch *launch)
{
    ge2_gemm_plan_free((ge2_gemm_plan *)launch->backend_data);
    launch->backend_data = NULL;
}

extern "C" bool ge2_cuda_linear_d_bf16(const ge2_launch *launch)
{
    const bool y = launch->out[0].data != NULL;
    if (launch->node->op == GE2_OP_LINEAR_GRAD_WEIGHT) // dW, a gradient: the GEMM writes it in f32
        return false;
    if (launch->node->op != GE2_OP_LINEAR) // dx or y: no stash, no bias
        return y && launch->out[0].dtype == GE2_BF16;
    const bool stash = launch->n_out > 1 && launch->out[1].data;
    const bool bias_ok = launch->n_in < 3 || !launch->in[2].data || launch->in[2].dtype == GE2_BF16;
    return bias_ok && ge2_linear_d_bf16(y, launch->out[0].dtype, stash, stash ? launch->out[1].dtype : GE2_F32);
}

extern "C" bool ge2_cuda_linear_d_in_scratch(const ge2_launch *launch)
{
    const bool linear = launch->node->op == GE2_OP_LINEAR;
    const bool stash = linear && launch->n_out > 1 && launch->out[1].data && launch->out[1].dtype != GE2_U8;
    const bool y_bf16 = launch->out[0].data && launch->out[0].dtype == GE2_BF16;
    const bool z_bf16 = stash && launch->out[1].dtype == GE2_BF16;
    // an f32 z stash holds D itself, and a bf16 D its own tensor
    return (y_bf16 || z_bf16) && !(stash && !z_bf16) && !ge2_cuda_linear_d_bf16(launch);
}

// The bf16 copies of the f32 operands (a bf16 tensor is read in place) and
// the f32 result on its way to a bf16 out[0]
extern "C" size_t ge2_cuda_gemm_bf16_scratch_bytes(const ge2_launch *launch)
{
    if (launch->n_in < 2 || !ge2_launch_half_gemm(launch))
        return 0;
    size_t bytes = 0;
    for (int i = 0; i < 2; i++)
        if (launch->in[i].dtype != GE2_BF16)
            bytes += ge2_bf16_copy_bytes(ge2_shape_numel(launch->in[i].shape));
    if (ge2_cuda_linear_d_in_scratch(launch))
        bytes += 2 * ge2_bf16_copy_bytes(ge2_shape_numel(launch->out[0].shape));
    return bytes;
}

extern "C" const char *ge2_cuda_linear_describe(const ge2_launch *launch)
{
    const ge2_gemm_plan *p = (const ge2_gemm_plan *)launch->backend_data;
    return p ? p->description : "cublasLt (not prepared)";
}

// 2-D MATMUL y [m, n] = op(a)·op(b) as a tiled GEMM: the transposes become strides.
static bool matmul_tiled_bind(const ge2_launch *launch, ge2_tiled_gemm *g)
{
    const ge2_view *a = &launch->in[0], *b = &launch->in[1];
    const bool ta = GE2_ATTRS(ge2_matmul_attrs, launch->node->attrs)->trans_a, tb = GE2_ATTRS(ge2_matmul_attrs, launch->node->attrs)->trans_b;
    memset(g, 0, sizeof *g);
    if (a->shape.ndim != 2 || b->shape.ndim != 2)
        return false;
    const int64_t ra = a->shape.dim[0], ca = a->shape.dim[1], rb = b->shape.dim[0], cb = b->shape.dim[1];
    g->m = ta ? ca : ra;
    g->k = ta ? ra : ca;
    g->n = tb ? rb : cb;
    g->a = (const float *)a->data;
    g->a_m = ta ? 1 : ca;
    g->a_k = ta ? ca : 1;
    g->b = (const float *)b->data;
    g->b_k = tb ? 1 : cb;
    g->b_n = tb ? cb : 1;
    g->c = (float *)launch->out[0].data;
    g->epilogue = GE2_TILED_PLAIN;
    return ge2_tiled_supports(g, NULL, 0);
}

// MATMUL: y = op(a)·op(b), 2-D or batched 3-D; a 2-D operand of a batched
// product is shared by every batch item (batch stride 0).
extern "C" ge2_status ge2_cuda_matmul_prepare(ge2_launch *launch)
{
    int node_id = launch->node->id;
    GE2_TRY(ge2_gemm_check_launch(launch, GE2_GEMM_NO_VIEW));
    const ge2_view *a = &launch->in[0], *b = &launch->in[1];
    const bool ta = GE2_ATTRS(ge2_matmul_attrs, launch->node->attrs)->trans_a, tb = GE2_ATTRS(ge2_matmul_attrs, launch->node->attrs)->trans_b;
    char as[64], bs[64];
    if (a->shape.ndim < 2 || a->shape.ndim > 3 || b->shape.ndim < 2 || b->shape.ndim > 3)
        return ge2_error(GE2_ERR_SHAPE, "ge2_matmul (node %d): a is %s, b is %s: want 2-D or 3-D", node_id,
                         ge2_shape_str(a->shape, as, sizeof as), ge2_shape_str(b->shape, bs, sizeof bs));
    const int an = a->shape.ndim, bn = b->shape.ndim;
    ge2_gemm_operand oa = {a->shape.dim[an - 2], a->shape.dim[an - 1], 0};
    ge2_gemm_operand ob = {b->shape.dim[bn - 2], b->shape.dim[bn - 1], 0};
    const int64_t m = ta ? oa.cols : oa.rows, k = ta ? oa.rows : oa.cols;
    const int64_t kb = tb ? ob.cols : ob.rows, n = tb ? ob.rows : ob.cols;
    int64_t batch = 1;
    if (an == 3)
        batch = a->shape.dim[0];
    if (bn == 3) {
        if (an == 3 && b->shape.dim[0] != batch)
            return ge2_error(GE2_ERR_SHAPE, "ge2_matmul (node %d): batch dims differ: a is %s, b is %s", node_id,
                             ge2_shape_str(a->shape, as, sizeof as), ge2_shape_str(b->shape, bs, sizeof bs));
        batch = b->shape.dim[0];
    }
    if (k != kb)
        return ge2_error(GE2_ERR_SHAPE, "ge2_matmul: inner dims differ: a is %s%s, b is %s%s",
                         ge2_shape_str(a->shape, as, sizeof as), ta ? " (transposed)" : "",
                         ge2_shape_str(b->shape, bs, sizeof bs), tb ? " (transposed)" : "");
    if (an == 3)
        oa.batch_stride = oa.rows * oa.cols;
    if (bn == 3)
        ob.batch_stride = ob.rows * ob.cols;
    ge2_gemm_operand od = {m, n, m * n};

    ge2_gemm_plan *p = (ge2_gemm_plan *)ge2_calloc(1, sizeof *p);
    if (!p)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_matmul (node %d): out of host memory", node_id);
    p->epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    p->n_out = batch * m * n;
    p->d_bf16 = ge2_cuda_linear_d_bf16(launch); // the storage pass's: every reader reads y in bf16
    p->tiled_bind = matmul_tiled_bind;
    // Column-major Yᵀ = op(b)ᵀ·op(a)ᵀ: cuBLASLt A = b with b's transpose flag, B = a with a's.
    ge2_status st = ge2_gemm_make_layouts(launch, p, ob, oa, od, batch);
    int found = 0;
    if (st == GE2_OK)
        st = ge2_gemm_plan_try(p, launch, tb, ta, n, &found);
    return ge2_gemm_plan_commit(launch, p, st, found);
}

extern "C" ge2_status ge2_cuda_matmul_launch(const ge2_launch *launch)
{
    return ge2_gemm_enqueue(launch, "matmul");
}

extern "C" void ge2_cuda_matmul_release(ge2_launch *launch)
{
    ge2_cuda_linear_release(launch);
}

extern "C" const char *ge2_cuda_matmul_describe(const ge2_launch *launch)
{
    return ge2_cuda_linear_describe(launch);
}
