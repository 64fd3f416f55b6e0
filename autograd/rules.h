/* The autograd column of the op table: one backward rule per op, defined
 * one op family per file. NULL where the op has none: metrics (NO_GRAD), the
 * ops only the backward emits (no second derivatives) and the optimizer. */
#ifndef GE2_AUTOGRAD_RULES_H
#define GE2_AUTOGRAD_RULES_H

#include "autograd/autograd.h"

extern const ge2_backward_rule ge2_backward_rules[GE2_OP_COUNT];

ge2_status ge2_backward_linear(ge2_autograd *ag, const ge2_node *node, const int *dy);
ge2_status ge2_backward_matmul(ge2_autograd *ag, const ge2_node *node, const int *dy);
ge2_status ge2_backward_add_sub(ge2_autograd *ag, const ge2_node *node, const int *dy);
ge2_status ge2_backward_mul(ge2_autograd *ag, const ge2_node *node, const int *dy);
ge2_status ge2_backward_scale(ge2_autograd *ag, const ge2_node *node, const int *dy);
ge2_status ge2_backward_activation(ge2_autograd *ag, const ge2_node *node, const int *dy);
ge2_status ge2_backward_softmax(ge2_autograd *ag, const ge2_node *node, const int *dy);
ge2_status ge2_backward_reduce(ge2_autograd *ag, const ge2_node *node, const int *dy);
ge2_status ge2_backward_reshape(ge2_autograd *ag, const ge2_node *node, const int *dy);
ge2_status ge2_backward_transpose(ge2_autograd *ag, const ge2_node *node, const int *dy);
ge2_status ge2_backward_concat(ge2_autograd *ag, const ge2_node *node, const int *dy);
ge2_status ge2_backward_slice(ge2_autograd *ag, const ge2_node *node, const int *dy);
ge2_status ge2_backward_slice_backward(ge2_autograd *ag, const ge2_node *node, const int *dy);
ge2_status ge2_backward_expand(ge2_autograd *ag, const ge2_node *node, const int *dy);
ge2_status ge2_backward_reduce_to(ge2_autograd *ag, const ge2_node *node, const int *dy);
ge2_status ge2_backward_cross_entropy(ge2_autograd *ag, const ge2_node *node, const int *dy);
ge2_status ge2_backward_mse_loss(ge2_autograd *ag, const ge2_node *node, const int *dy);

#endif /* GE2_AUTOGRAD_RULES_H */
