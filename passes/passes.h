/* The compile passes a graph goes through before a program's keys are
 * resolved, in this order (capture/program.c: compile):
 *
 *   1. verify         graph/verify.h: ids, shapes and dtypes agree
 *   2. rewrite        the fusion registry's graph rewrites (fusion/fusion.h)
 *   3. fp16 operands  precision FP16 refuses bf16 GEMM operands
 *   4. bf16 storage   precision BF16: GEMM operands in bf16, below
 *
 * and then, per graph key (capture/program_keys.c): the launches' fusion
 * rows (fusion/), kernel selection (capture/backend.h: the backend's
 * prepare, with the kernel candidates), the schedule and the memory plan
 * (planner/). docs/architecture.md walks through them.
 *
 * A pass knows ops only through the registry (ge2_op_def), but for the ops
 * the engine emits itself (ops/ops.h). */
#ifndef GE2_PASSES_PASSES_H
#define GE2_PASSES_PASSES_H

#include "graph/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

/* bf16_storage.c: precision BF16's storage pass on a graph the program owns
 * (never the user's: a graph may be compiled again in another precision).
 * Each f32 tensor that GEMM-class nodes (GE2_OPF_BF16_OPERANDS) read as an
 * operand gets one CAST to bf16 before its first such reader, and those
 * readers read the copy (a parameter: its bf16 copy, GE2_ROLE_PARAMETER_COPY,
 * which the optimizer writes as it updates it); or, when every reader reads it as bf16
 * (ge2_op_reads_bf16: GEMM operands, declared inputs, shape references,
 * through reshapes) and its producer can round it
 * (ge2_op_def.stores_bf16), it is stored in bf16 itself, first. Tensor ids
 * are kept (the copies are appended); *n_casts, *n_stored and *n_copies
 * (parameter copies) say how many of each. */
ge2_status ge2_bf16_storage_pass(ge2_graph *graph, int *n_casts, int *n_stored, int *n_copies);

#ifdef __cplusplus
}
#endif

#endif /* GE2_PASSES_PASSES_H */
