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
    struct ge2_ag_window *windows; /* gradients held back as windows of their tensor (windows.c) */
    int n_windows, cap_windows;
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

/* windows.c: x's gradient is dy placed at window [start, end) of x's axis,
 * zeros elsewhere (a slice's backward). It is held back until x's gradient
 * is read: windows that tile the axis exactly (q, k and v cut from one
 * packed projection) become one CONCAT of their dys instead of a
 * SLICE_BACKWARD each summed by ADDs, which writes x's size once instead
 * of 2k - 1 times. Other windows become SLICE_BACKWARDs, in the order they
 * came. Either way they join x's other gradients. */
ge2_status ge2_ag_accumulate_window(ge2_autograd *ag, int x, int dy, const ge2_slice_attrs *window);
/* Emits x's held windows into its gradient (ge2_ag_accumulate); the walk
 * calls it before it reads a gradient. */
ge2_status ge2_ag_settle(ge2_autograd *ag, int x);

#ifdef __cplusplus
}
#endif

#endif /* GE2_AUTOGRAD_AUTOGRAD_H */
