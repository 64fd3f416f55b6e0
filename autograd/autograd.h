/* Reverse-mode autodiff over the static graph: ge2_backward walks the forward
 * nodes in reverse creation order and calls each op's backward rule, which
 * appends PHASE_BACKWARD nodes to the same graph. */
#ifndef GE2_AUTOGRAD_AUTOGRAD_H
#define GE2_AUTOGRAD_AUTOGRAD_H

#include "graph/error.h"
#include "graph/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

/* GE2_GRAD_SEED and GE2_GRAD_NONE: include/ge2/extension.h. */
typedef struct ge2_autograd {
    ge2_graph *graph;
    int n_forward_tensors; /* tensors that existed when ge2_backward began */
    bool *needs;           /* [n_forward_tensors] depends on a parameter or a required input */
    int *grad;             /* [n_forward_tensors] accumulated gradient tensor id, or GE2_GRAD_NONE / GE2_GRAD_SEED */
    int seed;              /* tensor id of the materialized seed constant, -1 until a rule needs one */
    struct ge2_ag_part *parts; /* gradient parts held back until their tensor's gradient is read (parts.c) */
    int n_parts, cap_parts;
} ge2_autograd;

/* dy[i] is the gradient of node->outputs[i]: a tensor id, GE2_GRAD_SEED or GE2_GRAD_NONE.
 * A rule emits nodes with ge2_ag_emit and hands each input's gradient to ge2_ag_accumulate. */
typedef ge2_status (*ge2_backward_rule)(ge2_autograd *ag, const ge2_node *node, const int *dy);

/* ge2_ag_wants, ge2_ag_accumulate, ge2_ag_dy_tensor and ge2_ag_emit_op (a
 * registered op's own attrs) are the extension API's (extension.h); the
 * rules of ge2's own ops use the calls below with ge2_attrs. */
/* Appends a one-output PHASE_BACKWARD node; its output id in *out. */
ge2_status ge2_ag_emit(ge2_autograd *ag, ge2_op op, const int *inputs, int n_inputs, const ge2_attrs *attrs, int *out);
/* Appends a PHASE_BACKWARD node with n_outputs outputs; their ids in out[0..n_outputs). */
ge2_status ge2_ag_emit_n(ge2_autograd *ag, ge2_op op, const int *inputs, int n_inputs, int n_outputs,
                         const ge2_attrs *attrs, int *out);
/* The same for the common two-input case. */
ge2_status ge2_ag_emit2(ge2_autograd *ag, ge2_op op, int a, int b, const ge2_attrs *attrs, int *out);

/* parts.c: gradient parts. A rule may hand in part of x's gradient to be
 * merged later with x's other parts of the same kind, when x's gradient
 * is read: merge receives them in the order they came, emits the nodes
 * that combine them and hands the result to ge2_ag_accumulate. A slice's
 * gradient is one (ops/shape): the windows of a tensor that tile it
 * become one CONCAT instead of a zero-padded SLICE_BACKWARD each summed by
 * ADDs. */
typedef struct ge2_ag_part ge2_ag_part;
typedef ge2_status (*ge2_ag_merge_fn)(ge2_autograd *ag, int x, const ge2_ag_part *parts, int n);
struct ge2_ag_part {
    int x, dy;           /* whose gradient, and this part's tensor */
    ge2_attrs attrs;     /* the rule's description of the part (e.g. the slice's window) */
    ge2_ag_merge_fn merge; /* the kind: parts merge with those of the same function */
};
ge2_status ge2_ag_accumulate_part(ge2_autograd *ag, int x, int dy, const ge2_attrs *attrs, ge2_ag_merge_fn merge);
/* Merges x's held parts into its gradient; the walk calls it before it
 * reads a gradient, and for every tensor at its end. */
ge2_status ge2_ag_settle(ge2_autograd *ag, int x);

#ifdef __cplusplus
}
#endif

#endif /* GE2_AUTOGRAD_AUTOGRAD_H */
