/* The dropout family: DROPOUT (x -> y: in a train step each element zeroed
 * with probability p, the rest scaled by 1/(1-p); an eval step copies) and
 * DROPOUT_BACKWARD (dy -> dx through the same mask, drawn again).
 *
 * Element i of a dropout with stream s keeps when word i mod 4 of
 * draw i / 4 of stream s (ge2_philox_step_draw, graph/philox.h), as a
 * uniform in [0, 1), is at least p: one draw serves four neighbouring
 * elements, as PyTorch's dropout kernels use theirs, which keeps the CUDA
 * kernel at memory speed. Both
 * backends compute exactly that, so one seed gives one mask on both.
 *
 * The family's functions (inference, backward rule, kernels) also take an
 * addend as input 1, which y gets at the store (y = plus + the masked x;
 * its gradient is dy): fusion/add_into's DROPOUT_ADD runs them so, the
 * plain DROPOUT has no such input.
 *
 * ops.c holds the definitions (registered by ops/builtin.def's lines); the
 * rest of the folder is their parts: infer.c, backward.c, api.c (the public
 * builder), cpu.c, cuda.cu and test.c (test cases and float64 references). */
#ifndef GE2_OPS_DROPOUT_DROPOUT_H
#define GE2_OPS_DROPOUT_DROPOUT_H

/* nvcc compiles the CUDA launchers as C++: these are C declarations */
#ifdef __cplusplus
extern "C" {
#endif

#include "autograd/autograd.h"
#include "graph/control.h"
#include "graph/op_support.h"
#include "graph/philox.h"
#include "ops/ops.h"

/* The family's node attributes (graph/ir.h: GE2_ATTRS). */
/* DROPOUT and DROPOUT_BACKWARD: the probability p of zeroing an element
 * (kept ones scale by 1/(1-p)), and the stream, which tells this dropout's
 * draws from every other's in the step (the forward's and its backward's
 * are the same, so the backward draws the same mask again). */
typedef struct ge2_dropout_attrs {
    double p;
    uint32_t stream;
} ge2_dropout_attrs;
GE2_ATTRS_FIT(ge2_dropout_attrs);

/* Whether the element whose draw is word `bits` survives */
static inline GE2_HD bool ge2_dropout_kept(uint32_t bits, float p) { return ge2_philox_uniform(bits) >= p; }

/* The probability launch l drops with: its node's p in a train step, 0 in
 * an eval step (which keeps every value). */
static inline double ge2_dropout_step_p(const ge2_launch *l) { return l->training ? GE2_ATTRS(ge2_dropout_attrs, l->node->attrs)->p : 0.0; }

/* The kept elements' scale, 1/(1-p), rounded once to f32 for both backends. */
static inline float ge2_dropout_scale(double p) { return (float)(1.0 / (1.0 - p)); }

/* infer.c */
ge2_status ge2_infer_DROPOUT(const ge2_node *node, const ge2_desc *in, ge2_desc *out);

/* backward.c */
ge2_status ge2_backward_dropout(ge2_autograd *ag, const ge2_node *node, const int *dy);

/* cpu.c */
ge2_status ge2_cpu_dropout(const ge2_launch *l);

/* cuda.cu (f32): enqueue on launch->stream, capturable */
ge2_status ge2_cuda_dropout_launch(const ge2_launch *launch);

/* ops.c */
extern const ge2_op_def ge2_op_def_dropout;
extern const ge2_op_def ge2_op_def_dropout_backward;

#ifdef __cplusplus
}
#endif

#endif /* GE2_OPS_DROPOUT_DROPOUT_H */
