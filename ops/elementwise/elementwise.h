/* The elementwise family: ADD, SUB, MUL (broadcasting), SCALE, ACTIVATION
 * and its backward, ACTIVATION_BACKWARD. activation_math.h is the single
 * source of the activation functions and their derivatives.
 *
 * ops.c holds the definitions (registered by ops/builtin.def's line for
 * each); the rest of the folder is their parts: infer.c, backward.c, api.c
 * (the public builders), cpu.c, the CUDA launchers (cuda*.cu) and test.c
 * (test cases and float64 references). */
#ifndef GE2_OPS_ELEMENTWISE_ELEMENTWISE_H
#define GE2_OPS_ELEMENTWISE_ELEMENTWISE_H

/* nvcc compiles the CUDA launchers as C++: these are C declarations */
#ifdef __cplusplus
extern "C" {
#endif

#include "autograd/autograd.h"
#include "graph/op_support.h"
#include "ops/ops.h"

/* The family's node attributes (graph/ir.h: GE2_ATTRS). */
typedef struct ge2_act_attrs {
    ge2_activation act;
    float slope;
    /* ACTIVATION_BACKWARD, LINEAR_GRAD_INPUT: the saved input is y = act(z), not z
     * (LINEAR_GRAD_INPUT's relu from z reads LINEAR's U8 bit-mask instead) */
    bool from_output;
} ge2_act_attrs;
GE2_ATTRS_FIT(ge2_act_attrs);

/* infer.c */
ge2_status ge2_infer_ADD(const ge2_node *node, const ge2_desc *in, ge2_desc *out);
ge2_status ge2_infer_SUB(const ge2_node *node, const ge2_desc *in, ge2_desc *out);
ge2_status ge2_infer_MUL(const ge2_node *node, const ge2_desc *in, ge2_desc *out);
ge2_status ge2_infer_SCALE(const ge2_node *node, const ge2_desc *in, ge2_desc *out);
ge2_status ge2_infer_ACTIVATION(const ge2_node *node, const ge2_desc *in, ge2_desc *out);
ge2_status ge2_infer_ACTIVATION_BACKWARD(const ge2_node *node, const ge2_desc *in, ge2_desc *out);

/* backward.c */
ge2_status ge2_backward_add_sub(ge2_autograd *ag, const ge2_node *node, const int *dy);
ge2_status ge2_backward_mul(ge2_autograd *ag, const ge2_node *node, const int *dy);
ge2_status ge2_backward_scale(ge2_autograd *ag, const ge2_node *node, const int *dy);
ge2_status ge2_backward_activation(ge2_autograd *ag, const ge2_node *node, const int *dy);

/* cpu.c: shapes from the launch views, in the dtype of input 0 (f32, or f64
 * for gradient checks); outputs whose data is NULL are skipped */
ge2_status ge2_cpu_binary(const ge2_launch *l);
ge2_status ge2_cpu_scale(const ge2_launch *l);
ge2_status ge2_cpu_activation(const ge2_launch *l);
ge2_status ge2_cpu_activation_backward(const ge2_launch *l);

/* CUDA launchers (f32): enqueue on launch->stream, capturable */
ge2_status ge2_cuda_binary_launch(const ge2_launch *launch);              /* ADD, SUB, MUL */
ge2_status ge2_cuda_scale_launch(const ge2_launch *launch);
ge2_status ge2_cuda_activation_launch(const ge2_launch *launch);
ge2_status ge2_cuda_activation_backward_launch(const ge2_launch *launch);
ge2_status ge2_cuda_expand_launch(const ge2_launch *launch); /* the reduce family's EXPAND: a broadcast times a scale */
const char *ge2_cuda_elementwise_describe(const ge2_launch *launch);

/* ops.c */
extern const ge2_op_def ge2_op_def_add;
extern const ge2_op_def ge2_op_def_sub;
extern const ge2_op_def ge2_op_def_mul;
extern const ge2_op_def ge2_op_def_scale;
extern const ge2_op_def ge2_op_def_activation;
extern const ge2_op_def ge2_op_def_activation_backward;

#ifdef __cplusplus
}
#endif

#endif /* GE2_OPS_ELEMENTWISE_ELEMENTWISE_H */
