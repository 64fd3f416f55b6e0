/* CUDA vs CPU agreement for every op in the table.
 *
 * The CPU kernels are the reference: straightforward loops (double
 * accumulation in the reductions) and cblas. For each op the graph engineer's
 * op case (tests/support/op_cases) builds a small random instance; every node
 * of it — the op, and the backward ops its case emits — runs on both
 * backends with every tensor in its own buffer, and every tensor a node
 * writes is compared. The optimizer ops, which work on the flat pools
 * instead of tensors, run several steps of each optimizer configuration on
 * random pools and compare parameters, every state slot and the control
 * block: as one flat update, and as per-parameter updates (two update
 * nodes over parameters in the pools, gradients in buffers of their own).
 *
 * Tolerance: |cuda - cpu| <= rtol * |cpu| + rtol * max(max|cpu output|,
 * max|operand|). rtol is 1e-5 in fp32; the absolute part judges near-zero
 * elements that come out of cancellation (p - q in dlogits, mixed-sign sums,
 * a softmax backward whose exact answer is 0) against the scale of their
 * tensor and operands instead of their own size. GEMM rows use 1e-4: cuBLASLt splits
 * and orders the K-sums differently from BLAS's one running sum per element,
 * so the rounding differs by about sqrt(K) ulps of the terms.
 *
 * CUDA is touched only inside test functions (Check forks each test); main()
 * asks //tests:gpu_probe, which asks in a child process.
 */
#include <check.h>
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/bf16.h"
#include "graph/error.h"
#include "graph/init.h"
#include "graph/ir.h"
#include "graph/ir.h"
#include "ops/linear/linear.h"
#include "ops/loss/loss.h"
#include "optim/optimizer_math.h"
#include "tests/gpu_probe.h"
#include "tests/support/attention_probe.h"
#include "tests/support/check_main.h"
#include "tests/support/op_cases.h"
#include "fusion/fusion.h"
#include "fusion/recompute_act/recompute_act.h"
#include "kernels/cuda/candidates.h"
#include "ops/cast/cast.h"
#include "passes/passes.h"
#include "ops/conv/conv.h"
#include "ops/ops.h"

#define RTOL 1e-5
#define RTOL_GEMM 1e-4
/* Attention under precision BF16: cuDNN multiplies bf16 copies of q, k, v
 * (and the probabilities) where the CPU reference computes in fp32, so
 * they agree to bf16's precision, 2^-8, relative to the largest value */
#define RTOL_BF16_ATTENTION 1e-2
/* Attention on TF32 tensor cores: q, k, v, the probabilities and dy
 * rounded to TF32 (2^-11) before each product, where the CPU keeps fp32 */
#define RTOL_TF32_ATTENTION 1e-2

/* Launches with precision TF32 (ge2_launch.tf32): GEMMs and attention's
 * tensor-core candidate multiply TF32 values */
static bool tf32_launches;
/* Set by the candidate tests: a launch of an op with a registered
 * candidate of this name runs the candidate where it applies (the kernel
 * registry would time it against the op's own kernel and may run either) */
static const char *use_candidate;

/* test_gemm_op_agrees_bf16: every launch of the case with precision BF16.
 * Both backends round each GEMM operand to the same bf16 bits (nearest
 * even) and a product of two bf16 values is exact in fp32, so only the
 * order of the fp32 sums differs, as in fp32: the same RTOL_GEMM holds
 * (a GEMM that left an operand unrounded misses it by orders of magnitude). */
static bool bf16_launches;
/* With bf16_launches: the graph first goes through precision BF16's storage
 * pass (passes/passes.h: ge2_bf16_storage_pass), so the GEMMs read bf16 operand
 * tensors (the casts' outputs, held to the CPU's bits) instead of rounding
 * f32 ones themselves; the tolerance is the same. */
static bool bf16_storage;
/* test_gemm_op_agrees_fp16 and the other fp16 tests: every launch with
 * precision FP16 (operands rounded to fp16; no storage pass) */
static bool f16_launches;
/* test_conv_op_agrees_direct_bf16: the convolution ops on ge2's direct
 * kernels (the fallback where cuDNN has no engine) instead of cuDNN */
static bool direct_conv;
#define WORKSPACE_BYTES (32u << 20)
#define SCRATCH_BYTES (16u << 20) /* ge2_launch.scratch: the bf16 GEMMs' operand copies */

/* ------------------------------------------------------------ CUDA state */

#define CK_CUDA(expr)                                                                                        \
    do {                                                                                                     \
        cudaError_t e_ = (expr);                                                                             \
        ck_assert_msg(e_ == cudaSuccess, "%s: %s", #expr, cudaGetErrorString(e_));                           \
    } while (0)

/* What the CUDA backend hands every launch. */
typedef struct device {
    cudaStream_t stream;
    cublasLtHandle_t blas;
    void *workspace;
    void *scratch;
    ge2_control *control; /* device */
} device;

static void device_open(device *d)
{
    CK_CUDA(cudaSetDevice(0));
    CK_CUDA(cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking));
    ck_assert_int_eq(cublasLtCreate(&d->blas), CUBLAS_STATUS_SUCCESS);
    CK_CUDA(cudaMalloc(&d->workspace, WORKSPACE_BYTES));
    CK_CUDA(cudaMalloc(&d->scratch, SCRATCH_BYTES));
    CK_CUDA(cudaMalloc((void **)&d->control, sizeof(ge2_control)));
    CK_CUDA(cudaMemset(d->control, 0, sizeof(ge2_control)));
    CK_CUDA(cudaDeviceSynchronize());
}

static void device_close(device *d)
{
    CK_CUDA(cudaStreamSynchronize(d->stream));
    CK_CUDA(cudaFree(d->control));
    CK_CUDA(cudaFree(d->workspace));
    CK_CUDA(cudaFree(d->scratch));
    cublasLtDestroy(d->blas);
    CK_CUDA(cudaStreamDestroy(d->stream));
}

static void device_fill(const device *d, ge2_launch *l)
{
    l->stream = d->stream;
    l->blas = d->blas;
    l->workspace = d->workspace;
    l->workspace_bytes = WORKSPACE_BYTES;
    l->scratch = d->scratch;
    l->scratch_bytes = SCRATCH_BYTES;
    l->tf32 = tf32_launches;
    l->control = d->control;
}

/* Host -> device, finished before it returns. The launches run on a
 * non-blocking stream, which the legacy stream of cudaMemcpy/cudaMemset does
 * not order against, so each copy waits for the whole device. */
static void h2d(void *dev, const void *host, size_t bytes)
{
    if (!bytes)
        return;
    CK_CUDA(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));
    CK_CUDA(cudaDeviceSynchronize());
}

static void poison(void *dev, size_t bytes)
{
    CK_CUDA(cudaMemset(dev, 0xff, bytes)); /* NaN in every float */
    CK_CUDA(cudaDeviceSynchronize());
}

/* A device copy of host (NULL: just the allocation). */
static void *to_device(const void *host, size_t bytes)
{
    void *p = NULL;
    CK_CUDA(cudaMalloc(&p, bytes ? bytes : 1));
    if (host)
        h2d(p, host, bytes);
    return p;
}

static void from_device(void *host, const void *dev, size_t bytes)
{
    if (bytes)
        CK_CUDA(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost));
}

static bool conv_op(ge2_op op)
{
    return op == GE2_OP_CONV2D || op == GE2_OP_CONV2D_GRAD_INPUT || op == GE2_OP_CONV2D_GRAD_WEIGHT;
}

static ge2_status conv_direct(const ge2_launch *l)
{
    switch (l->node->op) {
    case GE2_OP_CONV2D: return ge2_cuda_conv2d_direct(l);
    case GE2_OP_CONV2D_GRAD_INPUT: return ge2_cuda_conv2d_grad_input_direct(l);
    default: return ge2_cuda_conv2d_grad_weight_direct(l);
    }
}

/* The candidate called use_candidate for l's op, when it has one that
 * applies to l (after the op's own prepare, as the kernel registry asks) */
static const ge2_kernel_candidate *candidate_for(const ge2_launch *l)
{
    int n;
    const ge2_kernel_candidate *const *cs = ge2_kernel_candidates_of(l->node->op, &n);
    char why[160];
    for (int i = 0; use_candidate && i < n; i++)
        if (strcmp(cs[i]->name, use_candidate) == 0 && (!cs[i]->applies || cs[i]->applies(l, why, sizeof why)))
            return cs[i];
    return NULL;
}

/* What runs l: what cuda_prepare chose, else (the optimizer tests
 * enqueue unprepared launches) the op's own kernel */
static const ge2_cuda_kernel *kernel_of(const ge2_launch *l)
{
    return l->kernel ? l->kernel : &ge2_op_def_of(l->node->op)->cuda;
}

/* Sets l->kernel: the op's own, or the candidate use_candidate names */
static void cuda_prepare(ge2_launch *l)
{
    if (direct_conv && conv_op(l->node->op))
        return;
    const ge2_cuda_kernel *k = &ge2_op_def_of(l->node->op)->cuda;
    l->kernel = k;
    if (k->prepare)
        ck_assert_msg(k->prepare(l) == GE2_OK, "%s: CUDA prepare: %s", ge2_op_name(l->node->op),
                      ge2_last_error());
    const ge2_kernel_candidate *c = candidate_for(l);
    if (!c)
        return;
    ck_assert_int_eq(ge2_kernel_switch_to(l, c), GE2_OK);
    ck_assert_msg(l->kernel == &c->cuda, "%s: %s", ge2_op_name(l->node->op), l->kernel_choice);
}

/* Enqueues only: no wait, so it can run under stream capture. */
static void cuda_enqueue(const ge2_launch *l)
{
    if (direct_conv && conv_op(l->node->op)) {
        ck_assert_msg(conv_direct(l) == GE2_OK, "%s: direct kernel: %s", ge2_op_name(l->node->op), ge2_last_error());
        return;
    }
    const ge2_cuda_kernel *k = kernel_of(l);
    ck_assert_msg(k->launch(l) == GE2_OK, "%s: CUDA launch (%s): %s", ge2_op_name(l->node->op),
                  k->describe ? k->describe(l) : "", ge2_last_error());
}

static void cuda_release(ge2_launch *l)
{
    if (direct_conv && conv_op(l->node->op))
        return;
    if (kernel_of(l)->release)
        kernel_of(l)->release(l);
}

/* Runs one launch through the CUDA table row: prepare, launch, wait, release. */
static void cuda_run(ge2_launch *l)
{
    cuda_prepare(l);
    cuda_enqueue(l);
    CK_CUDA(cudaStreamSynchronize((cudaStream_t)l->stream));
    cuda_release(l);
}

/* ------------------------------------------------------------- comparing */

static double max_abs(const float *x, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++)
        m = fmax(m, fabs((double)x[i]));
    return m;
}

/* The largest magnitude in an f32 or bf16 view, 0 for other dtypes */
static double max_abs_view(const ge2_view *v)
{
    const int64_t n = ge2_shape_numel(v->shape);
    if (v->dtype == GE2_F32)
        return max_abs(v->data, n);
    double m = 0;
    for (int64_t i = 0; v->dtype == GE2_BF16 && i < n; i++)
        m = fmax(m, fabs((double)ge2_f32_from_bf16(((const uint16_t *)v->data)[i])));
    return m;
}


/* Fails naming the first element out of tolerance (see the file comment);
 * scale: the magnitude of the operands, for outputs that cancel to ~0. */
static void assert_close(const char *what, const float *got /* cuda */, const float *want /* cpu */, int64_t n,
                         double rtol, double scale)
{
    double floor = rtol * fmax(max_abs(want, n), scale);
    for (int64_t i = 0; i < n; i++) {
        double g = got[i], w = want[i];
        bool same_special = (isnan(g) && isnan(w)) || (isinf(g) && g == w);
        ck_assert_msg(same_special || fabs(g - w) <= rtol * fabs(w) + floor,
                      "%s: element %lld: CUDA %.9g, CPU %.9g (|diff| %.3g > %.3g)", what, (long long)i, g, w,
                      fabs(g - w), rtol * fabs(w) + floor);
    }
}

/* got is coarser than rtol of want's largest value somewhere: a kernel of
 * lower precision than the one an rtol check was meant to hold */
static void assert_misses(const char *what, const float *got, const float *want, int64_t n, double rtol)
{
    double worst = 0;
    for (int64_t i = 0; i < n; i++)
        worst = fmax(worst, fabs((double)got[i] - (double)want[i]));
    ck_assert_msg(worst > rtol * max_abs(want, n), "%s: within %.3g of the CPU everywhere (largest |diff| %.3g)",
                  what, rtol * max_abs(want, n), worst);
}

/* bf16 values (the cast op's): CUDA's __float2bfloat16_rn and the CPU's
 * graph/bf16.h must round every element to the same bits */
static void assert_same_bits(const char *what, const uint16_t *got /* cuda */, const uint16_t *want /* cpu */,
                             int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(got[i] == want[i], "%s: element %lld: CUDA 0x%04x, CPU 0x%04x", what, (long long)i,
                      (unsigned)got[i], (unsigned)want[i]);
}

/* bf16 outputs an op rounds from its own f32 result (ge2_op_def.stores_bf16):
 * the two f32 results differ in summation order (RTOL_GEMM), so their
 * roundings may differ by one bf16 step, 2^-8 relative */
static void assert_close_bf16(const char *what, const uint16_t *got, const uint16_t *want, int64_t n, double scale)
{
    float *g = malloc(sizeof(float) * (size_t)(n ? n : 1)), *w = malloc(sizeof(float) * (size_t)(n ? n : 1));
    ck_assert(g && w);
    for (int64_t i = 0; i < n; i++) {
        g[i] = ge2_f32_from_bf16(got[i]);
        w[i] = ge2_f32_from_bf16(want[i]);
    }
    assert_close(what, g, w, n, 1.0 / 128, RTOL_GEMM * scale);
    free(g);
    free(w);
}

/* A convolution's output under bf16 (fp16): both sides sum exact products
 * of 16-bit operands in fp32 and round the sum to that type, so they
 * differ (by one step) only where the two sums straddle a rounding
 * boundary: rare in bf16 (at most 1% of the elements), about eight times
 * as often in fp16, whose steps are eight times finer (on an H200 a
 * 288-term input gradient had 3.8% straddles; at most 10% allowed). A
 * kernel that multiplied unrounded operands (TF32, fp32), rounded to the
 * other type, or left its sums unrounded misses most of them. */
static void assert_rounded_alike(const char *what, const float *got, const float *want, int64_t n, double scale)
{
    assert_close(what, got, want, n, 1.0 / 128, RTOL_GEMM * scale);
    int64_t same = 0;
    for (int64_t i = 0; i < n; i++)
        same += memcmp(&got[i], &want[i], sizeof got[i]) == 0;
    const int64_t share = f16_launches ? n / 10 : n / 100, allowed = share > 1 ? share : 1; /* one even in a small case */
    ck_assert_msg(n - same <= allowed, "%s: %lld of %lld elements have the CPU's bits", what, (long long)same,
                  (long long)n);
}

/* ----------------------------------------------------- every tensor op */

/* Host random values for a leaf tensor the op case did not feed. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double rng01(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) * 0x1.0p-53;
}

static bool gemm_op(ge2_op op)
{
    return op == GE2_OP_LINEAR || op == GE2_OP_MATMUL || op == GE2_OP_LINEAR_GRAD_INPUT ||
           op == GE2_OP_LINEAR_GRAD_WEIGHT || op == ge2_op_linear_grad_input_recompute();
}

static bool attention_op(ge2_op op) { return op == GE2_OP_ATTENTION || op == GE2_OP_ATTENTION_GRAD; }

/* Set by large_attention under bf16 for the shapes cuDNN's attention must
 * take: check_graph then fails an attention launch that fell back to the
 * fp32 kernels (their description says why) */
static bool want_cudnn_attention;
/* Set by large_convolutions: cuDNN must run every convolution op (its bf16
 * engines under bf16) */
static bool want_cudnn_conv;
/* Launches of a train step (ge2_launch.training: batch norm's batch
 * statistics); false: an eval step's */
static bool train_launches;
/* Set by the tensor-core attention tests: every attention launch must run
 * on tensor cores, in TF32 (tf32_launches: the op's own kernel) or 3xTF32
 * (the candidate); in 3xTF32 each output is held to fp32's tolerance of
 * its own largest value, and in TF32 each (but lse) must miss that (so
 * the 3xTF32 check fails a kernel that took one pass) */
static bool want_tensor_cores;
/* Set by the dropout tests: large_attention's attentions drop weights with this probability */
static double attention_dropout;
/* Set by large_bias_gradients: its REDUCE_TO must take the two-pass column sums */
static bool want_column_chunks;
/* the storage pass must store some output in bf16 at its producer (a
 * linear layer's activation, an input gradient), not only cast */
static bool want_stored_bf16;

/* The storage pass on a case's graph, when the test asks for it */
static void maybe_storage_pass(ge2_graph *g, const char *label)
{
    int casts = 0, stored = 0, copies = 0;
    if (!bf16_storage)
        return;
    ck_assert_msg(ge2_fusion_rewrite(g, ~0u, NULL, NULL) == GE2_OK, "%s: fuse pass: %s", label, ge2_last_error());
    ck_assert_msg(ge2_bf16_storage_pass(g, &casts, &stored, &copies) == GE2_OK, "%s: storage pass: %s", label,
                  ge2_last_error());
    ck_assert_msg(casts + stored + copies > 0, "%s: the storage pass made no bf16 operand", label);
    if (want_stored_bf16)
        ck_assert_msg(stored > 0, "%s: no output was stored in bf16 by its producer", label);
}

/* LINEAR's relu bit-mask (u8 [B, row bytes], its output 1): the first n bits
 * of each row mean something, n = y's width; the padding is whatever the
 * backend left there, so it is cleared before any comparison. */
static bool relu_mask(const ge2_graph *g, int t, int64_t *bits)
{
    const ge2_tensor *x = g->tensors[t];
    if (x->dtype != GE2_U8 || x->producer < 0 || g->nodes[x->producer].op != GE2_OP_LINEAR)
        return false;
    *bits = g->tensors[g->nodes[x->producer].outputs[0]]->shape.dim[1];
    return true;
}

static void clear_mask_padding(const ge2_graph *g, int t, uint8_t *m)
{
    int64_t bits;
    if (!relu_mask(g, t, &bits))
        return;
    ge2_shape s = g->tensors[t]->shape;
    for (int64_t r = 0; r < s.dim[0]; r++)
        for (int64_t c = bits; c < s.dim[1] * 8; c++)
            m[r * s.dim[1] + c / 8] &= (uint8_t)~(1u << (c % 8));
}

/* The masks agree bit for bit, except where z rounds to either side of 0
 * (the CPU's y there is within the GEMM tolerance of 0). */
static void assert_mask_agrees(const char *what, const ge2_graph *g, const ge2_node *node, uint8_t *got,
                               uint8_t *want, const float *y_cpu, double tol)
{
    int t = node->outputs[1];
    clear_mask_padding(g, t, got);
    clear_mask_padding(g, t, want);
    ge2_shape s = g->tensors[t]->shape;
    int64_t n = g->tensors[node->outputs[0]]->shape.dim[1];
    for (int64_t r = 0; r < s.dim[0]; r++)
        for (int64_t c = 0; c < n; c++) {
            int a = (got[r * s.dim[1] + c / 8] >> (c % 8)) & 1, b = (want[r * s.dim[1] + c / 8] >> (c % 8)) & 1;
            ck_assert_msg(a == b || fabs(y_cpu[r * n + c]) <= tol, "%s: bit [%lld, %lld]: CUDA %d, CPU %d (y %.9g)",
                          what, (long long)r, (long long)c, a, b, (double)y_cpu[r * n + c]);
        }
}

static bool optimizer_op(ge2_op op)
{
    return (ge2_op_flags(op) & GE2_OPF_OPTIMIZER) != 0;
}

/* Every output a launch writes, as raw bytes. */
static void **save_outputs(const ge2_graph *g, const ge2_launch *lgs, int n, void **gpu, const size_t *bytes)
{
    void **saved = calloc((size_t)g->n_tensors, sizeof(void *));
    ck_assert(saved);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < lgs[i].n_out; k++) {
            int t = lgs[i].node->outputs[k];
            saved[t] = malloc(bytes[t] ? bytes[t] : 1);
            ck_assert(saved[t]);
            from_device(saved[t], gpu[t], bytes[t]);
            clear_mask_padding(g, t, saved[t]);
        }
    return saved;
}

static void free_saved(const ge2_graph *g, void **saved)
{
    for (int t = 0; t < g->n_tensors; t++)
        free(saved[t]);
    free(saved);
}

/* The launches must be capturable (no sync, no allocation, no host read)
 * and deterministic: the whole sequence, captured into one CUDA Graph and
 * replayed twice over outputs poisoned with NaN, reproduces an eager run of
 * the same sequence bit for bit (the ticket counters reset themselves). */
static void check_capture(const char *label, const ge2_graph *g, ge2_launch *lgs, int n, void **gpu,
                          const size_t *bytes, const device *d)
{
    for (int i = 0; i < n; i++)
        cuda_enqueue(&lgs[i]);
    CK_CUDA(cudaStreamSynchronize(d->stream));
    void **eager = save_outputs(g, lgs, n, gpu, bytes);

    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CK_CUDA(cudaStreamBeginCapture(d->stream, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < n; i++)
        cuda_enqueue(&lgs[i]);
    CK_CUDA(cudaStreamEndCapture(d->stream, &graph));
    CK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    for (int replay = 0; replay < 2; replay++) {
        for (int i = 0; i < n; i++)
            for (int k = 0; k < lgs[i].n_out; k++)
                poison(gpu[lgs[i].node->outputs[k]], bytes[lgs[i].node->outputs[k]]);
        CK_CUDA(cudaGraphLaunch(exec, d->stream));
        CK_CUDA(cudaStreamSynchronize(d->stream));
        void **got = save_outputs(g, lgs, n, gpu, bytes);
        for (int i = 0; i < n; i++)
            for (int k = 0; k < lgs[i].n_out; k++) {
                int t = lgs[i].node->outputs[k];
                ck_assert_msg(memcmp(got[t], eager[t], bytes[t]) == 0,
                              "%s: replay %d of the captured graph: node %d %s output %d differs from eager", label,
                              replay, lgs[i].node->id, ge2_op_name(lgs[i].node->op), k);
            }
        free_saved(g, got);
    }
    CK_CUDA(cudaGraphExecDestroy(exec));
    CK_CUDA(cudaGraphDestroy(graph));
    free_saved(g, eager);
}

/* Runs every node of the case's graph in creation order (a topological
 * order) on both backends and compares each tensor a node writes. */
static void check_graph(const char *label, const ge2_graph *g, const ge2_feed *feeds, int n_feeds)
{
    int n = g->n_tensors;
    void **cpu = calloc((size_t)n, sizeof(void *)), **gpu = calloc((size_t)n, sizeof(void *));
    size_t *bytes = calloc((size_t)n, sizeof(size_t));
    ck_assert(cpu && gpu && bytes);

    /* Leaves get the case's data (or the initializer, for parameters);
     * everything else starts as NaN on the CPU, so an unwritten element shows. */
    for (int t = 0; t < n; t++) {
        const ge2_tensor *x = g->tensors[t];
        int64_t numel = ge2_shape_numel(x->shape);
        bytes[t] = (size_t)numel * ge2_dtype_size(x->dtype);
        cpu[t] = malloc(bytes[t] ? bytes[t] : 1);
        ck_assert(cpu[t]);
        const void *given = NULL;
        for (int f = 0; f < n_feeds; f++)
            if (feeds[f].tensor == x)
                given = feeds[f].data;
        if (given)
            memcpy(cpu[t], given, bytes[t]);
        else if (x->role == GE2_ROLE_PARAMETER)
            ge2_init_fill(g, x, cpu[t]);
        else if (x->role == GE2_ROLE_CONSTANT && x->constant_data)
            memcpy(cpu[t], x->constant_data, bytes[t]);
        else if (x->role == GE2_ROLE_BUFFER && x->dtype == GE2_F32)
            /* persistent state such as batch norm's running variance, which
             * an eval step takes the square root of: positive */
            for (int64_t i = 0; i < numel; i++)
                ((float *)cpu[t])[i] = (float)(0.5 + rng01());
        else if (x->producer < 0 && x->dtype == GE2_F32)
            for (int64_t i = 0; i < numel; i++)
                ((float *)cpu[t])[i] = (float)(2.0 * rng01() - 1.0);
        else if (x->dtype == GE2_F32)
            for (int64_t i = 0; i < numel; i++)
                ((float *)cpu[t])[i] = NAN;
        else if (x->dtype == GE2_BF16 && x->producer >= 0)
            memset(cpu[t], 0xff, bytes[t]); /* 0xffff: a bf16 NaN */
        else if (x->producer < 0)
            memset(cpu[t], 0, bytes[t]);
        gpu[t] = to_device(cpu[t], bytes[t]);
    }

    device d;
    device_open(&d);
    /* a loss scale of 4 on both sides: the backward's seed (LOSS_SCALE) and
     * the cross-entropy's gradient carry it; a seed and a random offset
     * (some step's) that ops drawing random numbers read on both sides */
    ge2_control host_control;
    memset(&host_control, 0, sizeof host_control);
    host_control.loss_scale = 4.0f;
    host_control.rng_seed = 0x9e3779b97f4a7c15ull;
    host_control.rng_offset = 5 * GE2_RNG_OFFSET_STRIDE;
    h2d(d.control, &host_control, sizeof host_control);
    ge2_launch *lgs = calloc((size_t)g->n_nodes, sizeof *lgs); /* the CUDA launches, prepared, for the capture */
    ck_assert(lgs);
    int checked = 0, n_lgs = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ge2_node *node = &g->nodes[i];
        if (optimizer_op(node->op))
            continue;
        ge2_launch lc, lg;
        memset(&lc, 0, sizeof lc);
        lc.node = node;
        lc.n_in = node->n_inputs;
        lc.n_out = node->n_outputs;
        for (int k = 0; k < node->n_inputs; k++) {
            const ge2_tensor *x = g->tensors[node->inputs[k]];
            lc.in[k] = (ge2_view){cpu[x->id], x->dtype, x->shape};
        }
        for (int k = 0; k < node->n_outputs; k++) {
            const ge2_tensor *y = g->tensors[node->outputs[k]];
            lc.out[k] = (ge2_view){cpu[y->id], y->dtype, y->shape};
        }
        lc.control = &host_control;
        lc.bf16_operands = bf16_launches;
        lc.f16_operands = f16_launches;
        lc.training = train_launches;
        lg = lc;
        device_fill(&d, &lg);
        for (int k = 0; k < node->n_inputs; k++)
            lg.in[k].data = gpu[node->inputs[k]];
        for (int k = 0; k < node->n_outputs; k++)
            lg.out[k].data = gpu[node->outputs[k]];

        /* softmax_backward of a row-constant dy is exactly 0 in math and
         * ~1e-11 in floats: judge it against its operands' magnitude */
        double in_scale = 0;
        for (int k = 0; k < node->n_inputs; k++)
            if (!(k == 1 && (ge2_op_flags(node->op) & GE2_OPF_LIKE1)))
                in_scale = fmax(in_scale, max_abs_view(&lc.in[k]));
        const char *name = ge2_op_name(node->op);
        ck_assert_msg(ge2_op_run_cpu(&lc) == GE2_OK, "%s: CPU kernel: %s", name, ge2_last_error());
        cuda_prepare(&lg);
        if (want_cudnn_conv && conv_op(node->op)) {
            const char *kernel = kernel_of(&lg)->describe(&lg);
            printf("%s: %s: %s\n", label, name, kernel);
            const char *engine = f16_launches ? " fp16 engine" : bf16_launches ? " bf16 engine" : " engine";
            ck_assert_msg(strncmp(kernel, "cuDNN", 5) == 0 && strstr(kernel, engine),
                          "%s: %s ran %s", label, name, kernel);
        }
        if (want_cudnn_attention && attention_op(node->op)) {
            const char *kernel = kernel_of(&lg)->describe(&lg);
            printf("%s: %s: %s\n", label, name, kernel);
            ck_assert_msg(strncmp(kernel, "cuDNN", 5) == 0, "%s: %s ran %s", label, name, kernel);
        }
        if (want_tensor_cores && attention_op(node->op)) {
            const char *kernel = kernel_of(&lg)->describe(&lg);
            const char *passes = tf32_launches ? "(64 x 64 tiles, TF32 tensor cores)" : "3xTF32 tensor cores";
            ck_assert_msg(strstr(kernel, passes), "%s: %s ran %s", label, name, kernel);
        }
        if (want_column_chunks && node->op == GE2_OP_REDUCE_TO) {
            const char *kernel = kernel_of(&lg)->describe(&lg);
            ck_assert_msg(strstr(kernel, "chunks"), "%s: %s ran %s", label, name, kernel);
        }
        cuda_enqueue(&lg);
        CK_CUDA(cudaStreamSynchronize(d.stream));
        lgs[n_lgs++] = lg;

        for (int k = 0; k < node->n_outputs; k++) {
            const ge2_tensor *y = g->tensors[node->outputs[k]];
            int64_t numel = ge2_shape_numel(y->shape);
            float *got = malloc(bytes[y->id] ? bytes[y->id] : 1);
            ck_assert(got);
            from_device(got, gpu[y->id], bytes[y->id]);
            char what[256], shape[64];
            snprintf(what, sizeof what, "%s: node %d %s: output %d '%s' %s", label, node->id, name, k, y->name,
                     ge2_shape_str(y->shape, shape, sizeof shape));
            if (y->dtype == GE2_U8)
                assert_mask_agrees(what, g, node, (uint8_t *)got, cpu[y->id], cpu[node->outputs[0]],
                                   RTOL_GEMM * fmax(in_scale, 1.0));
            else if (y->dtype == GE2_BF16 && node->op == GE2_OP_CAST)
                assert_same_bits(what, (const uint16_t *)got, cpu[y->id], numel);
            else if (y->dtype == GE2_BF16) /* stored rounded by its producer: f32 sums in another order */
                assert_close_bf16(what, (const uint16_t *)got, cpu[y->id], numel, in_scale);
            else if ((bf16_launches || f16_launches) && conv_op(node->op) && k == 0)
                assert_rounded_alike(what, got, cpu[y->id], numel, in_scale);
            else if (want_tensor_cores && attention_op(node->op) && !tf32_launches)
                assert_close(what, got, cpu[y->id], numel, RTOL, 0.0);
            else
                assert_close(what, got, cpu[y->id], numel,
                             bf16_launches && attention_op(node->op)   ? RTOL_BF16_ATTENTION
                             : tf32_launches && attention_op(node->op) ? RTOL_TF32_ATTENTION
                             : gemm_op(node->op) || conv_op(node->op) ? RTOL_GEMM
                                                                     : RTOL,
                             in_scale);
            if (want_tensor_cores && attention_op(node->op) && tf32_launches && y->dtype == GE2_F32 &&
                !(node->op == GE2_OP_ATTENTION && k == 1))
                assert_misses(what, got, cpu[y->id], numel, RTOL);
            /* later nodes read the CPU's values on both sides, so one
             * disagreement is reported where it starts, not downstream */
            h2d(gpu[y->id], cpu[y->id], bytes[y->id]);
            free(got);
            checked++;
        }
    }
    ck_assert_msg(checked > 0, "%s: no node ran", label);
    check_capture(label, g, lgs, n_lgs, gpu, bytes, &d);
    for (int i = 0; i < n_lgs; i++)
        cuda_release(&lgs[i]);
    free(lgs);
    device_close(&d);
    for (int t = 0; t < n; t++) {
        free(cpu[t]);
        CK_CUDA(cudaFree(gpu[t]));
    }
    free(cpu);
    free(gpu);
    free(bytes);
}

/* For a differentiable case: a scalar loss over the op's output 0 — itself
 * when it is a scalar, else sum(y * r) with a random constant r so every
 * element gets its own upstream gradient — and its backward, so the op's
 * backward ops run too. */
static void add_backward(ge2_op_instance *inst, uint64_t seed)
{
    ge2_graph *g = inst->graph;
    ge2_tensor *y = g->tensors[g->nodes[inst->node].outputs[0]], *loss = y;
    int64_t n = ge2_shape_numel(y->shape);
    if (y->shape.ndim > 0) {
        float *r = malloc(sizeof(float) * (size_t)(n ? n : 1));
        ck_assert(r);
        rng_state = seed * 0x2545f4914f6cdd1dull + 1;
        for (int64_t i = 0; i < n; i++)
            r[i] = (float)(2.0 * rng01() - 1.0);
        ge2_tensor *rt, *m;
        ck_assert_msg(ge2_constant(g, "upstream", GE2_F32, y->shape, r, &rt) == GE2_OK, "%s", ge2_last_error());
        ck_assert_msg(ge2_mul(g, y, rt, &m) == GE2_OK, "%s", ge2_last_error());
        ck_assert_msg(ge2_sum_all(g, m, &loss) == GE2_OK, "%s", ge2_last_error());
        free(r);
    }
    ck_assert_msg(ge2_backward(g, loss) == GE2_OK, "backward: %s", ge2_last_error());
}

static void op_agrees(ge2_op op)
{
    const char *name = ge2_op_name(op);
    ck_assert_msg(ge2_op_def_of(op)->cuda.launch, "%s: no CUDA kernel in the table", name);
    const ge2_op_case *c = ge2_op_case_of(op);
    if (c->kind == GE2_CASE_ELSEWHERE)
        return; /* the optimizer ops: test_optimizer_agrees */
    ck_assert_msg(c->body, "%s: no op case", name);
    for (uint64_t seed = 1; seed <= 6; seed++) {
        ge2_op_instance inst;
        memset(&inst, 0, sizeof inst);
        ck_assert_msg(ge2_op_case_build(c, seed, GE2_F32, &inst) == GE2_OK, "%s: op case: %s", name, ge2_last_error());
        if (c->kind == GE2_CASE_GRADIENT)
            add_backward(&inst, seed);
        char label[96];
        snprintf(label, sizeof label, "case %s seed %llu", name, (unsigned long long)seed);
        maybe_storage_pass(inst.graph, label);
        /* a node that draws (dropout; attention with dropout) is checked in a
         * train step, where it draws: both sides read the same control block */
        train_launches = ge2_node_draws_random(&inst.graph->nodes[inst.node]);
        check_graph(label, inst.graph, inst.feeds, inst.n_feeds);
        train_launches = false;
        ge2_op_instance_free(&inst);
    }
}

START_TEST(test_op_agrees)
{
    op_agrees((ge2_op)_i);
}
END_TEST

/* The GEMM ops again with every node on ge2's tiled GEMM (gemm_tiled.cu)
 * instead of cuBLASLt: the kernel registry's other family. */
START_TEST(test_gemm_op_agrees_tiled)
{
    if (!gemm_op((ge2_op)_i))
        return;
    setenv("GE2_GEMM_KERNEL", "tiled", 1);
    op_agrees((ge2_op)_i);
}
END_TEST

/* The GEMM ops again with precision BF16 on both backends: the CPU's
 * rounded operands against cuBLASLt on the bf16 copies the launch rounds
 * into its scratch (docs/mixed-precision.md, step 3). */
START_TEST(test_gemm_op_agrees_bf16)
{
    if (!gemm_op((ge2_op)_i) && !conv_op((ge2_op)_i))
        return;
    bf16_launches = true;
    op_agrees((ge2_op)_i);
}
END_TEST

/* And with the storage pass's bf16 operand tensors (step 4) */
START_TEST(test_gemm_op_agrees_bf16_storage)
{
    if (!gemm_op((ge2_op)_i) && !conv_op((ge2_op)_i))
        return;
    bf16_launches = bf16_storage = true;
    op_agrees((ge2_op)_i);
}
END_TEST

/* The GEMM and convolution ops with precision FP16 on both backends: the
 * CPU's fp16-rounded operands against cuBLASLt and cuDNN on the fp16
 * copies the launches round into their scratch, and ge2's direct
 * convolutions rounding as they read. */
START_TEST(test_gemm_op_agrees_fp16)
{
    if (!gemm_op((ge2_op)_i) && !conv_op((ge2_op)_i))
        return;
    f16_launches = true;
    op_agrees((ge2_op)_i);
    if (conv_op((ge2_op)_i)) {
        direct_conv = true;
        op_agrees((ge2_op)_i);
    }
}
END_TEST

/* The convolution ops in BF16 on ge2's direct kernels, the fallback where
 * cuDNN has no bf16 engine: on f32 operands they round as they read, on
 * the storage pass's bf16 tensors they read them as they are. */
START_TEST(test_conv_op_agrees_direct_bf16)
{
    if (!conv_op((ge2_op)_i))
        return;
    direct_conv = bf16_launches = true;
    op_agrees((ge2_op)_i);
    bf16_storage = true;
    op_agrees((ge2_op)_i);
}
END_TEST

/* The op cases are tiny (dims 1..4); these graphs are big enough for the
 * kernels' other paths: float4 bodies and tails, multi-block grids and
 * several loss blocks, block-per-output reductions, 32x32 transpose tiles
 * with ragged edges. Built through the public API, with their backward. */
static float *random_f32(int64_t n, double lo, double hi)
{
    float *p = malloc(sizeof(float) * (size_t)(n ? n : 1));
    ck_assert(p);
    for (int64_t i = 0; i < n; i++)
        p[i] = (float)(lo + (hi - lo) * rng01());
    return p;
}

/* Whether the CUDA GEMM does round the operands to bf16 as the CPU does
 * (cuBLASLt's FAST_16BF on fp32 operands, the first try, ran TF32 on an
 * H100 and failed here): a 64 x 64 x 64 linear layer with operands whose
 * bf16 values differ from their fp32 ones, on aligned buffers. The CUDA
 * product must match the CPU's rounded one within fp32 sum tolerances and
 * be farther from the CPU's fp32 one. */
static void gemm_rounds_operands(bool f16)
{
    enum { D = 64 };
    float *x = random_f32(D * D, -1, 1), *w = random_f32(D * D, -1, 1);
    float y_half[D * D], y_fp32[D * D], got[D * D];
    ge2_node node;
    memset(&node, 0, sizeof node);
    node.op = GE2_OP_LINEAR;
    node.n_inputs = 2;
    node.n_outputs = 1;
    GE2_ATTRS(ge2_linear_attrs, node.attrs)->act = GE2_ACT_NONE;
    ge2_launch lc;
    memset(&lc, 0, sizeof lc);
    lc.node = &node;
    lc.n_in = 2;
    lc.n_out = 1;
    lc.in[0] = (ge2_view){x, GE2_F32, ge2_shape2(D, D)};
    lc.in[1] = (ge2_view){w, GE2_F32, ge2_shape2(D, D)};
    lc.out[0] = (ge2_view){y_fp32, GE2_F32, ge2_shape2(D, D)};
    ck_assert_int_eq(ge2_op_def_of(GE2_OP_LINEAR)->cpu(&lc), GE2_OK);
    lc.bf16_operands = !f16;
    lc.f16_operands = f16;
    lc.out[0].data = y_half;
    ck_assert_int_eq(ge2_op_def_of(GE2_OP_LINEAR)->cpu(&lc), GE2_OK);
    device d;
    device_open(&d);
    ge2_launch lg = lc;
    device_fill(&d, &lg);
    lg.in[0].data = to_device(x, sizeof x[0] * D * D);
    lg.in[1].data = to_device(w, sizeof w[0] * D * D);
    lg.out[0].data = to_device(NULL, sizeof got);
    cuda_run(&lg);
    from_device(got, lg.out[0].data, sizeof got);
    int nearer_half = 0;
    double worst = 0;
    for (int i = 0; i < D * D; i++) {
        const double to_half = fabs(got[i] - y_half[i]), to_fp32 = fabs(got[i] - y_fp32[i]);
        nearer_half += to_half < to_fp32;
        worst = fmax(worst, to_half);
    }
    ck_assert_msg(worst <= 1e-4 && nearer_half > D * D * 9 / 10,
                  "%s GEMM: worst |CUDA - CPU rounded| %.3g, nearer the rounded product in %d of %d (a TF32 or "
                  "fp32 GEMM would be nearer the fp32 one)", f16 ? "fp16" : "bf16", worst, nearer_half, D * D);
    device_close(&d);
    CK_CUDA(cudaFree(lg.in[0].data));
    CK_CUDA(cudaFree(lg.in[1].data));
    CK_CUDA(cudaFree(lg.out[0].data));
    free(x);
    free(w);
}

START_TEST(test_bf16_gemm_rounds_operands)
{
    gemm_rounds_operands(false);
}
END_TEST

/* The same in fp16: cuBLASLt on CUDA_R_16F copies (an fp16 GEMM that
 * rounded to bf16 instead would miss the CPU's fp16 product too) */
START_TEST(test_fp16_gemm_rounds_operands)
{
    gemm_rounds_operands(true);
}
END_TEST

#define OK(expr) ck_assert_msg((expr) == GE2_OK, "%s: %s", #expr, ge2_last_error())

static ge2_tensor *param(ge2_graph *g, const char *name, ge2_shape s)
{
    ge2_tensor *t;
    ge2_init init = {GE2_INIT_UNIFORM, -0.5, 0.5, 0};
    OK(ge2_parameter(g, name, GE2_F32, s, init, &t));
    return t;
}

/* MLP 99 -> 130 (gelu, z stash) -> 10 with label-smoothed cross-entropy,
 * accuracy and its backward; 257 rows = 33 loss blocks of 8 rows, ragged. */
static void large_mlp(void)
{
    enum { B = 257, IN = 99, H = 130, OUT = 10 };
    ge2_graph *g;
    OK(ge2_graph_new(&g));
    ge2_tensor *x, *labels, *h, *logits, *loss, *correct;
    OK(ge2_input(g, "x", GE2_F32, ge2_shape2(B, IN), &x));
    OK(ge2_label(g, "labels", GE2_I32, ge2_shape1(B), &labels));
    OK(ge2_linear(g, x, param(g, "w1", ge2_shape2(H, IN)), param(g, "b1", ge2_shape1(H)), GE2_ACT_GELU_TANH, 0, &h));
    OK(ge2_linear(g, h, param(g, "w2", ge2_shape2(OUT, H)), param(g, "b2", ge2_shape1(OUT)), GE2_ACT_NONE, 0,
                  &logits));
    OK(ge2_cross_entropy(g, logits, labels, 0.1f, &loss));
    OK(ge2_accuracy(g, logits, labels, &correct));
    OK(ge2_backward(g, loss));
    float *xd = random_f32(B * IN, -1, 1);
    int32_t *yd = malloc(sizeof(int32_t) * B);
    ck_assert(yd);
    for (int i = 0; i < B; i++)
        yd[i] = (int32_t)(rng01() * OUT);
    ge2_feed feeds[] = {{x, xd, ge2_shape2(B, IN)}, {labels, yd, ge2_shape1(B)}};
    check_graph("large mlp", g, feeds, 2);
    free(xd);
    free(yd);
    ge2_graph_free(g);
}

/* Broadcasting, softmax rows longer than a warp, reductions over long axes,
 * transpose, concat, slice and MSE, with the backward of all of it. */
static void large_mixed(void)
{
    ge2_graph *g;
    OK(ge2_graph_new(&g));
    ge2_tensor *a, *t, *u, *v, *w, *sm, *lsm, *s1, *m0, *tr, *cat, *sl, *mse, *target, *sum_all, *l1, *l2, *l3, *loss;
    OK(ge2_input(g, "a", GE2_F32, ge2_shape3(6, 67, 45), &a));
    OK(ge2_input(g, "target", GE2_F32, ge2_shape2(45, 67), &target));
    ge2_tensor *bias = param(g, "bias", ge2_shape2(67, 1)), *gain = param(g, "gain", ge2_shape1(45));
    OK(ge2_add(g, a, bias, &t));                       /* [6,67,45] + [67,1] */
    OK(ge2_mul(g, t, gain, &u));                       /* * [45] */
    OK(ge2_sub(g, u, a, &v));
    OK(ge2_scale(g, v, 0.75, &w));
    OK(ge2_softmax(g, w, &sm));                        /* rows of 45 > 32 lanes */
    OK(ge2_log_softmax(g, u, &lsm));
    OK(ge2_sum(g, lsm, 0, &s1));                       /* [67,45], reduction over 6 */
    OK(ge2_mean(g, sm, 1, &m0));                       /* [6,45] over 67 */
    OK(ge2_transpose(g, s1, &tr));                     /* [45,67]: ragged 32x32 tiles */
    ge2_tensor *parts[2] = {tr, target};
    OK(ge2_concat(g, parts, 2, 1, &cat));              /* [45,134] */
    OK(ge2_slice(g, cat, 1, 3, 70, &sl));              /* [45,67] */
    OK(ge2_mse_loss(g, sl, target, &mse));
    OK(ge2_sum_all(g, m0, &sum_all));                  /* 270 elements */
    OK(ge2_mean_all(g, v, &l1));                       /* 18090 elements: block-per-output */
    OK(ge2_add(g, mse, sum_all, &l2));
    OK(ge2_add(g, l2, l1, &l3));
    OK(ge2_scale(g, l3, 1.0, &loss));
    OK(ge2_backward(g, loss));
    float *ad = random_f32(6 * 67 * 45, -2, 2), *td = random_f32(45 * 67, -1, 1);
    ge2_feed feeds[] = {{a, ad, ge2_shape3(6, 67, 45)}, {target, td, ge2_shape2(45, 67)}};
    check_graph("large mixed", g, feeds, 2);
    free(ad);
    free(td);
    ge2_graph_free(g);
}

/* Reductions shaped for each of the reduce kernels: block per output
 * (strided and contiguous terms), warp per output, 32-column slices, and a
 * REDUCE_TO over two separated dims (a broadcast mul's gradient). */
static void large_reductions(void)
{
    static const int64_t shapes[][2] = {{3000, 5}, {40, 5000}, {3000, 100}, {100, 3000}};
    static const int axes[] = {0, 1, 1, 0};
    ge2_graph *g;
    OK(ge2_graph_new(&g));
    ge2_tensor *loss = NULL, *a, *u, *v;
    for (int i = 0; i < 4; i++) {
        char name[16];
        snprintf(name, sizeof name, "r%d", i);
        ge2_tensor *p = param(g, name, ge2_shape2(shapes[i][0], shapes[i][1])), *r, *t;
        OK(i % 2 ? ge2_mean(g, p, axes[i], &r) : ge2_sum(g, p, axes[i], &r));
        OK(ge2_sum_all(g, r, &t));
        if (loss)
            OK(ge2_add(g, loss, t, &loss));
        else
            loss = t;
    }
    OK(ge2_input(g, "a", GE2_F32, ge2_shape3(64, 33, 17), &a));
    OK(ge2_mul(g, a, param(g, "q", ge2_shape2(33, 1)), &u));
    OK(ge2_sum_all(g, u, &v));
    OK(ge2_add(g, loss, v, &loss));
    OK(ge2_backward(g, loss));
    float *ad = random_f32(64 * 33 * 17, -1, 1);
    ge2_feed feeds[] = {{a, ad, ge2_shape3(64, 33, 17)}};
    check_graph("large reductions", g, feeds, 1);
    free(ad);
    ge2_graph_free(g);
}

/* Attention over several 64-row tiles, ragged in T and D (the tiled
 * kernels, D <= 64), causal and not, heads outside or inside the positions
 * ([B, H, T, D] or [B, T, H, D]), and with D = 100 (a warp per row), with
 * its backward; the upstream gradient is random. */
static void large_attention_cases(bool tiles_only)
{
    static const struct {
        int64_t batch, heads, t, d;
        bool causal, bthd;
    } cases[] = {{2, 3, 150, 64, true, false}, {1, 2, 130, 40, false, false}, {1, 1, 70, 100, true, false},
                 {2, 3, 150, 64, true, true},  {1, 2, 130, 40, false, true}, {2, 2, 70, 100, true, true},
                 /* shapes cuDNN's attention takes under bf16 (a multiple of 128 positions on cuDNN 9.14) */
                 {2, 3, 128, 64, true, true},  {2, 2, 256, 32, false, false}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        if (tiles_only && cases[c].d > 64)
            continue; /* a warp per row: the tiled kernels' candidates do not apply */
        const ge2_shape s = cases[c].bthd ? ge2_shape4(cases[c].batch, cases[c].t, cases[c].heads, cases[c].d)
                                          : ge2_shape4(cases[c].batch, cases[c].heads, cases[c].t, cases[c].d);
        ge2_graph *g;
        OK(ge2_graph_new(&g));
        ge2_tensor *y, *up, *m, *loss;
        OK((cases[c].bthd ? ge2_attention_bthd : ge2_attention)(g, param(g, "q", s), param(g, "k", s),
                                                                param(g, "v", s), cases[c].causal, &y));
        if (attention_dropout > 0)
            OK(ge2_attention_dropout(g, y, attention_dropout));
        OK(ge2_input(g, "upstream", GE2_F32, s, &up));
        OK(ge2_mul(g, y, up, &m));
        OK(ge2_sum_all(g, m, &loss));
        OK(ge2_backward(g, loss));
        float *ud = random_f32(ge2_shape_numel(s), -1, 1);
        ge2_feed feeds[] = {{up, ud, s}};
        char label[64];
        snprintf(label, sizeof label, "large attention %zu", c);
        want_cudnn_attention = bf16_launches && cases[c].t % 128 == 0 && cases[c].d % 8 == 0;
        check_graph(label, g, feeds, 1);
        want_cudnn_attention = false;
        free(ud);
        ge2_graph_free(g);
    }
}

static void large_attention(void) { large_attention_cases(false); }

/* the cases the tiled kernels take (D <= 64) */
static void large_attention_tiles(void) { large_attention_cases(true); }

/* The GPT's data movement at sizes where the copies go 4 floats at a time:
 * heads split by a permute that keeps the last dim, q/k/v sliced from a
 * packed [.., 3C] row, and their backward (a permute back, a concat of the
 * three windows' gradients, and slice_backward for a window alone). */
static void large_moves(void)
{
    ge2_graph *g;
    OK(ge2_graph_new(&g));
    const int heads_first[] = {0, 2, 1, 3};
    const ge2_shape xs = ge2_shape4(4, 50, 6, 64), ps = ge2_shape4(4, 6, 50, 64), qs = ge2_shape3(8, 30, 32);
    ge2_tensor *p, *q, *u1, *u2, *m1, *m2, *l1, *l2, *loss;
    OK(ge2_permute(g, param(g, "x", xs), heads_first, 4, &p));
    ge2_tensor *qkv = param(g, "qkv", ge2_shape3(8, 30, 96)), *k, *v, *kv, *kvq;
    OK(ge2_slice(g, param(g, "window", ge2_shape3(8, 30, 96)), 2, 32, 64, &q)); /* alone: slice_backward */
    OK(ge2_slice(g, qkv, 2, 0, 32, &k)); /* three that tile qkv: their gradient is a concat */
    OK(ge2_slice(g, qkv, 2, 32, 64, &v));
    OK(ge2_slice(g, qkv, 2, 64, 96, &kv));
    OK(ge2_mul(g, k, v, &kvq));
    OK(ge2_mul(g, kvq, kv, &kvq));
    OK(ge2_add(g, q, kvq, &q));
    OK(ge2_input(g, "u1", GE2_F32, ps, &u1));
    OK(ge2_input(g, "u2", GE2_F32, qs, &u2));
    OK(ge2_mul(g, p, u1, &m1));
    OK(ge2_mul(g, q, u2, &m2));
    OK(ge2_sum_all(g, m1, &l1));
    OK(ge2_sum_all(g, m2, &l2));
    OK(ge2_add(g, l1, l2, &loss));
    OK(ge2_backward(g, loss));
    float *d1 = random_f32(ge2_shape_numel(ps), -1, 1), *d2 = random_f32(ge2_shape_numel(qs), -1, 1);
    ge2_feed feeds[] = {{u1, d1, ps}, {u2, d2, qs}};
    check_graph("large moves", g, feeds, 2);
    free(d1);
    free(d2);
    ge2_graph_free(g);
}

/* An embedding's backward over 12,000 positions: the segmented sums
 * (47 segments of 256 positions, the last ragged) */
static void large_embedding(void)
{
    enum { V = 50, C = 96, B = 40, T = 300 };
    ge2_graph *g;
    OK(ge2_graph_new(&g));
    ge2_tensor *ids, *y, *u, *m, *loss;
    OK(ge2_label(g, "ids", GE2_I32, ge2_shape2(B, T), &ids));
    OK(ge2_embedding(g, ids, param(g, "table", ge2_shape2(V, C)), &y));
    OK(ge2_input(g, "u", GE2_F32, ge2_shape3(B, T, C), &u));
    OK(ge2_mul(g, y, u, &m));
    OK(ge2_sum_all(g, m, &loss));
    OK(ge2_backward(g, loss));
    int32_t *idd = malloc(sizeof(int32_t) * B * T);
    ck_assert(idd);
    for (int i = 0; i < B * T; i++)
        idd[i] = (int32_t)(rng01() * rng01() * V); /* skewed: some rows far more often than others */
    float *ud = random_f32(B * T * C, -1, 1);
    ge2_feed feeds[] = {{ids, idd, ge2_shape2(B, T)}, {u, ud, ge2_shape3(B, T, C)}};
    check_graph("large embedding", g, feeds, 2);
    free(idd);
    free(ud);
    ge2_graph_free(g);
}

/* Bias gradients of a tall batch (1500 rows; 300 and 70 columns, neither a
 * multiple of 32), as the GPT's layers have them: the column sums that run
 * in chunks of rows (ops/reduce/cuda.cu), for the weight gradient's db
 * where no epilogue sums it (bf16) and for a REDUCE_TO over leading dims. */
static void large_bias_gradients(void)
{
    enum { B = 1500, IN = 70, H = 300 };
    ge2_graph *g;
    OK(ge2_graph_new(&g));
    ge2_tensor *x, *n, *h, *y, *u, *m, *l1, *l2, *loss, *shift, *r;
    OK(ge2_input(g, "x", GE2_F32, ge2_shape2(B, IN), &x));
    /* a layer norm first: under the storage pass its y is stored in bf16 (only GEMMs read it) */
    OK(ge2_layer_norm(g, x, param(g, "ln_w", ge2_shape1(IN)), param(g, "ln_b", ge2_shape1(IN)), 1e-5, &n));
    OK(ge2_linear(g, n, param(g, "w1", ge2_shape2(H, IN)), param(g, "b1", ge2_shape1(H)), GE2_ACT_GELU_TANH, 0, &h));
    OK(ge2_linear(g, h, param(g, "w2", ge2_shape2(IN, H)), param(g, "b2", ge2_shape1(IN)), GE2_ACT_NONE, 0, &y));
    /* a dropout after it: under the storage pass its backward's output, which
     * only the layer's backward GEMMs read, is stored in bf16 */
    ge2_tensor *yd;
    OK(ge2_dropout(g, y, 0.25, &yd));
    OK(ge2_input(g, "u", GE2_F32, ge2_shape2(B, IN), &u));
    OK(ge2_mul(g, yd, u, &m));
    OK(ge2_sum_all(g, m, &l1));
    OK(ge2_add(g, x, param(g, "shift", ge2_shape1(IN)), &shift)); /* its gradient: REDUCE_TO [B, IN] -> [IN] */
    OK(ge2_mul(g, shift, u, &r));
    OK(ge2_sum_all(g, r, &l2));
    /* a concat only a linear layer reads: under the storage pass, stored in
     * bf16 by the concat (whole float4 rows: its vector path) */
    ge2_tensor *parts[2] = {x, u}, *xu, *y3, *l3, *l12;
    OK(ge2_concat(g, parts, 2, 0, &xu));
    OK(ge2_linear(g, xu, param(g, "w3", ge2_shape2(IN, IN)), NULL, GE2_ACT_NONE, 0, &y3));
    OK(ge2_sum_all(g, y3, &l3));
    OK(ge2_add(g, l1, l2, &l12));
    OK(ge2_add(g, l12, l3, &loss));
    OK(ge2_backward(g, loss));
    float *xd = random_f32(B * IN, -1, 1), *ud = random_f32(B * IN, -1, 1);
    ge2_feed feeds[] = {{x, xd, ge2_shape2(B, IN)}, {u, ud, ge2_shape2(B, IN)}};
    want_column_chunks = true;
    maybe_storage_pass(g, "large bias gradients");
    check_graph("large bias gradients", g, feeds, 2);
    want_column_chunks = false;
    free(xd);
    free(ud);
    ge2_graph_free(g);
}

/* An RMS norm over 1,500 rows of 300 (three chunks of its weight
 * gradient's rows, columns not a multiple of 32) and its backward. */
static void large_rms_norm(void)
{
    enum { B = 1500, C = 300 };
    ge2_graph *g;
    OK(ge2_graph_new(&g));
    ge2_tensor *x, *u, *y, *m, *loss;
    OK(ge2_input(g, "x", GE2_F32, ge2_shape2(B, C), &x));
    OK(ge2_require_grad(g, x));
    OK(ge2_rms_norm(g, x, param(g, "rms.weight", ge2_shape1(C)), 1e-5, &y));
    OK(ge2_input(g, "u", GE2_F32, ge2_shape2(B, C), &u));
    OK(ge2_mul(g, y, u, &m));
    OK(ge2_sum_all(g, m, &loss));
    OK(ge2_backward(g, loss));
    float *xd = random_f32(B * C, -2, 2), *ud = random_f32(B * C, -1, 1);
    ge2_feed feeds[] = {{x, xd, ge2_shape2(B, C)}, {u, ud, ge2_shape2(B, C)}};
    check_graph("large rms norm", g, feeds, 2);
    free(xd);
    free(ud);
    ge2_graph_free(g);
}

/* A pre-norm block's residual adds into a layer norm and an RMS norm, as
 * the fuse pass makes them (ADD_LAYER_NORM, ADD_RMS_NORM: fusion/
 * residual_norm.h), each normalized sum read by a linear layer, 300 rows
 * of 64; the second sum is also read by the next residual add. Under the
 * storage pass the layer norm's y is stored in bf16 by the fused op. */
static void large_residual_norms(void)
{
    enum { B = 300, C = 64 };
    ge2_graph *g;
    OK(ge2_graph_new(&g));
    ge2_tensor *x, *h, *s1, *n1, *s2, *n2, *s3, *loss;
    OK(ge2_input(g, "x", GE2_F32, ge2_shape2(B, C), &x));
    OK(ge2_linear(g, x, param(g, "w0", ge2_shape2(C, C)), NULL, GE2_ACT_NONE, 0, &h));
    OK(ge2_add(g, x, h, &s1));
    OK(ge2_layer_norm_layer(g, "ln", s1, true, 1e-5, &n1));
    OK(ge2_linear(g, n1, param(g, "w1", ge2_shape2(C, C)), param(g, "b1", ge2_shape1(C)), GE2_ACT_GELU_TANH, 0,
                  &h));
    OK(ge2_add(g, s1, h, &s2));
    OK(ge2_rms_norm_layer(g, "rms", s2, 1e-5, &n2));
    OK(ge2_linear(g, n2, param(g, "w2", ge2_shape2(C, C)), NULL, GE2_ACT_NONE, 0, &h));
    OK(ge2_add(g, s2, h, &s3));
    OK(ge2_sum_all(g, s3, &loss));
    OK(ge2_backward(g, loss));
    int fused[64] = {0}, total = 0;
    OK(ge2_fusion_rewrite(g, ~0u, NULL, fused));
    for (int i = 0; i < ge2_fusion_pattern_count(); i++)
        if (strcmp(ge2_fusion_pattern_at(i)->name, "add_layer_norm") == 0 ||
            strcmp(ge2_fusion_pattern_at(i)->name, "add_rms_norm") == 0)
            total += fused[i];
    ck_assert_msg(total == 2, "the residual norms: %d fused, expected 2", total);
    float *xd = random_f32(B * C, -1, 1);
    ge2_feed feeds[] = {{x, xd, ge2_shape2(B, C)}};
    maybe_storage_pass(g, "residual norms");
    check_graph("residual norms", g, feeds, 1);
    free(xd);
    ge2_graph_free(g);
}

START_TEST(test_large_residual_norms_bf16_storage)
{
    bf16_launches = bf16_storage = want_stored_bf16 = true;
    large_residual_norms();
}
END_TEST

START_TEST(test_large_graphs_agree)
{
    large_mlp();
    large_mixed();
    large_reductions();
    large_attention();
    large_moves();
    large_embedding();
    large_bias_gradients();
    large_rms_norm();
    large_residual_norms();
}
END_TEST

/* A convolution of a CNN's size, stride 1 and 2, with bias, then batch
 * norm and their backward, in a train and an eval step, where cuDNN must
 * run every convolution op: in fp32, in bf16 on its bf16 engines through the storage
 * pass (the convolution's y and batch norm's input gradient stored in
 * bf16, which batch norm's kernels read and write), and in fp16. */
static void large_convolutions(void)
{
    for (int stride = 1; stride <= 2; stride++) {
        ge2_graph *g;
        OK(ge2_graph_new(&g));
        ge2_tensor *x = param(g, "x", ge2_shape4(8, 16, 14, 14)), *w = param(g, "w", ge2_shape4(32, 16, 3, 3));
        ge2_tensor *b = param(g, "b", ge2_shape1(32)), *y, *up, *m, *loss;
        ge2_conv2d_params cp = ge2_conv2d_defaults();
        cp.padding[0] = cp.padding[1] = 1;
        cp.stride[0] = cp.stride[1] = stride;
        OK(ge2_conv2d(g, x, w, b, &cp, &y));
        OK(ge2_batch_norm_layer(g, "bn", y, 0.1, 1e-5, &y));
        OK(ge2_input(g, "upstream", GE2_F32, y->shape, &up));
        OK(ge2_mul(g, y, up, &m));
        OK(ge2_sum_all(g, m, &loss));
        OK(ge2_backward(g, loss));
        float *ud = random_f32(ge2_shape_numel(y->shape), -1, 1);
        ge2_feed feeds[] = {{up, ud, y->shape}};
        char label[64];
        snprintf(label, sizeof label, "convolution, stride %d", stride);
        maybe_storage_pass(g, label);
        /* a train step (batch statistics), then an eval step (the running ones) */
        want_cudnn_conv = true;
        for (int train = 1; train >= 0; train--) {
            train_launches = train;
            char step_label[96];
            snprintf(step_label, sizeof step_label, "%s, %s step", label, train ? "train" : "eval");
            check_graph(step_label, g, feeds, 1);
        }
        want_cudnn_conv = train_launches = false;
        free(ud);
        ge2_graph_free(g);
    }
}

START_TEST(test_large_convolutions)
{
    large_convolutions();
}
END_TEST

START_TEST(test_large_convolutions_bf16)
{
    bf16_launches = bf16_storage = want_stored_bf16 = true;
    large_convolutions();
}
END_TEST

START_TEST(test_large_convolutions_fp16)
{
    f16_launches = true;
    large_convolutions();
}
END_TEST

/* Attention with precision BF16: cuDNN's fused attention where it takes
 * the shape (check the kernel report's line in the log), the fp32 kernels
 * elsewhere, against the fp32 CPU reference at bf16's precision; replay
 * equals eager bitwise (check_capture), so the backward is deterministic. */
START_TEST(test_large_attention_bf16)
{
    bf16_launches = true;
    large_attention();
}
END_TEST

/* Every op's registered candidates (ops/<family>/candidates.c) in place of
 * its own kernel, where they apply, over the op's cases */
START_TEST(test_candidates_agree)
{
    int n;
    const ge2_kernel_candidate *const *cs = ge2_kernel_candidates_of((ge2_op)_i, &n);
    for (int c = 0; c < n; c++) {
        use_candidate = cs[c]->name;
        op_agrees((ge2_op)_i);
    }
}
END_TEST

/* Attention's 3xTF32 candidate at the large shapes it takes (D <= 64):
 * three TF32 passes hold fp32's tolerance of each output's own size */
START_TEST(test_large_attention_tensor_cores)
{
    use_candidate = "ge2_attention_3xtf32";
    want_tensor_cores = true;
    large_attention_tiles();
}
END_TEST

/* ... and under precision TF32, where the op's own kernel takes one pass:
 * to TF32's precision, and coarser than fp32's (want_tensor_cores) */
START_TEST(test_large_attention_tensor_cores_tf32)
{
    want_tensor_cores = tf32_launches = true;
    large_attention_tiles();
}
END_TEST

/* The same with dropout on the weights (a train step draws the masks, the
 * backward draws them again): the fp32 kernels (tiled and a warp per row),
 * the 3xTF32 candidate and the one-pass TF32 kernels draw the CPU's masks */
START_TEST(test_large_attention_dropout)
{
    attention_dropout = 0.2;
    train_launches = true; /* only a train step draws */
    large_attention_cases(false);
}
END_TEST

START_TEST(test_large_attention_dropout_tensor_cores)
{
    attention_dropout = 0.2;
    train_launches = true;
    use_candidate = "ge2_attention_3xtf32";
    want_tensor_cores = true;
    large_attention_tiles();
}
END_TEST

START_TEST(test_large_attention_dropout_tf32)
{
    attention_dropout = 0.2;
    want_tensor_cores = tf32_launches = train_launches = true;
    large_attention_tiles();
}
END_TEST

/* The attention probe's masks (tests/support/attention_probe.h), two train
 * steps: under fp32 and TF32 CUDA draws the CPU's masks bit for bit; under
 * bf16 cuDNN draws its own, which must keep at the rate 1 - p, differ from
 * step to step, from head to head and from layer to layer (each layer's
 * seed is its own), and be the same in replayed and eager steps. cuDNN's
 * masks need not be independent Bernoulli draws weight by weight (one of
 * its random words may serve several weights), so the rate is held to
 * 0.02 a mask and 0.005 over all of them, not to 4 binomial deviations. */
enum { PROBE_STEPS = 2, PROBE_N = GE2_PROBE_WEIGHTS, PROBE_HEAD = GE2_PROBE_T * GE2_PROBE_T };

static void probe_masks(ge2_device device, ge2_precision precision, bool disable_capture,
                        unsigned char out[PROBE_STEPS][PROBE_N])
{
    ge2_attn_probe p;
    int64_t unclear;
    OK(ge2_attn_probe_open(&p, device, precision, disable_capture, 21));
    OK(ge2_attn_probe_train(&p, PROBE_STEPS, &out[0][0], &unclear));
    ck_assert_msg(unclear == 0, "%s %s: %lld outputs neither kept nor dropped", ge2_device_name(device),
                  ge2_precision_name(precision), (long long)unclear);
    if (precision == GE2_PRECISION_BF16) { /* cuDNN must take every attention launch, with its masks */
        char *report = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&report, &size);
        ck_assert_ptr_nonnull(f);
        OK(ge2_program_kernel_report(p.prog, GE2_MODE_TRAIN, f));
        fclose(f);
        int taken = 0;
        for (const char *at = report; (at = strstr(at, "cuDNN's dropout masks")); at++)
            taken++;
        ck_assert_msg(taken == 4, "bf16: %d of 4 attention launches on cuDNN's dropout:\n%s", taken, report);
        free(report);
    }
    ge2_attn_probe_close(&p);
}

START_TEST(test_attention_dropout_masks)
{
    static unsigned char cpu[PROBE_STEPS][PROBE_N], cuda[PROBE_STEPS][PROBE_N], eager[PROBE_STEPS][PROBE_N];
    probe_masks(GE2_DEVICE_CPU, GE2_PRECISION_FP32, false, cpu);
    const ge2_precision same_masks[] = {GE2_PRECISION_FP32, GE2_PRECISION_TF32};
    for (int k = 0; k < 2; k++) {
        probe_masks(GE2_DEVICE_CUDA, same_masks[k], false, cuda);
        for (int s = 0; s < PROBE_STEPS; s++) {
            int differ = 0;
            for (int i = 0; i < PROBE_N; i++)
                differ += cpu[s][i] != cuda[s][i];
            ck_assert_msg(differ == 0, "%s step %d: %d of %d weights masked unlike the CPU",
                          ge2_precision_name(same_masks[k]), s, differ, PROBE_N);
        }
    }
    probe_masks(GE2_DEVICE_CUDA, GE2_PRECISION_BF16, false, cuda);
    probe_masks(GE2_DEVICE_CUDA, GE2_PRECISION_BF16, true, eager);
    const double p = GE2_PROBE_P;
    const int limit = (int)(PROBE_HEAD * 0.75); /* independent masks agree on p² + (1-p)² = 0.68 */
    long long kept_all = 0;
    for (int s = 0; s < PROBE_STEPS; s++) {
        ck_assert_msg(memcmp(cuda[s], eager[s], PROBE_N) == 0, "bf16 step %d: replay's masks are not eager's", s);
        for (int m = 0; m < PROBE_N / PROBE_HEAD; m++) {
            int kept = 0;
            for (int i = 0; i < PROBE_HEAD; i++)
                kept += cuda[s][m * PROBE_HEAD + i];
            printf("attention dropout, bf16 (cuDNN's masks): step %d mask %d kept %d of %d\n", s, m, kept,
                   PROBE_HEAD);
            kept_all += kept;
            ck_assert_msg(fabs((double)kept / PROBE_HEAD - (1 - p)) < 0.02, "bf16 step %d mask %d kept %d of %d (p %g)",
                          s, m, kept, PROBE_HEAD, p);
            if (m > 0)
                ck_assert_msg(ge2_attn_probe_agree(cuda[s] + m * PROBE_HEAD, cuda[s]) < limit,
                              "bf16 step %d: mask %d repeats mask 0", s, m);
        }
        if (s > 0)
            ck_assert_msg(ge2_attn_probe_agree(cuda[s], cuda[0]) < limit, "bf16 step %d repeats step 0's mask", s);
    }
    const double rate = (double)kept_all / (PROBE_STEPS * PROBE_N);
    ck_assert_msg(fabs(rate - (1 - p)) < 0.005, "bf16: cuDNN kept %.4f of all weights, want %.4f", rate, 1 - p);
}
END_TEST

/* q, k and v sliced from one projection [B, T, 3·H·D] and reshaped to [B, T,
 * H, D], and the heads merged into a projection, as the GPT makes them:
 * under the storage pass the slices and attention's y are stored in bf16
 * (only attention and GEMMs read them, through the reshapes), which cuDNN
 * reads and writes in place and the fp32 kernels widen and round. One
 * shape cuDNN takes, one it declines. */
static void large_attention_from_slices(void)
{
    static const struct {
        int64_t batch, heads, t, d;
        bool cudnn;
    } cases[] = {{2, 3, 128, 64, true}, {1, 2, 70, 100, false}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int64_t b = cases[c].batch, h = cases[c].heads, t = cases[c].t, d = cases[c].d;
        ge2_graph *g;
        OK(ge2_graph_new(&g));
        ge2_tensor *qkv = param(g, "qkv", ge2_shape3(b, t, 3 * h * d)), *part[3], *view[3], *y, *up, *m, *loss;
        for (int i = 0; i < 3; i++) {
            OK(ge2_slice(g, qkv, 2, i * h * d, (i + 1) * h * d, &part[i]));
            OK(ge2_reshape(g, part[i], ge2_shape4(b, t, h, d), &view[i]));
        }
        ge2_tensor *att, *merged;
        OK(ge2_attention_bthd(g, view[0], view[1], view[2], true, &att));
        /* heads merged into a projection, as the GPT's c_proj: attention's y is then stored in bf16 too */
        OK(ge2_reshape(g, att, ge2_shape2(b * t, h * d), &merged));
        OK(ge2_linear(g, merged, param(g, "proj", ge2_shape2(h * d, h * d)), NULL, GE2_ACT_NONE, 0, &y));
        OK(ge2_input(g, "upstream", GE2_F32, y->shape, &up));
        OK(ge2_mul(g, y, up, &m));
        OK(ge2_sum_all(g, m, &loss));
        OK(ge2_backward(g, loss));
        float *ud = random_f32(ge2_shape_numel(y->shape), -1, 1);
        ge2_feed feeds[] = {{up, ud, y->shape}};
        char label[64];
        snprintf(label, sizeof label, "attention from slices %zu", c);
        maybe_storage_pass(g, label);
        want_cudnn_attention = cases[c].cudnn;
        check_graph(label, g, feeds, 1);
        want_cudnn_attention = false;
        free(ud);
        ge2_graph_free(g);
    }
}

START_TEST(test_large_attention_bf16_storage)
{
    bf16_launches = bf16_storage = want_stored_bf16 = true;
    large_attention_from_slices();
}
END_TEST

/* The bias gradients again with precision BF16: the weight gradient's db
 * then comes from the column sums of the fp32 dz, not an epilogue. */
START_TEST(test_large_bias_gradients_bf16)
{
    bf16_launches = true;
    large_bias_gradients();
}
END_TEST

/* And through the storage pass: the weight gradients read a bf16 dz, and
 * db sums it (the BGRADB epilogue, or the bf16 column sums after a plain
 * GEMM), as the CPU sums the same rounded values. */
START_TEST(test_large_bias_gradients_bf16_storage)
{
    bf16_launches = bf16_storage = want_stored_bf16 = true;
    large_bias_gradients();
}
END_TEST

/* A language model's head: linear layers onto vocabulary-wide logits
 * (cross-entropy's block-per-row kernel), padded past the classes as GPT-2's
 * 50,257 are to 50,304, with label smoothing; 4,104 columns (eight a thread) and
 * 3,001 (one). Under the storage pass the logits and their gradient are bf16. */
static void large_vocabulary_head(void)
{
    static const int64_t widths[][2] = {{4104, 4097}, {3001, 2999}}; /* columns, classes */
    enum { B = 300, C = 48 };
    for (int w = 0; w < 2; w++) {
        const int64_t cols = widths[w][0], classes = widths[w][1];
        ge2_graph *g;
        OK(ge2_graph_new(&g));
        ge2_tensor *x, *labels, *logits, *loss;
        OK(ge2_input(g, "x", GE2_F32, ge2_shape2(B, C), &x));
        OK(ge2_label(g, "labels", GE2_I32, ge2_shape1(B), &labels));
        OK(ge2_linear(g, x, param(g, "w", ge2_shape2(cols, C)), NULL, GE2_ACT_NONE, 0, &logits));
        OK(ge2_cross_entropy_padded(g, logits, labels, w ? 0.1f : 0.0f, classes, &loss));
        OK(ge2_backward(g, loss));
        float *xd = random_f32(B * C, -3, 3);
        int32_t *yd = malloc(sizeof(int32_t) * B);
        ck_assert(yd);
        for (int i = 0; i < B; i++)
            yd[i] = i == 0 ? (int32_t)classes - 1 : (int32_t)(rng01() * (double)classes);
        ge2_feed feeds[] = {{x, xd, ge2_shape2(B, C)}, {labels, yd, ge2_shape1(B)}};
        char label[64];
        snprintf(label, sizeof label, "vocabulary head %lld/%lld", (long long)classes, (long long)cols);
        maybe_storage_pass(g, label);
        check_graph(label, g, feeds, 2);
        free(xd);
        free(yd);
        ge2_graph_free(g);
    }
}

START_TEST(test_large_vocabulary_head)
{
    large_vocabulary_head();
}
END_TEST

START_TEST(test_large_vocabulary_head_bf16_storage)
{
    bf16_launches = bf16_storage = want_stored_bf16 = true;
    large_vocabulary_head();
}
END_TEST

START_TEST(test_large_graphs_agree_tiled)
{
    setenv("GE2_GEMM_KERNEL", "tiled", 1);
    large_mlp();
    large_mixed();
}
END_TEST

/* ------------------------------------------------------------ optimizer */

typedef struct opt_case {
    const char *name;
    ge2_optimizer_config cfg;
} opt_case;

static opt_case opt_case_at(int i)
{
    ge2_optimizer_config c;
    memset(&c, 0, sizeof c);
    c.beta1 = 0.9;
    c.beta2 = 0.999;
    c.eps = 1e-8;
    c.accumulation_steps = 1;
    switch (i) {
    case 0: /* SGD, momentum, nesterov, weight decay, clipping */
        c.kind = GE2_OPT_SGD;
        c.lr = 0.05;
        c.momentum = 0.9;
        c.nesterov = true;
        c.weight_decay = 1e-3;
        c.clip_norm = 0.5;
        return (opt_case){"sgd nesterov clip", c};
    case 1: /* SGD with dampening, step schedule, accumulation over 2 */
        c.kind = GE2_OPT_SGD;
        c.lr = 0.1;
        c.momentum = 0.8;
        c.dampening = 0.3;
        c.schedule = (ge2_schedule){GE2_SCHEDULE_STEP, 2, 0.5, 0, 0, 0};
        c.accumulation_steps = 2;
        return (opt_case){"sgd dampening step-lr accum2", c};
    case 2: /* Adam, coupled weight decay, clipping */
        c.kind = GE2_OPT_ADAM;
        c.lr = 1e-3;
        c.weight_decay = 1e-2;
        c.clip_norm = 1.0;
        return (opt_case){"adam wd clip", c};
    case 3: /* AdamW, amsgrad, cosine with warm-up */
        c.kind = GE2_OPT_ADAMW;
        c.lr = 3e-3;
        c.weight_decay = 0.05;
        c.amsgrad = true;
        c.schedule = (ge2_schedule){GE2_SCHEDULE_COSINE, 0, 0, 2, 6, 1e-4};
        return (opt_case){"adamw amsgrad cosine", c};
    case 4: /* Adam, accumulation over 3, clipping */
        c.kind = GE2_OPT_ADAM;
        c.lr = 2e-3;
        c.accumulation_steps = 3;
        c.clip_norm = 0.1;
        return (opt_case){"adam accum3 clip", c};
    default: /* Adam, dynamic loss scaling growing every 2 clean steps; an inf at step INF_STEP */
        c.kind = GE2_OPT_ADAM;
        c.lr = 2e-3;
        c.loss_scaling = (ge2_loss_scaling){true, 16384.0, 2.0, 0.5, 2};
        return (opt_case){"adam loss scaling", c};
    }
}
#define N_OPT_CASES 6
/* the 0-based step whose gradients get an inf under loss scaling */
#define INF_STEP 2
#define OPT_STEPS 7

/* The control block's step, micro_step, lr and bias corrections after
 * `micro_batches` micro-batches, from the published formulas (torch.optim's
 * StepLR, transformers' cosine with warm-up floored at min_lr, Adam's
 * 1 - beta^t in double), written here apart from optim/optimizer_math.h:
 * both backends derive theirs from that one header, so comparing them with
 * each other could not catch a mistake in it. */
typedef struct hand_control {
    int64_t step;
    int micro_step;
    double lr, bc1, bc2;
} hand_control;

/* Updates skipped in the first `micro_batches` under loss scaling (the
 * one at INF_STEP) */
static int skipped_after(const ge2_optimizer_config *c, int micro_batches)
{
    return c->loss_scaling.dynamic && micro_batches > INF_STEP;
}

static hand_control hand_control_after(const ge2_optimizer_config *c, int micro_batches)
{
    hand_control h = {micro_batches / c->accumulation_steps - skipped_after(c, micro_batches),
                      micro_batches % c->accumulation_steps, 0, 0, 0};
    if (h.step == 0)
        return h; /* no update yet: the zeroed block */
    const ge2_schedule *sc = &c->schedule;
    int64_t before = h.step - 1; /* updates completed when the last one read its lr */
    h.lr = c->lr;
    if (sc->kind == GE2_SCHEDULE_STEP) {
        h.lr = c->lr * pow(sc->gamma, (double)(before / sc->step_size));
    } else if (sc->kind == GE2_SCHEDULE_COSINE) {
        if (before < sc->warmup_steps) {
            h.lr = c->lr * (double)before / (double)sc->warmup_steps;
        } else {
            double p = fmin(1.0, (double)(before - sc->warmup_steps) / (double)(sc->total_steps - sc->warmup_steps));
            h.lr = sc->min_lr + (c->lr - sc->min_lr) * 0.5 * (1.0 + cos(acos(-1.0) * p));
        }
    }
    h.bc1 = 1.0 - pow(c->beta1, (double)h.step);
    h.bc2 = 1.0 - pow(c->beta2, (double)h.step);
    return h;
}

static void expect_hand_control(const char *what, const char *side, const ge2_control *ctl, const hand_control *h)
{
    ck_assert_msg(ctl->step == h->step, "%s (%s): step %lld, expected %lld", what, side, (long long)ctl->step,
                  (long long)h->step);
    ck_assert_msg(ctl->micro_step == h->micro_step, "%s (%s): micro_step %d, expected %d", what, side,
                  ctl->micro_step, h->micro_step);
    const double got[] = {ctl->lr, ctl->bias_correction1, ctl->bias_correction2};
    const double want[] = {h->lr, h->bc1, h->bc2};
    static const char *const names[] = {"lr", "bias_correction1", "bias_correction2"};
    for (int i = 0; i < 3; i++)
        ck_assert_msg(fabs(got[i] - want[i]) <= RTOL * fabs(want[i]), "%s (%s): %s %.9g, by hand %.9g", what, side,
                      names[i], got[i], want[i]);
}

/* Step count, schedule and bias corrections against the hand formulas, on
 * each side; the gradient norm and clip factor (reductions, no closed form
 * here) CUDA against CPU. */
static void compare_control(const char *what, const ge2_control *got, const ge2_control *want,
                            const ge2_optimizer_config *cfg, int micro_batches)
{
    hand_control h = hand_control_after(cfg, micro_batches);
    expect_hand_control(what, "CUDA", got, &h);
    expect_hand_control(what, "CPU", want, &h);
    ck_assert_msg(got->blocks_done == 0, "%s: the ticket counter was left at %u", what, got->blocks_done);
    if (cfg->loss_scaling.dynamic) { /* torch.amp.GradScaler's update, step by step */
        double scale = cfg->loss_scaling.init_scale;
        int64_t good = 0;
        for (int b = 0; b < micro_batches; b++)
            if (b == INF_STEP) {
                scale *= cfg->loss_scaling.backoff_factor;
                good = 0;
            } else if (++good == cfg->loss_scaling.growth_interval) {
                scale *= cfg->loss_scaling.growth_factor;
                good = 0;
            }
        const ge2_control *side[2] = {got, want};
        for (int k = 0; k < 2; k++)
            ck_assert_msg(side[k]->loss_scale == scale && side[k]->scale_good_steps == good &&
                              side[k]->skipped_steps == skipped_after(cfg, micro_batches) && !side[k]->found_inf,
                          "%s (%s): loss scale %g, %d clean steps, %lld skipped, found_inf %d; by hand %g, %lld, %d",
                          what, k ? "CPU" : "CUDA", (double)side[k]->loss_scale, side[k]->scale_good_steps,
                          (long long)side[k]->skipped_steps, side[k]->found_inf, scale, (long long)good,
                          skipped_after(cfg, micro_batches));
    }
    const float g[] = {got->grad_norm, got->clip_factor};
    const float w[] = {want->grad_norm, want->clip_factor};
    assert_close(what, g, w, 2, RTOL, 0);
}

/* The control block as a program starts it (capture/program.c), host side. */
static ge2_control fresh_control(const ge2_optimizer_config *cfg)
{
    ge2_control c;
    memset(&c, 0, sizeof c);
    c.base_lr = (float)cfg->lr;
    c.loss_scale = cfg->loss_scaling.dynamic ? (float)cfg->loss_scaling.init_scale : 1.0f;
    c.clip_factor = 1.0f;
    return c;
}

/* Each side's bf16 parameter copies (ge2_flat_pools.copies) are its own
 * parameters rounded (graph/bf16.h, tested on every pattern): CUDA's, at
 * device copies, against its parameters params_got (host), and the CPU's. */
static void check_copies(const char *what, const uint16_t *copies, const float *params_got, const ge2_flat_pools *cpu)
{
    const size_t cbytes = (size_t)cpu->n * sizeof(uint16_t);
    uint16_t *got = malloc(cbytes);
    ck_assert(got);
    from_device(got, copies, cbytes);
    for (int64_t i = 0; i < cpu->n; i++) {
        ck_assert_msg(got[i] == ge2_bf16_from_f32(params_got[i]), "%s: CUDA's bf16 copy of parameter %lld is "
                      "0x%04x, its parameter %.9g rounds to 0x%04x", what, (long long)i, got[i],
                      (double)params_got[i], ge2_bf16_from_f32(params_got[i]));
        ck_assert_msg(cpu->copies[i] == ge2_bf16_from_f32(cpu->params[i]), "%s: the CPU's bf16 copy of parameter "
                      "%lld is 0x%04x, its parameter %.9g rounds to 0x%04x", what, (long long)i, cpu->copies[i],
                      (double)cpu->params[i], ge2_bf16_from_f32(cpu->params[i]));
    }
    free(got);
}

/* One optimizer configuration for `steps` steps on pools of n elements
 * (n % 4 == 0 takes the float4 path, otherwise the scalar one). */
static void check_optimizer(int which, int64_t n, int steps)
{
    opt_case oc = opt_case_at(which);
    ge2_node norm_node, update_node;
    memset(&norm_node, 0, sizeof norm_node);
    norm_node.op = GE2_OP_GRAD_NORM;
    GE2_ATTRS(ge2_optim_attrs, norm_node.attrs)->config = oc.cfg;
    update_node = norm_node;
    update_node.op = GE2_OP_OPTIMIZER_UPDATE;
    int slots = ge2_opt_slots_of(&oc.cfg).count;
    size_t pbytes = (size_t)n * sizeof(float), sbytes = (size_t)(slots ? slots : 1) * pbytes;

    /* the pool's last part outside weight decay (ge2_no_weight_decay), as the layout puts it */
    /* with the parameters' bf16 copies (precision BF16's), which every update writes */
    size_t cbytes = (size_t)n * sizeof(uint16_t);
    ge2_flat_pools cpu = {malloc(pbytes), malloc(pbytes), calloc(1, sbytes), slots, n, (n / 2) & ~(int64_t)63,
                          calloc(1, cbytes)};
    ck_assert(cpu.params && cpu.grads && cpu.state && cpu.copies);
    for (int64_t i = 0; i < n; i++) {
        cpu.params[i] = (float)(2.0 * rng01() - 1.0);
        cpu.copies[i] = ge2_bf16_from_f32(cpu.params[i]); /* as the program leaves them after a host write */
    }
    ge2_control cctl = fresh_control(&oc.cfg);

    device d;
    device_open(&d);
    ge2_flat_pools gpu = {to_device(cpu.params, pbytes), to_device(cpu.grads, pbytes), to_device(cpu.state, sbytes),
                          slots, n, cpu.no_decay_n, to_device(cpu.copies, cbytes)};
    h2d(d.control, &cctl, sizeof cctl);

    float *got = malloc(sbytes);
    ck_assert(got);
    /* GRAD_NORM (when clipping or scaling the loss) then OPTIMIZER_UPDATE, as the program schedules them */
    ge2_node *nodes[2] = {&norm_node, &update_node};
    int first = oc.cfg.clip_norm > 0 || oc.cfg.loss_scaling.dynamic ? 0 : 1;
    ge2_launch lcs[2], lgs[2];
    for (int k = first; k < 2; k++) {
        memset(&lcs[k], 0, sizeof lcs[k]);
        lcs[k].node = nodes[k];
        lcs[k].control = &cctl;
        lcs[k].pools = cpu;
        lgs[k] = lcs[k];
        device_fill(&d, &lgs[k]);
        lgs[k].pools = gpu;
    }
    /* Odd steps replay a captured graph of the launches: the step count,
     * schedule and bias corrections must advance on the device alone. */
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CK_CUDA(cudaStreamBeginCapture(d.stream, cudaStreamCaptureModeThreadLocal));
    for (int k = first; k < 2; k++)
        cuda_enqueue(&lgs[k]);
    CK_CUDA(cudaStreamEndCapture(d.stream, &graph));
    CK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    for (int step = 0; step < steps; step++) {
        for (int64_t i = 0; i < n; i++)
            cpu.grads[i] = (float)(0.2 * (2.0 * rng01() - 1.0));
        if (oc.cfg.loss_scaling.dynamic && step == INF_STEP)
            cpu.grads[n / 3] = INFINITY; /* both sides skip the step */
        h2d(gpu.grads, cpu.grads, pbytes);
        for (int k = first; k < 2; k++)
            ck_assert_msg(ge2_op_def_of(nodes[k]->op)->cpu(&lcs[k]) == GE2_OK, "%s: CPU: %s", oc.name,
                          ge2_last_error());
        if (step % 2)
            CK_CUDA(cudaGraphLaunch(exec, d.stream));
        else
            for (int k = first; k < 2; k++)
                cuda_enqueue(&lgs[k]);
        CK_CUDA(cudaStreamSynchronize(d.stream));
        char what[160];
        snprintf(what, sizeof what, "%s, n=%lld, step %d (%s): params", oc.name, (long long)n, step + 1,
                 step % 2 ? "replay" : "eager");
        from_device(got, gpu.params, pbytes);
        assert_close(what, got, cpu.params, n, RTOL, 0);
        check_copies(what, gpu.copies, got, &cpu);
        snprintf(what, sizeof what, "%s, n=%lld, step %d: state", oc.name, (long long)n, step + 1);
        from_device(got, gpu.state, (size_t)slots * pbytes);
        assert_close(what, got, cpu.state, (int64_t)slots * n, RTOL, 0);
        ge2_control gctl;
        from_device(&gctl, d.control, sizeof gctl);
        snprintf(what, sizeof what, "%s, n=%lld, step %d: control", oc.name, (long long)n, step + 1);
        compare_control(what, &gctl, &cctl, &oc.cfg, step + 1);
        /* the next step starts from the same values on both sides */
        h2d(gpu.params, cpu.params, pbytes);
        h2d(gpu.state, cpu.state, sbytes);
        h2d(gpu.copies, cpu.copies, cbytes);
    }
    free(got);
    CK_CUDA(cudaGraphExecDestroy(exec));
    CK_CUDA(cudaGraphDestroy(graph));
    CK_CUDA(cudaFree(gpu.params));
    CK_CUDA(cudaFree(gpu.grads));
    CK_CUDA(cudaFree(gpu.state));
    CK_CUDA(cudaFree(gpu.copies));
    device_close(&d);
    free(cpu.params);
    free(cpu.grads);
    free(cpu.state);
    free(cpu.copies);
}

START_TEST(test_optimizer_agrees)
{
    check_optimizer(_i, 64 * 67, OPT_STEPS); /* float4 path, like the planner's 64-element alignment */
    check_optimizer(_i, 64 * 67 + 3, OPT_STEPS); /* scalar path */
    /* more float4 groups than one resident grid takes in a pass (at most
     * 132 SMs x 8 blocks x 256 threads x 2 groups): several passes per
     * thread. One rule, an eager step and a replay: it is ~10 M elements of
     * host reference per step. */
    if (_i == 2)
        check_optimizer(_i, 64 * 40003, 2);
}
END_TEST

/* Per-parameter updates: three parameters in the pools (each at a 64-float
 * offset, sizes with and without a float4 tail), their gradients in buffers
 * of their own (the arena's), two update nodes (the first takes two
 * parameters, a layer's weight and bias) counting update_nodes = 2. The
 * step must advance once per step, after both nodes, and the pools' padding
 * stay zero. misaligned: the second node's gradient is 4 bytes off 16, so it
 * takes the scalar kernel. Clipping, accumulation and loss scaling, which
 * per-parameter updates never have, are taken out of the case. */
static void check_per_parameter(int which, bool misaligned)
{
    opt_case oc = opt_case_at(which);
    oc.cfg.clip_norm = 0;
    oc.cfg.accumulation_steps = 1;
    oc.cfg.loss_scaling.dynamic = false;
    static const int64_t numel[3] = {64 * 67, 130, 64 * 5 + 3}, offset[3] = {0, 64 * 67, 64 * 67 + 192};
    const int64_t n = 64 * 67 + 192 + 384; /* the pools, padded */
    int slots = ge2_opt_slots_of(&oc.cfg).count;
    size_t pbytes = (size_t)n * sizeof(float), sbytes = (size_t)(slots ? slots : 1) * pbytes;
    ge2_flat_pools cpu = {calloc(1, pbytes), NULL, calloc(1, sbytes), slots, n, 0,
                          calloc((size_t)n, sizeof(uint16_t))};
    ck_assert(cpu.params && cpu.state && cpu.copies);
    float *cgrad[3], *ggrad_base[3], *ggrad[3];
    for (int k = 0; k < 3; k++) {
        for (int64_t i = 0; i < numel[k]; i++) {
            cpu.params[offset[k] + i] = (float)(2.0 * rng01() - 1.0);
            cpu.copies[offset[k] + i] = ge2_bf16_from_f32(cpu.params[offset[k] + i]);
        }
        cgrad[k] = malloc((size_t)numel[k] * sizeof(float));
        ggrad_base[k] = to_device(NULL, (size_t)(numel[k] + 4) * sizeof(float));
        ggrad[k] = ggrad_base[k] + (misaligned && k == 2 ? 1 : 0);
    }
    ge2_control cctl = fresh_control(&oc.cfg);
    device d;
    device_open(&d);
    ge2_flat_pools gpu = {to_device(cpu.params, pbytes), NULL, to_device(cpu.state, sbytes), slots, n, 0,
                          to_device(cpu.copies, (size_t)n * sizeof(uint16_t))};
    h2d(d.control, &cctl, sizeof cctl);

    ge2_node nodes[2];
    ge2_launch lcs[2], lgs[2];
    for (int u = 0; u < 2; u++) {
        memset(&nodes[u], 0, sizeof nodes[u]);
        nodes[u].op = GE2_OP_OPTIMIZER_UPDATE;
        GE2_ATTRS(ge2_optim_attrs, nodes[u].attrs)->config = oc.cfg;
        GE2_ATTRS(ge2_optim_attrs, nodes[u].attrs)->update_nodes = 2;
        nodes[u].n_inputs = u == 0 ? 4 : 2;
        memset(&lcs[u], 0, sizeof lcs[u]);
        lcs[u].node = &nodes[u];
        lcs[u].n_in = nodes[u].n_inputs;
        lcs[u].control = &cctl;
        lcs[u].pools = cpu;
        lgs[u] = lcs[u];
        device_fill(&d, &lgs[u]);
        lgs[u].pools = gpu;
        for (int j = 0; j < nodes[u].n_inputs / 2; j++) {
            int k = u == 0 ? j : 2;
            ge2_shape shape = ge2_shape1(numel[k]);
            lcs[u].in[2 * j] = (ge2_view){cpu.params + offset[k], GE2_F32, shape};
            lcs[u].in[2 * j + 1] = (ge2_view){cgrad[k], GE2_F32, shape};
            lgs[u].in[2 * j] = (ge2_view){gpu.params + offset[k], GE2_F32, shape};
            lgs[u].in[2 * j + 1] = (ge2_view){ggrad[k], GE2_F32, shape};
        }
    }
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CK_CUDA(cudaStreamBeginCapture(d.stream, cudaStreamCaptureModeThreadLocal));
    for (int u = 0; u < 2; u++)
        cuda_enqueue(&lgs[u]);
    CK_CUDA(cudaStreamEndCapture(d.stream, &graph));
    CK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    float *got = malloc(sbytes);
    ck_assert(got);
    for (int step = 0; step < OPT_STEPS; step++) {
        for (int k = 0; k < 3; k++) {
            for (int64_t i = 0; i < numel[k]; i++)
                cgrad[k][i] = (float)(0.2 * (2.0 * rng01() - 1.0));
            h2d(ggrad[k], cgrad[k], (size_t)numel[k] * sizeof(float));
        }
        for (int u = 0; u < 2; u++) {
            ck_assert_msg(ge2_op_def_of(GE2_OP_OPTIMIZER_UPDATE)->cpu(&lcs[u]) == GE2_OK, "%s: CPU: %s", oc.name,
                          ge2_last_error());
            ck_assert_int_eq(cctl.step, u == 0 ? step : step + 1); /* the second node commits */
        }
        if (step % 2)
            CK_CUDA(cudaGraphLaunch(exec, d.stream));
        else
            for (int u = 0; u < 2; u++)
                cuda_enqueue(&lgs[u]);
        CK_CUDA(cudaStreamSynchronize(d.stream));
        char what[160];
        snprintf(what, sizeof what, "%s per-parameter%s, step %d (%s): params", oc.name,
                 misaligned ? " misaligned" : "", step + 1, step % 2 ? "replay" : "eager");
        from_device(got, gpu.params, pbytes);
        assert_close(what, got, cpu.params, n, RTOL, 0);
        for (int64_t i = 0; i < n; i++) { /* the padding after each parameter: untouched zeros */
            bool inside = false;
            for (int k = 0; k < 3; k++)
                inside = inside || (i >= offset[k] && i < offset[k] + numel[k]);
            ck_assert_msg(inside || got[i] == 0.0f, "%s: padding element %lld is %g", what, (long long)i, got[i]);
        }
        check_copies(what, gpu.copies, got, &cpu); /* (the padding's stay the zeros they started as) */
        snprintf(what, sizeof what, "%s per-parameter, step %d: state", oc.name, step + 1);
        from_device(got, gpu.state, (size_t)slots * pbytes);
        assert_close(what, got, cpu.state, (int64_t)slots * n, RTOL, 0);
        ge2_control gctl;
        from_device(&gctl, d.control, sizeof gctl);
        snprintf(what, sizeof what, "%s per-parameter, step %d: control", oc.name, step + 1);
        compare_control(what, &gctl, &cctl, &oc.cfg, step + 1);
        ck_assert_msg(gctl.updates_done == 0 && cctl.updates_done == 0, "%s: updates_done %d (cuda), %d (cpu)", what,
                      gctl.updates_done, cctl.updates_done);
        h2d(gpu.params, cpu.params, pbytes);
        h2d(gpu.state, cpu.state, sbytes);
        h2d(gpu.copies, cpu.copies, (size_t)n * sizeof(uint16_t));
    }
    free(got);
    CK_CUDA(cudaGraphExecDestroy(exec));
    CK_CUDA(cudaGraphDestroy(graph));
    for (int k = 0; k < 3; k++) {
        free(cgrad[k]);
        CK_CUDA(cudaFree(ggrad_base[k]));
    }
    CK_CUDA(cudaFree(gpu.params));
    CK_CUDA(cudaFree(gpu.state));
    CK_CUDA(cudaFree(gpu.copies));
    device_close(&d);
    free(cpu.params);
    free(cpu.state);
    free(cpu.copies);
}

START_TEST(test_per_parameter_optimizer_agrees)
{
    check_per_parameter(_i, false);
    check_per_parameter(_i, true);
}
END_TEST

/* The fused cross-entropy's loss is the same bits on every run: the last
 * block sums fixed per-block partials in block order. Many blocks, so the
 * order blocks finish in varies between runs. */
START_TEST(test_cross_entropy_deterministic)
{
    enum { B = 4096, C = 37 };
    float *x = malloc(sizeof(float) * B * C);
    int32_t *y = malloc(sizeof(int32_t) * B);
    ck_assert(x && y);
    for (int i = 0; i < B * C; i++)
        x[i] = (float)(6.0 * rng01() - 3.0);
    for (int i = 0; i < B; i++)
        y[i] = (int32_t)(rng01() * C);
    y[7] = -1; /* out of range: skipped, never read out of bounds */
    y[9] = C;
    ge2_node node;
    memset(&node, 0, sizeof node);
    node.op = GE2_OP_CROSS_ENTROPY;
    node.n_inputs = 2;
    node.n_outputs = 2;
    GE2_ATTRS(ge2_loss_attrs, node.attrs)->label_smoothing = 0.1f;
    device d;
    device_open(&d);
    ge2_launch l;
    memset(&l, 0, sizeof l);
    l.node = &node;
    l.n_in = 2;
    l.n_out = 2;
    l.in[0] = (ge2_view){to_device(x, sizeof(float) * B * C), GE2_F32, ge2_shape2(B, C)};
    l.in[1] = (ge2_view){to_device(y, sizeof(int32_t) * B), GE2_I32, ge2_shape1(B)};
    float *loss_dev = to_device(NULL, sizeof(float));
    l.out[0] = (ge2_view){loss_dev, GE2_F32, ge2_shape0()};
    l.out[1] = (ge2_view){to_device(NULL, sizeof(float) * B * C), GE2_F32, ge2_shape2(B, C)};
    device_fill(&d, &l);
    float first = 0;
    for (int run = 0; run < 50; run++) {
        cuda_run(&l);
        float loss;
        from_device(&loss, loss_dev, sizeof loss);
        if (run == 0)
            first = loss;
        ck_assert_msg(memcmp(&loss, &first, sizeof loss) == 0, "run %d: loss %.9g, first run %.9g", run, loss,
                      first);
    }
    ck_assert(isfinite(first) && first > 0);
    device_close(&d);
    CK_CUDA(cudaFree(l.in[0].data));
    CK_CUDA(cudaFree(l.in[1].data));
    CK_CUDA(cudaFree(l.out[0].data));
    CK_CUDA(cudaFree(l.out[1].data));
    free(x);
    free(y);
}
END_TEST

/* The cast to bf16 on every bf16 pattern with the low halves that decide
 * its rounding (exact, ties both ways, just past a tie, the largest): the
 * NaNs of both signs, the infinities, the subnormals and the values that
 * round up to infinity among them. CUDA's __float2bfloat16_rn against
 * graph/bf16.h, bit for bit; the random case above sees none of these. */
START_TEST(test_cast_rounds_every_pattern_as_the_cpu)
{
    static const uint32_t lows[] = {0x0000, 0x7fff, 0x8000, 0x8001, 0xffff};
    enum { N_LOWS = sizeof lows / sizeof lows[0], N = 65536 * N_LOWS };
    uint32_t *bits = malloc(sizeof(uint32_t) * N);
    uint16_t *got = malloc(sizeof(uint16_t) * N);
    ck_assert(bits && got);
    for (uint32_t h = 0; h <= 0xffff; h++)
        for (int k = 0; k < N_LOWS; k++)
            bits[h * N_LOWS + (uint32_t)k] = h << 16 | lows[k];
    ge2_node node;
    memset(&node, 0, sizeof node);
    node.op = GE2_OP_CAST;
    node.n_inputs = node.n_outputs = 1;
    const ge2_dtype to = GE2_BF16; /* the cast's attrs: its target dtype (ops/cast/cast.h) */
    memcpy(node.attrs.bytes, &to, sizeof to);
    device d;
    device_open(&d);
    ge2_launch l;
    memset(&l, 0, sizeof l);
    l.node = &node;
    l.n_in = l.n_out = 1;
    l.in[0] = (ge2_view){to_device(bits, sizeof(uint32_t) * N), GE2_F32, ge2_shape1(N)};
    l.out[0] = (ge2_view){to_device(NULL, sizeof(uint16_t) * N), GE2_BF16, ge2_shape1(N)};
    device_fill(&d, &l);
    cuda_run(&l);
    from_device(got, l.out[0].data, sizeof(uint16_t) * N);
    for (int i = 0; i < N; i++) {
        float f;
        memcpy(&f, &bits[i], sizeof f);
        ck_assert_msg(got[i] == ge2_bf16_from_f32(f), "0x%08x: CUDA 0x%04x, CPU 0x%04x", (unsigned)bits[i],
                      (unsigned)got[i], (unsigned)ge2_bf16_from_f32(f));
    }
    device_close(&d);
    CK_CUDA(cudaFree(l.in[0].data));
    CK_CUDA(cudaFree(l.out[0].data));
    free(bits);
    free(got);
}
END_TEST

/* GE2_GEMM_KERNEL as the suite started (NULL: unset) */
static char *initial_gemm_kernel;

/* Every test starts from the harness's defaults: the flags and the GEMM
 * family variable a test sets are cleared before the next, whether Check
 * forks each test (its default) or runs them in one process (CK_FORK=no,
 * as under the sanitizers). */
static void reset_harness(void)
{
    tf32_launches = bf16_launches = bf16_storage = f16_launches = direct_conv = false;
    want_cudnn_attention = want_cudnn_conv = train_launches = want_tensor_cores = false;
    want_column_chunks = want_stored_bf16 = false;
    attention_dropout = 0;
    use_candidate = NULL;
    if (initial_gemm_kernel)
        setenv("GE2_GEMM_KERNEL", initial_gemm_kernel, 1);
    else
        unsetenv("GE2_GEMM_KERNEL");
}

int main(void)
{
    if (!ge2_test_require_gpu("op_agreement_test"))
        return 1;
    const char *gemm = getenv("GE2_GEMM_KERNEL");
    initial_gemm_kernel = gemm ? strdup(gemm) : NULL;
    Suite *s = suite_create("op_agreement");
    TCase *tc = tcase_create("cuda_vs_cpu");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, reset_harness, NULL);
    tcase_add_loop_test(tc, test_op_agrees, 0, ge2_op_count());
    tcase_add_test(tc, test_large_graphs_agree);
    tcase_add_loop_test(tc, test_gemm_op_agrees_tiled, 0, ge2_op_count());
    tcase_add_loop_test(tc, test_gemm_op_agrees_bf16, 0, ge2_op_count());
    tcase_add_loop_test(tc, test_gemm_op_agrees_bf16_storage, 0, ge2_op_count());
    tcase_add_loop_test(tc, test_conv_op_agrees_direct_bf16, 0, ge2_op_count());
    tcase_add_test(tc, test_large_convolutions);
    tcase_add_test(tc, test_large_convolutions_bf16);
    tcase_add_test(tc, test_large_convolutions_fp16);
    tcase_add_loop_test(tc, test_gemm_op_agrees_fp16, 0, ge2_op_count());
    tcase_add_test(tc, test_fp16_gemm_rounds_operands);
    tcase_add_test(tc, test_bf16_gemm_rounds_operands);
    tcase_add_test(tc, test_large_graphs_agree_tiled);
    tcase_add_test(tc, test_large_bias_gradients_bf16);
    tcase_add_test(tc, test_large_bias_gradients_bf16_storage);
    tcase_add_test(tc, test_large_vocabulary_head);
    tcase_add_test(tc, test_large_vocabulary_head_bf16_storage);
    tcase_add_test(tc, test_large_residual_norms_bf16_storage);
    tcase_add_test(tc, test_large_attention_bf16);
    tcase_add_test(tc, test_large_attention_bf16_storage);
    tcase_add_loop_test(tc, test_candidates_agree, 0, ge2_op_count());
    tcase_add_test(tc, test_large_attention_tensor_cores);
    tcase_add_test(tc, test_large_attention_tensor_cores_tf32);
    tcase_add_test(tc, test_large_attention_dropout);
    tcase_add_test(tc, test_large_attention_dropout_tensor_cores);
    tcase_add_test(tc, test_large_attention_dropout_tf32);
    tcase_add_test(tc, test_attention_dropout_masks);
    tcase_add_loop_test(tc, test_optimizer_agrees, 0, N_OPT_CASES);
    tcase_add_loop_test(tc, test_per_parameter_optimizer_agrees, 0, N_OPT_CASES);
    tcase_add_test(tc, test_cross_entropy_deterministic);
    tcase_add_test(tc, test_cast_rounds_every_pattern_as_the_cpu);
    suite_add_tcase(s, tc);
    return ge2_check_run(s);
}
