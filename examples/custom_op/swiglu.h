/* SwiGLU, an op ge2 lacks, defined outside the library through the
 * extension API (include/ge2/extension.h) alone:
 *
 *   y = a ⊙ silu(g),  silu(g) = g · sigmoid(g)      a, g, y: [..., n]
 *
 * Its backward is an op of its own, "swiglu_backward", which takes
 * (dy, a, g) and makes (da, dg):
 *   da = dy ⊙ silu(g)
 *   dg = dy ⊙ a ⊙ sigmoid(g) (1 + g (1 - sigmoid(g)))
 * Each op has a CPU kernel (f32 and f64) and a CUDA kernel (f32); the
 * forward has a second CUDA kernel, float4-wide, registered as a candidate
 * the runtime times against the first. */
#ifndef GE2_EXAMPLES_CUSTOM_OP_SWIGLU_H
#define GE2_EXAMPLES_CUSTOM_OP_SWIGLU_H

#include "ge2/extension.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Registers both ops and the candidate; once per process. */
ge2_status swiglu_register(void);

/* The public builder: y = a ⊙ silu(g). */
ge2_status swiglu(ge2_graph *graph, ge2_tensor *a, ge2_tensor *g, ge2_tensor **y);

/* swiglu_cuda.cu: the launchers the definitions name. */
ge2_status swiglu_cuda_forward(const ge2_launch *launch);
ge2_status swiglu_cuda_forward_vec4(const ge2_launch *launch);
ge2_status swiglu_cuda_backward(const ge2_launch *launch);

#ifdef __cplusplus
}
#endif

#endif /* GE2_EXAMPLES_CUSTOM_OP_SWIGLU_H */
