// LINEAR and MATMUL through cuBLASLt, f32 (precision BF16: bf16 copies of the
// operands, fp32 sums and output).
//
// ge2 tensors are row-major; cuBLASLt is column-major. A row-major [r, c]
// buffer read column-major is its transpose [c, r] with ld = c, so every
// row-major product C = A·B is issued as the column-major product
// Cᵀ = Bᵀ·Aᵀ: cuBLASLt's first operand is always our second input, its second
// operand our first. LINEAR y = act(x·Wᵀ + b) with x [B, in], W [out, in] is
// then yᵀ [out, B] = op_T(W viewed [in, out]) · (x viewed [in, B]), and the
// bias [out] runs along yᵀ's rows, which is exactly what cuBLASLt's BIAS
// epilogues broadcast.
//
// Everything that costs host time (descriptors, layouts, the heuristic query)
// happens once per graph key in prepare; launch only refreshes the epilogue
// pointers (host-side descriptor writes, capture-safe) and enqueues.
#include "kernels/cuda/gemm_lt_internal.h"

#include "graph/alloc.h"
extern "C" {
#include "kernels/activation_math.h"
}

#include <cuda_bf16.h>

#include "kernels/cuda/bf16_copy.h"
#include "kernels/cuda/bf16_store.h"
#include "kernels/cuda/candidates.h"
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

// ------------------------------------------------------------------ kernels

// The activation cuBLASLt has no epilogue for (or that must keep z): y = act(z).
// z == y is allowed (in place when no stash is wanted).
// y = act(z). z and y may be bf16 (stored so by the storage pass): widened
// at the load, rounded at the store; z_out (NULL: none) takes a bf16 copy
// of an f32 z, the stash stored in bf16.
// With quads (all aligned for them), four elements a thread, the tail one by one.
// act(z) for a y of type Y: a bf16 y takes the fast forms (ge2_act_for_bf16)
static __device__ __forceinline__ float act_into(const float *, ge2_activation act, float z, float slope)
{
    return ge2_act_f32(act, z, slope);
}
static __device__ __forceinline__ float act_into(const __nv_bfloat16 *, ge2_activation act, float z, float slope)
{
    return ge2_act_for_bf16(act, z, slope);
}

template <typename Z, typename Y>
__global__ void ge2_gemm_act_kernel(int64_t n, ge2_activation act, float slope, bool quads,
                                    const Z *z /* [B, out] */, Y *y /* [B, out] */,
                                    __nv_bfloat16 *z_out /* [B, out] */)
{
    const int64_t first = blockIdx.x * (int64_t)blockDim.x + threadIdx.x, stride = (int64_t)gridDim.x * blockDim.x;
    int64_t done = 0;
    if (quads) {
        done = n / 4 * 4;
        for (int64_t i = first; i < n / 4; i += stride) {
            const float4 v = ge2_load4(z + 4 * i);
            ge2_store4(y + 4 * i, make_float4(act_into(y, act, v.x, slope), act_into(y, act, v.y, slope),
                                              act_into(y, act, v.z, slope), act_into(y, act, v.w, slope)));
            if (z_out)
                ge2_store4(z_out + 4 * i, v);
        }
    }
    for (int64_t i = done + first; i < n; i += stride) {
        const float v = ge2_load(z + i);
        ge2_store(&y[i], act_into(y, act, v, slope));
        if (z_out)
            ge2_store(&z_out[i], v);
    }
}

template <typename Z, typename Y>
static void act_kernel(const ge2_gemm_plan *p, const Z *z, Y *y, __nv_bfloat16 *z_out, cudaStream_t stream)
{
    const bool quads = ge2_store4_aligned(z) && ge2_store4_aligned(y) && (!z_out || ge2_store4_aligned(z_out));
    ge2_gemm_act_kernel<<<ge2_cuda_blocks(quads ? (p->n_out + 3) / 4 : p->n_out, GE2_CUDA_THREADS), GE2_CUDA_THREADS,
                          0, stream>>>(p->n_out, p->act, p->slope, quads, z, y, z_out);
}

// ---------------------------------------------------------------- launchers

const char *ge2_gemm_lt_status_name(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "cuBLAS status (unknown)";
    }
}

static const char *epilogue_name(cublasLtEpilogue_t e)
{
    switch (e) {
    case CUBLASLT_EPILOGUE_DEFAULT: return "DEFAULT";
    case CUBLASLT_EPILOGUE_RELU: return "RELU";
    case CUBLASLT_EPILOGUE_BIAS: return "BIAS";
    case CUBLASLT_EPILOGUE_RELU_BIAS: return "RELU_BIAS";
    case CUBLASLT_EPILOGUE_RELU_AUX: return "RELU_AUX";
    case CUBLASLT_EPILOGUE_RELU_AUX_BIAS: return "RELU_AUX_BIAS";
    case CUBLASLT_EPILOGUE_DRELU: return "DRELU";
    case CUBLASLT_EPILOGUE_DGELU: return "DGELU";
    case CUBLASLT_EPILOGUE_GELU: return "GELU";
    case CUBLASLT_EPILOGUE_GELU_AUX: return "GELU_AUX";
    case CUBLASLT_EPILOGUE_GELU_BIAS: return "GELU_BIAS";
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS: return "GELU_AUX_BIAS";
    case CUBLASLT_EPILOGUE_DRELU_BGRAD: return "DRELU_BGRAD";
    case CUBLASLT_EPILOGUE_DGELU_BGRAD: return "DGELU_BGRAD";
    case CUBLASLT_EPILOGUE_BGRADA: return "BGRADA";
    case CUBLASLT_EPILOGUE_BGRADB: return "BGRADB";
    default: return "epilogue?";
    }
}

// cublasLtMatmulTile_t values 1..35 in order; later ones print as "#id".
static const char *const tile_names[] = {
    "?",       "8x8",     "8x16",    "16x8",    "8x32",    "16x16",   "32x8",    "8x64",
    "16x32",   "32x16",   "64x8",    "32x32",   "32x64",   "64x32",   "32x128",  "64x64",
    "128x32",  "64x128",  "128x64",  "64x256",  "128x128", "256x64",  "64x512",  "128x256",
    "256x128", "512x64",  "64x96",   "96x64",   "96x128",  "128x160", "160x128", "192x128",
    "128x192", "128x96",  "32x256",  "256x32",
};

static const char *const tiled_epilogue_names[GE2_TILED_EPILOGUE_COUNT] = {"PLAIN", "BIAS_ACT", "DACT"};

static void describe_plan(ge2_gemm_plan *p, const ge2_launch *launch)
{
    if (p->selection.tiled) {
        ge2_tiled_gemm g;
        char cfg[64];
        ge2_tiled_config_str(p->selection.config, cfg, sizeof cfg);
        int n = snprintf(p->description, sizeof p->description, "%s", cfg);
        if (p->tiled_bind(launch, &g) && n > 0 && (size_t)n < sizeof p->description)
            n += snprintf(p->description + n, sizeof p->description - (size_t)n, " %s%s%s%s",
                          tiled_epilogue_names[g.epilogue], g.row_sums ? " + row sums" : "",
                          g.act != GE2_ACT_NONE ? " " : "", g.act != GE2_ACT_NONE ? ge2_activation_name(g.act) : "");
        if (n > 0 && (size_t)n < sizeof p->description)
            ge2_gemm_selection_str(&p->selection, p->description + n, sizeof p->description - (size_t)n);
        return;
    }
    int algo_id = -1;
    uint32_t tile = 0;
    size_t written = 0;
    const cublasLtMatmulAlgo_t *algo = &p->algos[0].algo;
    if (cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_ID, &algo_id,
                                             sizeof algo_id, &written) != CUBLAS_STATUS_SUCCESS)
        algo_id = -1;
    if (cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile,
                                             sizeof tile, &written) != CUBLAS_STATUS_SUCCESS)
        tile = 0;
    char tile_buf[16];
    const char *tile_str = tile_buf;
    if (tile < sizeof tile_names / sizeof tile_names[0])
        tile_str = tile_names[tile];
    else
        snprintf(tile_buf, sizeof tile_buf, "#%u", tile);
    int n = snprintf(p->description, sizeof p->description, "cublasLt %s algo %d tile %s",
                     epilogue_name(p->epilogue), algo_id, tile_str);
    int32_t split_k = 1;
    if (cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split_k,
                                             sizeof split_k, &written) == CUBLAS_STATUS_SUCCESS &&
        split_k > 1 && n > 0 && (size_t)n < sizeof p->description)
        n += snprintf(p->description + n, sizeof p->description - (size_t)n, " splitK %d", (int)split_k);
    if (p->act_kernel && n > 0 && (size_t)n < sizeof p->description)
        n += snprintf(p->description + n, sizeof p->description - (size_t)n, " + act %s",
                      ge2_activation_name(p->act));
    if (p->post && p->post_name && n > 0 && (size_t)n < sizeof p->description)
        n += snprintf(p->description + n, sizeof p->description - (size_t)n, " + %s", p->post_name);
    if ((p->tf32 || p->bf16) && n > 0 && (size_t)n < sizeof p->description)
        n += snprintf(p->description + n, sizeof p->description - (size_t)n,
                      p->d_bf16 ? " bf16 in and out" : p->f16 ? " fp16" : p->bf16 ? " bf16" : " tf32");
    if (n > 0 && (size_t)n < sizeof p->description)
        ge2_gemm_selection_str(&p->selection, p->description + n, sizeof p->description - (size_t)n);
}

void ge2_gemm_plan_free(ge2_gemm_plan *p)
{
    if (!p)
        return;
    if (p->ld)
        cublasLtMatrixLayoutDestroy(p->ld);
    if (p->lb)
        cublasLtMatrixLayoutDestroy(p->lb);
    if (p->la)
        cublasLtMatrixLayoutDestroy(p->la);
    if (p->desc)
        cublasLtMatmulDescDestroy(p->desc);
    ge2_free(p);
}

// Largest power of two (<= 256) dividing the address: what the heuristic may
// assume about a buffer's alignment.
static uint32_t alignment_of(const void *ptr)
{
    uintptr_t a = (uintptr_t)ptr;
    uint32_t align = 256;
    while (align > 1 && (a % align) != 0)
        align /= 2;
    return align;
}

static ge2_status make_layout(const char *op, int node_id, ge2_gemm_operand m, int64_t batch,
                              cudaDataType_t type, cublasLtMatrixLayout_t *out)
{
    LT_CHECK(cublasLtMatrixLayoutCreate(out, type, (uint64_t)m.cols, (uint64_t)m.rows,
                                        m.cols));
    if (batch > 1) {
        int32_t count = (int32_t)batch;
        LT_CHECK(cublasLtMatrixLayoutSetAttribute(*out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                  &count, sizeof count));
        LT_CHECK(cublasLtMatrixLayoutSetAttribute(
            *out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &m.batch_stride,
            sizeof m.batch_stride));
    }
    return GE2_OK;
}

// Elements of a stored operand a GEMM reads: its batch items' extent.
static int64_t operand_span(ge2_gemm_operand m, int64_t batch)
{
    return m.rows * m.cols + (batch > 1 ? (batch - 1) * m.batch_stride : 0);
}

// The scratch's bf16 copies of A then B (those rounded), before D's f32 buffer
static size_t scratch_copies_bytes(const ge2_gemm_plan *p)
{
    return (p->round_a ? ge2_bf16_copy_bytes(p->span_a) : 0) + (p->round_b ? ge2_bf16_copy_bytes(p->span_b) : 0);
}

// The three layouts of one plan: cuBLASLt A (our in[1]), B (our in[0]), D.
// Precision BF16: A and B are the bf16 copies in the launch's scratch.
ge2_status ge2_gemm_make_layouts(const ge2_launch *launch, ge2_gemm_plan *p, ge2_gemm_operand a_lt,
                                 ge2_gemm_operand b_lt, ge2_gemm_operand d, int64_t batch)
{
    const char *op = ge2_cuda_op_name(launch);
    const int node_id = launch->node->id;
    p->bf16 = ge2_launch_half_gemm(launch);
    p->f16 = launch->f16_operands;
    p->round_a = p->bf16 && launch->in[1].dtype != GE2_BF16;
    p->round_b = p->bf16 && launch->in[0].dtype != GE2_BF16;
    p->span_a = operand_span(a_lt, batch);
    p->span_b = operand_span(b_lt, batch);
    if (p->bf16 || p->d_scratch) {
        const size_t need = scratch_copies_bytes(p) + (p->d_scratch ? 2 * ge2_bf16_copy_bytes(operand_span(d, batch)) : 0);
        if (need > 0 && (!launch->scratch || launch->scratch_bytes < need))
            return ge2_error(GE2_ERR_STATE,
                             "ge2_%s (node %d): precision %s needs %zu bytes of scratch for the operands' 16-bit "
                             "copies and the f32 result; the backend gave %zu",
                             op, node_id, p->f16 ? "fp16" : "bf16", need,
                             launch->scratch ? launch->scratch_bytes : (size_t)0);
    }
    const cudaDataType_t operands = p->f16 ? CUDA_R_16F : p->bf16 ? CUDA_R_16BF : CUDA_R_32F;
    GE2_TRY(make_layout(op, node_id, a_lt, batch, operands, &p->la));
    GE2_TRY(make_layout(op, node_id, b_lt, batch, operands, &p->lb));
    return make_layout(op, node_id, d, batch, p->d_bf16 ? CUDA_R_16BF : CUDA_R_32F, &p->ld);
}

static void *view_data(const ge2_launch *launch, int view)
{
    return view > GE2_MAX_INPUTS ? launch->out[view - GE2_GEMM_OUT(0)].data : launch->in[view - GE2_GEMM_IN(0)].data;
}

// Where the epilogue reads and writes this launch's buffers. Set at prepare
// (the heuristic infers alignment from them) and again at every launch, so a
// launch whose views were re-resolved still uses its current addresses.
static ge2_status set_epilogue_pointers(const ge2_gemm_plan *p, const ge2_launch *launch)
{
    const char *op = ge2_op_name(launch->node->op);
    int node_id = launch->node->id;
    if (p->bias_view != GE2_GEMM_NO_VIEW) {
        const void *bias = view_data(launch, p->bias_view);
        LT_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                &bias, sizeof bias));
    }
    if (p->aux_view != GE2_GEMM_NO_VIEW) {
        void *aux = view_data(launch, p->aux_view);
        LT_CHECK(cublasLtMatmulDescSetAttribute(
            p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
    }
    return GE2_OK;
}

// Pointers of one GEMM: cuBLASLt A, B and D.
typedef struct ge2_gemm_ptrs {
    const void *a, *b;
    void *d;
} ge2_gemm_ptrs;

static ge2_gemm_ptrs gemm_ptrs(const ge2_gemm_plan *p, const ge2_launch *launch)
{
    ge2_gemm_ptrs g;
    g.a = p->round_a ? launch->scratch : launch->in[1].data;
    g.b = p->round_b ? (const void *)((const char *)launch->scratch + (p->round_a ? ge2_bf16_copy_bytes(p->span_a) : 0))
                     : launch->in[0].data;
    g.d = ge2_gemm_d(p, launch);
    return g;
}

void *ge2_gemm_d(const ge2_gemm_plan *p, const ge2_launch *launch)
{
    if (p->d_scratch)
        return (char *)launch->scratch + scratch_copies_bytes(p);
    return p->gemm_writes_z ? launch->out[1].data : launch->out[p->d_out].data;
}

// Builds the descriptor for `epilogue` and asks the heuristic. *found == 0
// (not an error) when no algorithm supports this epilogue here, so the caller
// can fall back to a plainer one.
ge2_status ge2_gemm_plan_try(ge2_gemm_plan *p, const ge2_launch *launch, bool trans_a_lt,
                           bool trans_b_lt, int64_t d_rows_lt, int *found)
{
    const char *op = ge2_op_name(launch->node->op);
    int node_id = launch->node->id;
    *found = 0;
    if (p->desc) {
        cublasLtMatmulDescDestroy(p->desc);
        p->desc = NULL;
    }
    p->tf32 = launch->tf32;
    // precision BF16: bf16 operands (the copies), fp32 sums. Not
    // CUBLAS_COMPUTE_32F_FAST_16BF on the fp32 operands: cuBLASLt may run
    // them in TF32 instead, which op_agreement_test's
    // test_bf16_gemm_rounds_operands catches (docs/mixed-precision.md)
    cublasComputeType_t compute = p->tf32 && !p->bf16 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    LT_CHECK(cublasLtMatmulDescCreate(&p->desc, compute, CUDA_R_32F));
    int32_t ta = trans_a_lt ? CUBLAS_OP_T : CUBLAS_OP_N;
    int32_t tb = trans_b_lt ? CUBLAS_OP_T : CUBLAS_OP_N;
    LT_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    LT_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    uint32_t epilogue = (uint32_t)p->epilogue;
    LT_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                            sizeof epilogue));
    if (p->aux_view != GE2_GEMM_NO_VIEW) {
        int64_t aux_ld = p->aux_ld ? p->aux_ld : d_rows_lt;
        LT_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
                                                &aux_ld, sizeof aux_ld));
    }
    GE2_TRY(set_epilogue_pointers(p, launch));

    ge2_gemm_ptrs g = gemm_ptrs(p, launch);
    cublasLtMatmulPreference_t pref = NULL;
    LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = launch->workspace ? (uint64_t)launch->workspace_bytes : 0;
    p->align_a = alignment_of(g.a);
    p->align_b = alignment_of(g.b);
    p->align_d = alignment_of(g.d);
    const struct {
        cublasLtMatmulPreferenceAttributes_t attr;
        const void *value;
        size_t size;
    } prefs[] = {
        {CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &p->align_a, sizeof p->align_a},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &p->align_b, sizeof p->align_b},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &p->align_d, sizeof p->align_d},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &p->align_d, sizeof p->align_d},
    };
    cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
    for (size_t i = 0; i < sizeof prefs / sizeof prefs[0] && s == CUBLAS_STATUS_SUCCESS; i++)
        s = cublasLtMatmulPreferenceSetAttribute(pref, prefs[i].attr, prefs[i].value, prefs[i].size);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulAlgoGetHeuristic((cublasLtHandle_t)launch->blas, p->desc, p->la, p->lb,
                                           p->ld, p->ld, pref, GE2_GEMM_ALGOS, p->algos, found);
    cublasLtMatmulPreferenceDestroy(pref);
    // NOT_SUPPORTED from the heuristic means "no algorithm for this
    // epilogue/layout": a reason to fall back, not a failure.
    if (s == CUBLAS_STATUS_NOT_SUPPORTED) {
        *found = 0;
        return GE2_OK;
    }
    if (s != CUBLAS_STATUS_SUCCESS)
        return ge2_error(GE2_ERR_CUDA, "ge2_%s (node %d): cublasLtMatmulAlgoGetHeuristic failed: %s (%d)",
                         op, node_id, ge2_gemm_lt_status_name(s), (int)s);
    p->n_algos = *found;
    return GE2_OK;
}

// A bf16 tensor as an input the op reads so (ge2_op_reads_bf16: a GEMM
// operand, LINEAR_GRAD_INPUT's saved z), or as an output the op stores in
// bf16 (ge2_op_def.stores_bf16).
static bool bf16_view(const ge2_launch *launch, const ge2_view *v)
{
    if (v->dtype != GE2_BF16)
        return false;
    for (int i = 0; i < launch->n_in; i++)
        if (v == &launch->in[i])
            return ge2_op_reads_bf16(launch->node, i);
    for (int k = 0; k < launch->n_out; k++)
        if (v == &launch->out[k])
            return ge2_op_stores_bf16(launch->node, k);
    return false;
}

ge2_status ge2_gemm_check_launch(const ge2_launch *launch, int relu_mask_view)
{
    for (int i = 0; i < launch->n_in + launch->n_out; i++) {
        const ge2_view *v = i < launch->n_in ? &launch->in[i] : &launch->out[i - launch->n_in];
        const bool mask = v->dtype == GE2_U8 && relu_mask_view != GE2_GEMM_NO_VIEW &&
                          (i < launch->n_in ? GE2_GEMM_IN(i) : GE2_GEMM_OUT(i - launch->n_in)) == relu_mask_view;
        if (v->dtype != GE2_F32 && !mask && !bf16_view(launch, v))
            return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_%s: %s %d is %s; the CUDA kernel takes f32 (operands: or bf16)",
                             ge2_cuda_op_name(launch), i < launch->n_in ? "input" : "output",
                             i < launch->n_in ? i : i - launch->n_in, ge2_dtype_name(v->dtype));
    }
    if (!launch->blas || !launch->stream)
        return ge2_error(GE2_ERR_STATE, "ge2_%s (node %d): launch has no stream or cuBLASLt handle",
                         ge2_cuda_op_name(launch), launch->node->id);
    return GE2_OK;
}

// Ends a prepare: the plan goes to launch->backend_data, or is freed on
// error; found == 0 means cuBLASLt offered nothing for these shapes.
ge2_status ge2_gemm_plan_commit(ge2_launch *launch, ge2_gemm_plan *p, ge2_status st, int found)
{
    ge2_tiled_gemm tiled;
    // (bf16: the tiled GEMM sums fp32 operands, so it is no fallback there)
    const bool tiled_ok = st == GE2_OK && !p->bf16 && p->tiled_bind && p->tiled_bind(launch, &tiled);
    if (st == GE2_OK && found == 0 && !tiled_ok) {
        char s0[64], s1[64];
        st = ge2_error(GE2_ERR_UNSUPPORTED, "ge2_%s (node %d): cuBLASLt has no algorithm for %s x %s",
                       ge2_cuda_op_name(launch), launch->node->id, ge2_shape_str(launch->in[0].shape, s0, sizeof s0),
                       ge2_shape_str(launch->in[1].shape, s1, sizeof s1));
    }
    if (st == GE2_OK) {
        // The kernel registry picks among the heuristic's candidates and the
        // tiled GEMM's (timing them once per problem).
        ge2_gemm_ptrs g = gemm_ptrs(p, launch);
        ge2_gemm_problem pb = {epilogue_name(p->epilogue), (cublasLtHandle_t)launch->blas, p->desc, p->la, p->lb,
                               p->ld, g.a, g.b, g.d, launch->workspace, launch->workspace_bytes,
                               (cudaStream_t)launch->stream, p->align_a, p->align_b, p->align_d};
        st = ge2_gemm_select(launch, &pb, p->algos, found ? p->n_algos : 0, tiled_ok ? &tiled : NULL,
                             &p->selection);
    }
    if (st != GE2_OK) {
        ge2_gemm_plan_free(p);
        return st;
    }
    describe_plan(p, launch);
    launch->backend_data = p;
    return GE2_OK;
}

// Microseconds per enqueue of launch's plan (the best of a few), or < 0
static double time_enqueue(const ge2_launch *launch)
{
    enum { RUNS = 5 };
    cudaStream_t stream = (cudaStream_t)launch->stream;
    cudaEvent_t start = NULL, stop = NULL;
    double best = -1.0;
    bool ok = cudaEventCreate(&start) == cudaSuccess && cudaEventCreate(&stop) == cudaSuccess &&
              ge2_gemm_enqueue(launch, "timing") == GE2_OK; // warm-up
    for (int i = 0; ok && i < RUNS; i++) {
        float ms = 0.0f;
        ok = cudaEventRecord(start, stream) == cudaSuccess && ge2_gemm_enqueue(launch, "timing") == GE2_OK &&
             cudaEventRecord(stop, stream) == cudaSuccess && cudaEventSynchronize(stop) == cudaSuccess &&
             cudaEventElapsedTime(&ms, start, stop) == cudaSuccess;
        if (ok && (best < 0 || ms * 1e3 < best))
            best = ms * 1e3;
    }
    if (!ok) {
        ge2_clear_error();
        cudaGetLastError();
        best = -1.0;
    }
    if (start)
        cudaEventDestroy(start);
    if (stop)
        cudaEventDestroy(stop);
    return best;
}

// Does the epilogue apply an activation or its derivative?
static bool fuses_act(cublasLtEpilogue_t e)
{
    return e != CUBLASLT_EPILOGUE_DEFAULT && e != CUBLASLT_EPILOGUE_BIAS && e != CUBLASLT_EPILOGUE_BGRADA &&
           e != CUBLASLT_EPILOGUE_BGRADB;
}

// Appends to the plan's description (cut where it is full)
static void note(ge2_gemm_plan *p, const char *fmt, ...)
{
    const size_t used = strlen(p->description);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->description + used, sizeof p->description - used, fmt, ap);
    va_end(ap);
}

ge2_status ge2_gemm_prepare_timed(ge2_launch *launch, ge2_gemm_prepare_fn prepare)
{
    const bool timed = launch->settings && launch->settings->autotune && launch->settings->time_epilogues;
    char known[64] = "";
    const bool recalled = timed && ge2_kernel_choice_recall(launch, "epilogue", known, sizeof known);
    if (recalled && strcmp(known, "plain") == 0) {
        GE2_TRY(prepare(launch, false));
        note((ge2_gemm_plan *)launch->backend_data, "; plain + ge2 kernel (cached choice over the fused epilogue)");
        return GE2_OK;
    }
    GE2_TRY(prepare(launch, true));
    ge2_gemm_plan *fused = (ge2_gemm_plan *)launch->backend_data;
    if (!timed || recalled || fused->selection.tiled || !fuses_act(fused->epilogue))
        return GE2_OK;
    ge2_launch t = *launch;
    t.backend_data = NULL;
    if (prepare(&t, false) != GE2_OK) {
        ge2_clear_error();
        return GE2_OK;
    }
    ge2_gemm_plan *plain = (ge2_gemm_plan *)t.backend_data;
    void *bufs[GE2_MAX_INPUTS + GE2_MAX_OUTPUTS] = {0};
    double fused_us = -1.0, plain_us = -1.0;
    if (ge2_scratch_launch_new(launch, &t, bufs)) {
        t.backend_data = fused;
        fused_us = time_enqueue(&t);
        t.backend_data = plain;
        plain_us = fused_us < 0 ? -1.0 : time_enqueue(&t);
    }
    ge2_scratch_launch_free(bufs);
    const bool take_plain = plain_us >= 0 && plain_us < fused_us;
    const char *fused_epilogue = epilogue_name(fused->epilogue);
    ge2_gemm_plan_free(take_plain ? fused : plain);
    launch->backend_data = take_plain ? plain : fused;
    if (fused_us < 0 || plain_us < 0)
        return GE2_OK;
    ge2_kernel_choice_remember(launch, "epilogue", take_plain ? "plain" : "fused");
    note((ge2_gemm_plan *)launch->backend_data, "; timed: fused %s %.1f us, plain + ge2 kernel %.1f us",
         fused_epilogue, fused_us, plain_us);
    return GE2_OK;
}

ge2_status ge2_gemm_enqueue(const ge2_launch *launch, const char *op)
{
    int node_id = launch->node->id;
    const ge2_gemm_plan *p = (const ge2_gemm_plan *)launch->backend_data;
    if (!p)
        return ge2_error(GE2_ERR_STATE, "ge2_%s (node %d): launched before prepare", op, node_id);
    cudaStream_t stream = (cudaStream_t)launch->stream;
    if (p->selection.tiled) {
        ge2_tiled_gemm tg;
        if (!p->tiled_bind(launch, &tg))
            return ge2_error(GE2_ERR_STATE, "ge2_%s (node %d): views changed since prepare; the tiled GEMM no "
                             "longer takes them", op, node_id);
        tg.no_pdl = launch->settings && !launch->settings->pdl;
        return ge2_tiled_gemm_run(&tg, p->selection.config, stream, op);
    }
    GE2_TRY(set_epilogue_pointers(p, launch));
    ge2_gemm_ptrs g = gemm_ptrs(p, launch);
    const float one = 1.0f, zero = 0.0f;
    if (g.d && (p->round_a || p->round_b)) {
        // the f32 operands rounded into the launch's scratch (kernels/cuda/bf16_copy.h), bf16 or fp16
        ge2_bf16_spans spans = {0};
        if (p->round_a)
            ge2_bf16_span_add(&spans, launch->in[1].data, (void *)g.a, p->span_a);
        if (p->round_b)
            ge2_bf16_span_add(&spans, launch->in[0].data, (void *)g.b, p->span_b);
        GE2_TRY(ge2_cuda_half_round(launch, &spans));
    }
    if (g.d) {
        LT_CHECK(cublasLtMatmul((cublasLtHandle_t)launch->blas, p->desc, &one, g.a, p->la, g.b,
                                p->lb, &zero, g.d, p->ld, g.d, p->ld, &p->algos[0].algo,
                                launch->workspace, launch->workspace ? launch->workspace_bytes : 0,
                                stream));
    }
    if (p->act_kernel && p->n_out > 0 && p->d_bf16) {
        // D is the bf16 z stash or y itself: y (bf16) from it
        act_kernel(p, (const __nv_bfloat16 *)g.d, (__nv_bfloat16 *)launch->out[0].data, NULL, stream);
        GE2_CUDA_CHECK(launch, "ge2_gemm_act_kernel");
    } else if (p->act_kernel && p->n_out > 0) {
        const float *z = (const float *)g.d;
        // LINEAR's z stash stored in bf16: written here, beside y
        __nv_bfloat16 *z_out = launch->n_out > 1 && launch->out[1].dtype == GE2_BF16
                                   ? (__nv_bfloat16 *)launch->out[1].data : NULL;
        if (launch->out[0].dtype == GE2_BF16)
            act_kernel(p, z, (__nv_bfloat16 *)launch->out[0].data, z_out, stream);
        else
            act_kernel(p, z, (float *)launch->out[0].data, z_out, stream);
        GE2_CUDA_CHECK(launch, "ge2_gemm_act_kernel");
    }
    if (p->post)
        GE2_TRY(p->post(launch, p));
    return GE2_OK;
}
