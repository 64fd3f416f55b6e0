/* The GEMM family: LINEAR (x·Wᵀ + b, then an activation, fused into one
 * GEMM epilogue), MATMUL, and the two backward GEMMs with their epilogues
 * fused (LINEAR_GRAD_INPUT, LINEAR_GRAD_WEIGHT).
 *
 * ops.c holds the definitions (registered by ops/builtin.def's line for
 * each); the rest of the folder is their parts: infer.c, backward.c, api.c
 * (the public builders), cpu.c, the CUDA launchers (cuda*.cu) and test.c
 * (test cases and float64 references). */
#ifndef GE2_OPS_LINEAR_LINEAR_H
#define GE2_OPS_LINEAR_LINEAR_H

/* nvcc compiles the CUDA launchers as C++: these are C declarations */
#ifdef __cplusplus
extern "C" {
#endif

#include "autograd/autograd.h"
#include "graph/op_support.h"
#include "ops/elementwise/elementwise.h" /* LINEAR_GRAD_INPUT reads ge2_act_attrs */
#include "ops/linear/stash.h"
#include "ops/ops.h"

/* The family's node attributes (graph/ir.h: GE2_ATTRS). */
typedef struct ge2_linear_attrs {
    ge2_activation act;
    float slope; /* leaky_relu */
} ge2_linear_attrs;
GE2_ATTRS_FIT(ge2_linear_attrs);

typedef struct ge2_matmul_attrs {
    bool trans_a, trans_b;
} ge2_matmul_attrs;
GE2_ATTRS_FIT(ge2_matmul_attrs);

/* infer.c */
ge2_status ge2_infer_LINEAR(const ge2_node *node, const ge2_desc *in, ge2_desc *out);
ge2_status ge2_infer_MATMUL(const ge2_node *node, const ge2_desc *in, ge2_desc *out);
ge2_status ge2_infer_LINEAR_GRAD_INPUT(const ge2_node *node, const ge2_desc *in, ge2_desc *out);
ge2_status ge2_infer_LINEAR_GRAD_WEIGHT(const ge2_node *node, const ge2_desc *in, ge2_desc *out);

/* backward.c */
ge2_status ge2_backward_linear(ge2_autograd *ag, const ge2_node *node, const int *dy);
ge2_status ge2_backward_matmul(ge2_autograd *ag, const ge2_node *node, const int *dy);

/* cpu.c: shapes from the launch views, in the dtype of input 0 (f32, or f64
 * for gradient checks); outputs whose data is NULL are skipped */
ge2_status ge2_cpu_linear(const ge2_launch *l);
ge2_status ge2_cpu_matmul(const ge2_launch *l);
ge2_status ge2_cpu_linear_grad_input(const ge2_launch *l);
ge2_status ge2_cpu_linear_grad_weight(const ge2_launch *l);

/* CUDA launchers (f32): enqueue on launch->stream, capturable */
ge2_status ge2_cuda_linear_prepare(ge2_launch *launch);
ge2_status ge2_cuda_linear_launch(const ge2_launch *launch);
void ge2_cuda_linear_release(ge2_launch *launch);
const char *ge2_cuda_linear_describe(const ge2_launch *launch);
ge2_status ge2_cuda_matmul_prepare(ge2_launch *launch);
ge2_status ge2_cuda_matmul_launch(const ge2_launch *launch);
void ge2_cuda_matmul_release(ge2_launch *launch);
const char *ge2_cuda_matmul_describe(const ge2_launch *launch);
/* bf16 GEMMs: the bf16 copies of the f32 operands among in[0] and in[1],
 * and the f32 GEMM result when out[0] is stored in bf16 and nothing else
 * holds it (ge2_cuda_linear_d_in_scratch) */
size_t ge2_cuda_gemm_bf16_scratch_bytes(const ge2_launch *launch);
/* out[0] (or LINEAR's z stash) is a bf16 tensor (the storage pass's) and
 * the GEMM writes its f32 result to scratch, which ge2's kernel then rounds
 * into it: where the GEMM neither writes an f32 z stash nor writes bf16
 * itself (ge2_cuda_linear_d_bf16) */
bool ge2_cuda_linear_d_in_scratch(const ge2_launch *launch);
/* The GEMM writes its result D in bf16 straight into its bf16 tensor:
 * LINEAR where ge2_linear_d_bf16 says so and its bias (if any) is bf16 too,
 * any other op of the family whenever its out[0] is bf16: LINEAR_GRAD_INPUT's
 * dx (act' and db then read it back), MATMUL's y (so its scratch holds no
 * f32 result); never LINEAR_GRAD_WEIGHT's dW (a gradient) */
bool ge2_cuda_linear_d_bf16(const ge2_launch *launch);
/* Under the storage pass of precision BF16: does LINEAR's GEMM write its
 * result D in bf16? D is the z stash when one is kept (has_stash; relu's
 * u8 bit-mask: never), else y; both must be bf16 tensors, and y = act(z)
 * then reads the rounded z, as autocast's activation reads the rounded
 * linear output. The bias is then read in bf16 like x and w (cuBLASLt's
 * bias epilogue takes D's type; autocast rounds the bias too): the storage
 * pass gives it the bias's bf16 copy. */
static inline bool ge2_linear_d_bf16(bool has_y, ge2_dtype y, bool has_stash, ge2_dtype stash)
{
    return has_y && y == GE2_BF16 && (!has_stash || stash == GE2_BF16);
}
/* LINEAR_GRAD_INPUT's work with act(z) made again (`again`: the output it
 * goes to, the last; -1: none): the family's kernels take it as an argument
 * (the *_with functions) for fusion/recompute_act's op, whose outputs are
 * dx[, db], act(z). The index of db among n_outputs (-1: none). */
static inline int ge2_linear_grad_input_db(int n_outputs, int again)
{
    return n_outputs > (again >= 0 ? 2 : 1) ? 1 : -1;
}
/* infer.c: inference with act(z) into output again (checks that a z is saved) */
ge2_status ge2_infer_linear_grad_input_with(const ge2_node *node, const ge2_desc *in, ge2_desc *out, int again);
/* ops.c: dx (and act(z)) stored in bf16; dx over z's memory (output_over_input) */
bool ge2_linear_grad_input_stores_bf16_with(const ge2_node *node, int output, int again);
int ge2_linear_grad_input_over_z_with(const ge2_graph *graph, const ge2_node *node, int again);
/* cpu.c */
ge2_status ge2_cpu_linear_grad_input_with(const ge2_launch *l, int again);
/* cuda_backward.cu: the prepare (launch, release and describe are
 * LINEAR_GRAD_INPUT's); act(z) comes from ge2's act' kernel, never from a
 * cuBLASLt epilogue */
ge2_status ge2_cuda_linear_grad_input_prepare_with(ge2_launch *launch, int again);
/* ops.c: LINEAR stores y and its z stash in bf16 (the GEMM writes D in bf16,
 * the act kernel y from it), but y beside relu's bit-mask */
bool ge2_linear_stores_bf16(const ge2_node *node, int output);
/* cuda_backward.cu: release and describe are LINEAR's */
ge2_status ge2_cuda_linear_grad_input_prepare(ge2_launch *launch);
ge2_status ge2_cuda_linear_grad_input_launch(const ge2_launch *launch);
ge2_status ge2_cuda_linear_grad_weight_prepare(ge2_launch *launch);
ge2_status ge2_cuda_linear_grad_weight_launch(const ge2_launch *launch);

/* ops.c */
extern const ge2_op_def ge2_op_def_linear;
extern const ge2_op_def ge2_op_def_matmul;
extern const ge2_op_def ge2_op_def_linear_grad_input;
extern const ge2_op_def ge2_op_def_linear_grad_weight;

#ifdef __cplusplus
}
#endif

#endif /* GE2_OPS_LINEAR_LINEAR_H */
