/* The cast family: CAST (x -> y, the same values in another float dtype:
 * f32 or f64 to bf16, rounded to nearest, ties to even, and bf16 to f32 or
 * f64, exact). A piece of mixed precision (docs/mixed-precision.md): what
 * turns a tensor into bf16 storage, and back, where a kernel cannot read
 * or write bf16 itself. An f64 value
 * narrows to f32 first, then to bf16, as the CPU's f32 GEMM operands do.
 * The rounding is graph/bf16.h's on the CPU and CUDA's __float2bfloat16_rn
 * on the GPU; the two agree bit for bit (tests/graph/bf16_test, and
 * op_agreement_test on the GPU).
 *
 * Its backward passes the gradient straight through, cast back to x's
 * dtype (as PyTorch's autocast does): the rounding's own derivative is
 * zero almost everywhere, which is not what training through it wants.
 *
 * ops.c holds the definition (registered by ops/builtin.def's line); the
 * rest of the folder is its parts: infer.c, backward.c, api.c (the public
 * builder), cpu.c, cuda.cu and test.c. Precision BF16's storage pass,
 * which places casts before the GEMMs that read f32 operands, is a compile
 * pass (passes/bf16_storage.c). */
#ifndef GE2_OPS_CAST_CAST_H
#define GE2_OPS_CAST_CAST_H

#ifdef __cplusplus
extern "C" {
#endif

#include <string.h>

#include "autograd/autograd.h"
#include "graph/op_support.h"
#include "ops/ops.h"

static inline ge2_dtype ge2_cast_to(const ge2_node *node) { return GE2_ATTRS(ge2_cast_attrs, node->attrs)->to; }

/* Whether CAST takes from -> to: one side bf16, the other f32 or f64 */
static inline bool ge2_cast_supported(ge2_dtype from, ge2_dtype to)
{
    const bool from_float = from == GE2_F32 || from == GE2_F64, to_float = to == GE2_F32 || to == GE2_F64;
    return (from_float && to == GE2_BF16) || (from == GE2_BF16 && to_float);
}

/* infer.c */
ge2_status ge2_infer_CAST(const ge2_node *node, const ge2_desc *in, ge2_desc *out);

/* backward.c */
ge2_status ge2_backward_cast(ge2_autograd *ag, const ge2_node *node, const int *dy);

/* cpu.c */
ge2_status ge2_cpu_cast(const ge2_launch *l);

/* cuda.cu (f32 <-> bf16): enqueue on launch->stream, capturable */
ge2_status ge2_cuda_cast_launch(const ge2_launch *launch);

/* ops.c */
extern const ge2_op_def ge2_op_def_cast;

#ifdef __cplusplus
}
#endif

#endif /* GE2_OPS_CAST_CAST_H */
