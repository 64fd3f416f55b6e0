/* The convolution ops' CUDA kernels: a cuDNN plan per launch, made at
 * prepare, or ge2's direct kernels (cuda.cu) where cuDNN is missing or has
 * no engine the launch allows (deterministic; full fp32 unless TF32 is on,
 * fp32 sums of bf16 products under BF16);
 * the kernel report says which and why. Bias, which cuDNN's single
 * convolution operations lack, is ge2's kernel after (or, for its gradient,
 * beside) the plan.
 *
 * Under precision BF16 the plan is cuDNN's bf16 convolution: bf16 operands
 * (the storage pass's tensors, or copies the launch rounds into its
 * scratch), fp32 sums, a bf16 result: written into a y the storage pass
 * stored in bf16, else into the scratch, which ge2 widens into the f32
 * output. cuDNN 9.14 has no engine that writes f32 from bf16
 * operands, so the CPU reference (cpu.c) and the direct kernels round
 * their results the same way. Precision FP16 is the same with fp16
 * (CUDNN_DATA_HALF). */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>

#include <cudnn_graph.h>

#include "graph/alloc.h"
#include "graph/error.h"
#include "kernels/cuda/bf16_copy.h"
#include "kernels/cuda/cudnn.h"
#include "kernels/cuda/gemm_registry.h"
#include "ops/conv/conv.h"

/* The variant pack's unique ids: the operation's input, weight and output
 * in the forward's naming (x, w, y; the backward ops' dx and dy, dw). */
enum { UID_X = 1, UID_W = 2, UID_Y = 3 };

typedef struct conv_plan {
    ge2_cudnn_plan plan; /* plan.plan NULL: the direct kernel runs */
    ge2_cudnn_desc tensors[3], conv, op;
    void *workspace;
    bool cached; /* the engine came from the kernel cache, not a timing now */
    char describe[224];
} conv_plan;

static void plan_free(conv_plan *p)
{
    ge2_cudnn_plan_free(&p->plan);
    ge2_cudnn_free(p->op);
    ge2_cudnn_free(p->conv);
    for (int i = 0; i < 3; i++)
        ge2_cudnn_free(p->tensors[i]);
    if (p->workspace)
        cudaFree(p->workspace);
    ge2_free(p);
}

/* x and w of the launch (where they sit among its inputs depends on the op) */
static void operands(const ge2_launch *l, ge2_shape *x, ge2_shape *w)
{
    switch (l->node->op) {
    case GE2_OP_CONV2D: *x = l->in[0].shape, *w = l->in[1].shape; break;
    case GE2_OP_CONV2D_GRAD_INPUT: *x = l->in[1].shape, *w = l->in[2].shape; break;
    default: *x = l->in[2].shape, *w = l->in[1].shape; break; /* CONV2D_GRAD_WEIGHT */
    }
}

/* The input holding the launch's GEMM operand k (0 or 1): the k-th the op
 * names (ops.c's operands: x and w of CONV2D, dy and w of
 * CONV2D_GRAD_INPUT, dy and x of CONV2D_GRAD_WEIGHT) */
static int operand_input(const ge2_launch *l, int k)
{
    int i = 0;
    for (; i < l->n_in; i++)
        if (ge2_op_bf16_operand(l->node->op, i) && k-- == 0)
            break;
    return i;
}

/* The launch's 16-bit type: "fp16" under precision FP16, else "bf16" */
static const char *half_name(const ge2_launch *l) { return l->f16_operands ? "fp16" : "bf16"; }

/* Where a 16-bit launch keeps its 16-bit tensors in ge2_launch.scratch (byte
 * offsets): a rounded copy of each operand that is an f32 tensor, then the
 * convolution's 16-bit result, which the launch widens into output 0 (none
 * when output 0 is a bf16 tensor itself: the plan writes it there). */
typedef struct half_layout {
    size_t operand[2], result, bytes;
} half_layout;

static half_layout half_layout_of(const ge2_launch *l)
{
    half_layout s;
    memset(&s, 0, sizeof s);
    for (int k = 0; k < 2; k++) {
        const ge2_view *v = &l->in[operand_input(l, k)];
        s.operand[k] = s.bytes;
        if (v->dtype != GE2_BF16)
            s.bytes += ge2_bf16_copy_bytes(ge2_shape_numel(v->shape));
    }
    s.result = s.bytes;
    if (l->out[0].dtype != GE2_BF16)
        s.bytes += ge2_bf16_copy_bytes(ge2_shape_numel(l->out[0].shape));
    return s;
}

/* The cuDNN operation of the launch's op over tensors x, w, y: f32, or
 * bf16 when the launch multiplies bf16. */
static ge2_status make_op(const ge2_launch *l, conv_plan *p)
{
    static const int types[3] = {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
                                 CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
                                 CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR};
    /* per op: alpha, beta, conv desc, x (or dx), w (or dw), y (or dy) */
    static const int attrs[3][6] = {
        {CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y},
        {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY},
        {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY}};
    int k = l->node->op == GE2_OP_CONV2D ? 0 : l->node->op == GE2_OP_CONV2D_GRAD_INPUT ? 1 : 2;
    ge2_shape xs, ws;
    operands(l, &xs, &ws);
    ge2_conv2d_geom g = ge2_conv2d_geom_of(GE2_ATTRS(ge2_conv2d_attrs, l->node->attrs), xs, ws);
    const int64_t dims[3][4] = {{g.n, g.c, g.h, g.w}, {g.o, g.cg, g.kh, g.kw}, {g.n, g.o, g.oh, g.ow}};
    const bool half = ge2_launch_multiplies_half(l);
    const int type = !half ? CUDNN_DATA_FLOAT : l->f16_operands ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
    for (int i = 0; i < 3; i++) {
        /* the 16-bit tensors: 256-byte aligned scratch copies, or the arena's
         * (the planner aligns every tensor to 256 bytes) */
        const ge2_cudnn_tensor_spec spec = {UID_X + i, type, 4, dims[i], NULL, false, false, half ? 16 : 4};
        GE2_TRY(ge2_cudnn_tensor_of(&spec, &p->tensors[i]));
    }
    const int64_t stride[2] = {g.sh, g.sw}, padding[2] = {g.ph, g.pw}, dilation[2] = {g.dh, g.dw};
    GE2_TRY(ge2_cudnn_conv_desc(stride, padding, dilation, &p->conv));
    float alpha = 1.0f, beta = 0.0f;
    GE2_TRY(ge2_cudnn_new(types[k], &p->op));
    GE2_TRY(ge2_cudnn_set(p->op, attrs[k][0], CUDNN_TYPE_FLOAT, 1, &alpha));
    GE2_TRY(ge2_cudnn_set(p->op, attrs[k][1], CUDNN_TYPE_FLOAT, 1, &beta));
    GE2_TRY(ge2_cudnn_set(p->op, attrs[k][2], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p->conv));
    for (int i = 0; i < 3; i++)
        GE2_TRY(ge2_cudnn_set(p->op, attrs[k][3 + i], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p->tensors[i]));
    return ge2_cudnn_finalize(p->op);
}

/* x, w, y of the launch in the plan's order, wherever the op keeps them
 * (a bf16 launch: its bf16 operands and its result in the scratch); false
 * when the key does not need the op's output */
static bool plan_pointers(const ge2_launch *l, void *ptrs[3])
{
    /* the op's operand k and output sit at plan slots: */
    static const int slot[3][3] = {{0, 1, 2} /* x, w, y */, {2, 1, 0} /* dy, w, dx */, {2, 0, 1} /* dy, x, dw */};
    const int k = l->node->op == GE2_OP_CONV2D ? 0 : l->node->op == GE2_OP_CONV2D_GRAD_INPUT ? 1 : 2;
    if (!l->out[0].data)
        return false;
    const bool half = ge2_launch_multiplies_half(l);
    const half_layout s = half_layout_of(l);
    char *scratch = l->scratch;
    for (int i = 0; i < 2; i++) {
        const ge2_view *v = &l->in[operand_input(l, i)];
        ptrs[slot[k][i]] = half && v->dtype != GE2_BF16 ? scratch + s.operand[i] : v->data;
    }
    ptrs[slot[k][2]] = half && l->out[0].dtype != GE2_BF16 ? scratch + s.result : l->out[0].data;
    return true;
}

static const int64_t uids[3] = {UID_X, UID_W, UID_Y};

/* What the engine choice depends on, as a kernel-cache key (the GEMM
 * registry's file holds it beside the GEMM choices): the op, the shapes,
 * the geometry, the arithmetic, the GPU and cuDNN's version. */
static bool cache_key(const ge2_launch *l, char *key, size_t size)
{
    static const char *const ops[3] = {"fwd", "bwd_data", "bwd_filter"};
    int k = l->node->op == GE2_OP_CONV2D ? 0 : l->node->op == GE2_OP_CONV2D_GRAD_INPUT ? 1 : 2;
    ge2_shape xs, ws;
    operands(l, &xs, &ws);
    ge2_conv2d_geom g = ge2_conv2d_geom_of(GE2_ATTRS(ge2_conv2d_attrs, l->node->attrs), xs, ws);
    struct cudaDeviceProp prop;
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    char gpu[sizeof prop.name];
    memcpy(gpu, prop.name, sizeof gpu);
    gpu[sizeof gpu - 1] = '\0';
    for (char *c = gpu; *c; c++)
        if (!(*c >= 'a' && *c <= 'z') && !(*c >= 'A' && *c <= 'Z') && !(*c >= '0' && *c <= '9'))
            *c = '_';
    char version[32];
    snprintf(version, sizeof version, "%s", ge2_cudnn_version());
    for (char *c = version; *c; c++)
        *c = *c == ' ' ? '_' : *c;
    int n = snprintf(key, size,
                     "cudnn_conv2d:%s:x%lld.%lld.%lld.%lld:w%lld.%lld.%lld.%lld:s%lld.%lld:p%lld.%lld:d%lld.%lld:%s:%s:%s",
                     ops[k], (long long)g.n, (long long)g.c, (long long)g.h, (long long)g.w, (long long)g.o,
                     (long long)g.cg, (long long)g.kh, (long long)g.kw, (long long)g.sh, (long long)g.sw,
                     (long long)g.ph, (long long)g.pw, (long long)g.dh, (long long)g.dw,
                     ge2_launch_multiplies_half(l) ? half_name(l) : l->tf32 ? "tf32" : "fp32", gpu, version);
    return n > 0 && (size_t)n < size;
}

/* Zeroed scratch of the operation's three tensors, to time engines on. */
static bool scratch_new(const ge2_launch *l, void *ptrs[3])
{
    ge2_shape xs, ws;
    operands(l, &xs, &ws);
    ge2_conv2d_geom g = ge2_conv2d_geom_of(GE2_ATTRS(ge2_conv2d_attrs, l->node->attrs), xs, ws);
    const int64_t elems[3] = {g.n * g.c * g.h * g.w, g.o * g.cg * g.kh * g.kw, g.n * g.o * g.oh * g.ow};
    bool ok = true;
    for (int i = 0; i < 3; i++) {
        ptrs[i] = NULL;
        size_t bytes = (size_t)elems[i] * sizeof(float);
        ok = ok && cudaMalloc(&ptrs[i], bytes) == cudaSuccess && cudaMemset(ptrs[i], 0, bytes) == cudaSuccess;
    }
    cudaGetLastError();
    return ok;
}

static void scratch_free(void *ptrs[3])
{
    for (int i = 0; i < 3; i++)
        if (ptrs[i])
            cudaFree(ptrs[i]);
}

/* The plan: with autotune, the configuration remembered for this problem
 * (memory, then the kernel cache file: the engine's index, then its knobs'
 * fingerprint), else configurations timed on scratch and the fastest
 * remembered; without, the heuristics' first allowed one. */
static ge2_status plan(const ge2_launch *l, conv_plan *p, char *why, size_t why_size)
{
    const ge2_cudnn_numerics numerics = ge2_launch_multiplies_half(l) ? GE2_CUDNN_FP32_SUMS
                                        : l->tf32          ? GE2_CUDNN_ANY
                                                           : GE2_CUDNN_FP32;
    if (!l->settings || !l->settings->autotune)
        return ge2_cudnn_plan_new(&p->op, 1, numerics, NULL, NULL, &p->plan, why, why_size);
    char key[GE2_GEMM_KEY_MAX];
    bool keyed = cache_key(l, key, sizeof key);
    const char *path = l->settings->kernel_cache;
    ge2_gemm_choice remembered;
    ge2_cudnn_choice prefer = {-1, 0};
    if (keyed && ge2_gemm_registry_lookup(path, key, &remembered) && !remembered.tiled) {
        memcpy(&prefer.engine, remembered.algo, sizeof prefer.engine);
        memcpy(&prefer.knobs, remembered.algo + sizeof prefer.engine, sizeof prefer.knobs);
    }
    const bool preferred = prefer.engine >= 0;
    void *ptrs[3];
    bool scratch = !preferred && scratch_new(l, ptrs);
    ge2_cudnn_timing timing = {l->stream, 3, uids, ptrs};
    ge2_status st = ge2_cudnn_plan_new(&p->op, 1, numerics, scratch ? &timing : NULL, preferred ? &prefer : NULL,
                                       &p->plan, why, why_size);
    if (scratch) {
        /* the timing ran on the launch's stream: done before the scratch goes */
        cudaStreamSynchronize((cudaStream_t)l->stream);
        scratch_free(ptrs);
    }
    p->cached = st == GE2_OK && preferred && p->plan.engine == prefer.engine &&
                (!prefer.knobs || p->plan.knobs == prefer.knobs);
    if (st == GE2_OK && keyed && p->plan.timed) {
        ge2_gemm_choice choice;
        memset(&choice, 0, sizeof choice);
        memcpy(choice.algo, &p->plan.engine, sizeof p->plan.engine);
        memcpy(choice.algo + sizeof p->plan.engine, &p->plan.knobs, sizeof p->plan.knobs);
        choice.us = p->plan.us;
        choice.n_candidates = p->plan.timed;
        ge2_gemm_registry_store(path, key, &choice);
    }
    return st;
}

/* Every launch gets a conv_plan (its report line lives there); a plan
 * only when cuDNN has an engine for it. A launch cuDNN cannot run is not an
 * error: the direct kernel always applies, in bf16 too. */
static ge2_status prepare(ge2_launch *l)
{
    conv_plan *p = ge2_calloc(1, sizeof *p);
    if (!p)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_%s: out of host memory", ge2_op_name(l->node->op));
    l->backend_data = p;
    const bool half = ge2_launch_multiplies_half(l);
    char why[160] = "";
    bool f32 = true;
    for (int i = 0; i < l->n_in; i++) /* (a backward op's input 1 is only a shape) */
        f32 = f32 && (l->in[i].dtype == GE2_F32 || (i == 1 && l->node->op != GE2_OP_CONV2D));
    if (!f32 && !half)
        snprintf(why, sizeof why, "not f32");
    else if (ge2_cudnn_available() != GE2_OK)
        snprintf(why, sizeof why, "%s", ge2_last_error());
    else if (make_op(l, p) != GE2_OK)
        snprintf(why, sizeof why, "%s", ge2_last_error());
    else if (plan(l, p, why, sizeof why) == GE2_OK &&
             p->plan.workspace_bytes && cudaMalloc(&p->workspace, p->plan.workspace_bytes) != cudaSuccess) {
        cudaGetLastError();
        snprintf(why, sizeof why, "no device memory for its %zu-byte workspace", p->plan.workspace_bytes);
        ge2_cudnn_plan_free(&p->plan);
    }
    /* (a launch whose operands and y are all bf16 tensors needs none: the key may have no scratch) */
    if (p->plan.plan && half && half_layout_of(l).bytes > 0 &&
        (!l->scratch || l->scratch_bytes < half_layout_of(l).bytes))
        return ge2_error(GE2_ERR_STATE, "ge2_%s (node %d): the %s scratch has %zu bytes, the launch needs %zu",
                         ge2_op_name(l->node->op), l->node->id, half_name(l), l->scratch_bytes,
                         half_layout_of(l).bytes);
    bool bias = (l->node->op == GE2_OP_CONV2D && l->n_in > 2) ||
                (l->node->op == GE2_OP_CONV2D_GRAD_WEIGHT && l->n_out > 1);
    char timed[64] = "heuristics' first";
    if (p->cached)
        snprintf(timed, sizeof timed, "cached choice");
    else if (p->plan.timed)
        snprintf(timed, sizeof timed, "fastest of %d timed, %.1f us", p->plan.timed, (double)p->plan.us);
    if (p->plan.plan)
        snprintf(p->describe, sizeof p->describe, "%s%s%s engine %lld knobs %08llx%s%s%s, workspace %zu B, %s%s",
                 ge2_cudnn_version(), half ? " " : "", half ? half_name(l) : "", (long long)p->plan.engine,
                 (unsigned long long)(p->plan.knobs & 0xffffffffu), p->plan.notes[0] ? " (" : "", p->plan.notes, p->plan.notes[0] ? ")" : "", p->plan.workspace_bytes,
                 timed, bias ? " + ge2 bias kernel" : "");
    else
        snprintf(p->describe, sizeof p->describe, "ge2 direct kernel%s%s%s (cuDNN: %s)", half ? ", " : "",
                 half ? half_name(l) : "", half ? " operands" : "", why);
    ge2_clear_error(); /* the fallback is no error: the report line says why */
    return GE2_OK;
}

ge2_status ge2_cuda_conv2d_prepare(ge2_launch *l) { return prepare(l); }
ge2_status ge2_cuda_conv2d_grad_input_prepare(ge2_launch *l) { return prepare(l); }
ge2_status ge2_cuda_conv2d_grad_weight_prepare(ge2_launch *l) { return prepare(l); }

static ge2_status direct(const ge2_launch *l)
{
    switch (l->node->op) {
    case GE2_OP_CONV2D: return ge2_cuda_conv2d_direct(l);
    case GE2_OP_CONV2D_GRAD_INPUT: return ge2_cuda_conv2d_grad_input_direct(l);
    default: return ge2_cuda_conv2d_grad_weight_direct(l);
    }
}

/* A 16-bit launch's f32 operands, rounded into the scratch */
static ge2_status round_operands(const ge2_launch *l)
{
    const half_layout s = half_layout_of(l);
    ge2_bf16_spans spans;
    memset(&spans, 0, sizeof spans);
    for (int k = 0; k < 2; k++) {
        const ge2_view *v = &l->in[operand_input(l, k)];
        if (v->dtype != GE2_BF16)
            ge2_bf16_span_add(&spans, v->data, (char *)l->scratch + s.operand[k], ge2_shape_numel(v->shape));
    }
    return spans.n ? ge2_cuda_half_round(l, &spans) : GE2_OK;
}

ge2_status ge2_cuda_conv2d_launch(const ge2_launch *l)
{
    const conv_plan *p = l->backend_data;
    if (!p || !p->plan.plan)
        return direct(l);
    const bool half = ge2_launch_multiplies_half(l);
    void *ptrs[3];
    if (plan_pointers(l, ptrs)) {
        if (half)
            GE2_TRY(round_operands(l));
        ge2_status st = ge2_cudnn_execute(&p->plan, l->stream, 3, uids, ptrs, p->workspace);
        if (st != GE2_OK) {
            char cause[256]; /* ge2_error writes the buffer ge2_last_error reads */
            snprintf(cause, sizeof cause, "%s", ge2_last_error());
            return ge2_error(st, "ge2_%s (node %d): %s", ge2_op_name(l->node->op), l->node->id, cause);
        }
        if (half && l->out[0].dtype != GE2_BF16) {
            ge2_bf16_spans result;
            memset(&result, 0, sizeof result);
            ge2_bf16_span_add(&result, (char *)l->scratch + half_layout_of(l).result, l->out[0].data,
                              ge2_shape_numel(l->out[0].shape));
            GE2_TRY(ge2_cuda_half_widen(l, &result));
        }
    }
    if (l->node->op == GE2_OP_CONV2D && l->n_in > 2 && l->out[0].data)
        return ge2_cuda_conv2d_add_bias(l);
    if (l->node->op == GE2_OP_CONV2D_GRAD_WEIGHT && l->n_out > 1 && l->out[1].data)
        return ge2_cuda_conv2d_grad_bias(l);
    return GE2_OK;
}

size_t ge2_cuda_conv2d_bf16_scratch_bytes(const ge2_launch *l)
{
    return ge2_launch_multiplies_half(l) ? half_layout_of(l).bytes : 0;
}

void ge2_cuda_conv2d_release(ge2_launch *l)
{
    if (l->backend_data)
        plan_free(l->backend_data);
    l->backend_data = NULL;
}

const char *ge2_cuda_conv2d_describe(const ge2_launch *l)
{
    const conv_plan *p = l->backend_data;
    return p ? p->describe : "ge2 direct kernel";
}
