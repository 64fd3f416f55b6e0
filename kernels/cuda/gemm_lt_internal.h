// The cuBLASLt plan machinery of gemm_lt.cu, shared with the other GEMM files
// of kernels/cuda (ops/linear/cuda_backward.cu: LINEAR's backward GEMMs; the kernel
// registry). C++ (nvcc) only, internal to kernels/cuda.
//
// A plan is what prepare builds once per graph key: the descriptor with its
// epilogue, the three layouts, the heuristic's algorithms. ge2_gemm_enqueue
// runs it: the GEMM (cuBLASLt A = our in[1], B = our in[0], D = out[0] or the
// z stash; see gemm_lt.cu for the row-/column-major mapping), then the act
// kernel and the plan's post step, if any.
#ifndef GE2_KERNELS_CUDA_GEMM_LT_INTERNAL_H
#define GE2_KERNELS_CUDA_GEMM_LT_INTERNAL_H

#include "kernels/cuda/check.h"
#include "kernels/cuda/gemm_registry.h"

#include <cublasLt.h>

// Algorithms kept from the heuristic: the candidates the kernel registry
// (gemm_registry.h) times; the one it picks is moved to algos[0] and run.
#define GE2_GEMM_ALGOS 8

// A launch view an epilogue pointer comes from: 0 = none (a calloc'd plan
// has none), else one of the launch's inputs or outputs.
#define GE2_GEMM_NO_VIEW 0
#define GE2_GEMM_IN(i) (1 + (i))
#define GE2_GEMM_OUT(i) (1 + GE2_MAX_INPUTS + (i))

typedef struct ge2_gemm_plan ge2_gemm_plan;

// What a plan's epilogue leaves undone, enqueued after the GEMM on the same stream.
typedef ge2_status (*ge2_gemm_post_fn)(const ge2_launch *launch, const ge2_gemm_plan *p);

// The node as one tiled GEMM (gemm_tiled.h) on the launch's current views,
// the whole op included (epilogue outputs too); false when this node's
// form of the op has no tiled equivalent or the kernel does not take it.
typedef bool (*ge2_tiled_bind_fn)(const ge2_launch *launch, ge2_tiled_gemm *g);

struct ge2_gemm_plan {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la; // cuBLASLt A = our in[1] (W, or matmul's b)
    cublasLtMatrixLayout_t lb; // cuBLASLt B = our in[0] (x, or matmul's a)
    cublasLtMatrixLayout_t ld; // C = D: the GEMM's output (y, or z when it is stashed)
    cublasLtMatmulHeuristicResult_t algos[GE2_GEMM_ALGOS];
    int n_algos;
    cublasLtEpilogue_t epilogue;
    bool has_bias;
    bool gemm_writes_z; // D is out[1] (z); y comes from the aux output or the act kernel
    bool act_kernel;    // ge2_gemm_act_kernel turns D into y after the GEMM
    ge2_activation act;
    float slope;
    bool tf32;     // CUBLAS_COMPUTE_32F_FAST_TF32 instead of plain fp32
    bool bf16;     // 16-bit operands, fp32 sums (ge2_launch_half_gemm): bf16, or fp16 when f16
    bool f16;      // precision FP16: the operands are rounded to fp16 (CUDA_R_16F)
    // bf16: A or B is an f32 tensor, rounded into a bf16 copy in the launch's
    // scratch (A's first) before the GEMM; a bf16 tensor is read in place
    bool round_a, round_b;
    // out[0] or LINEAR's z stash is bf16 (ge2_op_def.stores_bf16) and no
    // f32 z holds D: D is an f32 buffer in the scratch after the copies,
    // which the act kernel or the post step rounds into the bf16 outputs
    bool d_scratch;
    // D is bf16 (ge2_cuda_linear_d_bf16): the GEMM rounds its result into
    // out[0] or LINEAR's bf16 z stash itself; the act kernel and the post
    // step read it back from there
    bool d_bf16;
    // D goes into out[d_out] rather than out[0] (0 unless set; gemm_writes_z
    // wins): an output the op's post step overwrites after reading D, when
    // out[0] has the memory of an input the post step reads
    int d_out;
    // Another output the op's post step writes (0 unless set: none); the
    // op's own bookkeeping, which the GEMM path only carries
    int post_out;
    int64_t span_a, span_b; // elements of A and B the GEMM reads (what the bf16 copies hold)
    int64_t n_out; // elements of y
    int bias_view;  // GE2_GEMM_IN/OUT: CUBLASLT_MATMUL_DESC_BIAS_POINTER (a bias, or a BGRAD epilogue's output)
    int aux_view;   // GE2_GEMM_IN/OUT: CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER
    int64_t aux_ld; // CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: elements (GELU z) or bits (relu mask)
    ge2_gemm_post_fn post;
    const char *post_name; // for the description: "cublasLt DEFAULT ... + <post_name>"
    ge2_tiled_bind_fn tiled_bind; // NULL: only cuBLASLt is a candidate
    ge2_gemm_selection selection; // which kernel runs (selection.tiled: the tiled GEMM, else algos[0]) and why
    uint32_t align_a, align_b, align_d; // bytes the heuristic was told A, B and C = D are aligned to
    char description[256];
};

// One row-major matrix operand, as cuBLASLt sees it: the stored buffer
// [rows, cols] read column-major is [cols, rows] with ld = cols.
typedef struct ge2_gemm_operand {
    int64_t rows, cols;   // row-major, one batch item
    int64_t batch_stride; // elements; 0 broadcasts one matrix over the batch
} ge2_gemm_operand;

const char *ge2_gemm_lt_status_name(cublasStatus_t s);

// Every cuBLASLt call is checked; the message names the op, the node and the
// call. `op` and `node_id` must be in scope.
#define LT_CHECK(call)                                                                        \
    do {                                                                                      \
        cublasStatus_t s_ = (call);                                                           \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                      \
            return ge2_error(GE2_ERR_CUDA, "ge2_%s (node %d): %s failed: %s (%d)", op,        \
                             node_id, #call, ge2_gemm_lt_status_name(s_), (int)s_);           \
    } while (0)

void ge2_gemm_plan_free(ge2_gemm_plan *p);
// The three layouts of one plan: cuBLASLt A (our in[1]), B (our in[0]), D;
// bf16 (ge2_launch_half_gemm): A and B are bf16, the f32 ones copies in
// launch->scratch; set p->d_scratch first.
ge2_status ge2_gemm_make_layouts(const ge2_launch *launch, ge2_gemm_plan *p, ge2_gemm_operand a_lt,
                                 ge2_gemm_operand b_lt, ge2_gemm_operand d, int64_t batch);
// Builds the descriptor for p->epilogue and asks the heuristic. *found == 0
// (not an error) when no algorithm supports this epilogue here, so the
// caller can fall back to a plainer one.
ge2_status ge2_gemm_plan_try(ge2_gemm_plan *p, const ge2_launch *launch, bool trans_a_lt, bool trans_b_lt,
                             int64_t d_rows_lt, int *found);
// f32 views (bar bf16 operands, outputs the op stores in bf16, and the one
// u8 relu bit-mask view the caller names: GE2_GEMM_IN/OUT, kernels/relu_mask.h,
// or GE2_GEMM_NO_VIEW), a stream and a cuBLASLt handle.
ge2_status ge2_gemm_check_launch(const ge2_launch *launch, int relu_mask_view);
// Ends a prepare: the plan goes to launch->backend_data, or is freed on
// error; found == 0 means cuBLASLt offered nothing for these shapes.
ge2_status ge2_gemm_plan_commit(ge2_launch *launch, ge2_gemm_plan *p, ge2_status st, int found);
// A prepare that makes launch's plan with cuBLASLt's fused activation
// epilogue where it has one (fuse) or with the plain GEMM and ge2's kernels.
typedef ge2_status (*ge2_gemm_prepare_fn)(ge2_launch *launch, bool fuse);
// Prepares launch with the faster of the two (settings autotune and
// time_epilogues; else fused): both plans' whole enqueues (copies, GEMM,
// act kernel, post step) are timed on zeroed scratch copies of the launch's
// buffers, the winner remembered per problem (ge2_kernel_choice_*: every
// process then runs the same kernels) and both times noted in the
// description.
ge2_status ge2_gemm_prepare_timed(ge2_launch *launch, ge2_gemm_prepare_fn prepare);
// The GEMM, the act kernel and the post step of a prepared plan.
ge2_status ge2_gemm_enqueue(const ge2_launch *launch, const char *op);
// Where the GEMM writes D (f32, or bf16 with p->d_bf16): out[0], LINEAR's
// z stash, or the scratch (p->d_scratch)
void *ge2_gemm_d(const ge2_gemm_plan *p, const ge2_launch *launch);

// ops/linear/cuda_backward.cu: LINEAR relu's fallback when RELU_AUX is refused — relu of
// the GEMM's z in place and the bit-mask out[1].
ge2_status ge2_gemm_relu_mask_post(const ge2_launch *launch, const ge2_gemm_plan *p);

#endif // GE2_KERNELS_CUDA_GEMM_LT_INTERNAL_H
