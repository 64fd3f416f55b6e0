/* The launch pairs a classifier head kernel runs as one (fusion/head/head.h),
 * recognised by op and tensor alone, so the planner (planner/groups.c keeps
 * the pair's inputs alive through both launches) and the CUDA backend's
 * matcher (which also checks shapes, class count and addresses) agree.
 */
#ifndef GE2_FUSION_HEAD_PATTERN_H
#define GE2_FUSION_HEAD_PATTERN_H

#include "graph/ir.h"
#include "ops/linear/linear.h"
#include "ops/loss/loss.h"
#include "ops/ops.h"

typedef enum ge2_head_kind {
    GE2_HEAD_NONE,
    GE2_HEAD_LOSS,      /* LINEAR without activation, then CROSS_ENTROPY of its output */
    GE2_HEAD_GRADIENTS, /* LINEAR_GRAD_INPUT and LINEAR_GRAD_WEIGHT of one dz, either order */
} ge2_head_kind;


/* The head pair nodes a then b (consecutive in a schedule) form, if any. */
static inline ge2_head_kind ge2_head_pair_of(const ge2_node *a, const ge2_node *b)
{
    if (a->op == GE2_OP_LINEAR && GE2_ATTRS(ge2_linear_attrs, a->attrs)->act == GE2_ACT_NONE && b->op == GE2_OP_CROSS_ENTROPY &&
        GE2_ATTRS(ge2_loss_attrs, b->attrs)->classes == 0 && a->n_outputs >= 1 && b->n_inputs >= 1 && b->inputs[0] == a->outputs[0])
        return GE2_HEAD_LOSS;
    const bool gi_gw = a->op == GE2_OP_LINEAR_GRAD_INPUT && b->op == GE2_OP_LINEAR_GRAD_WEIGHT;
    const bool gw_gi = a->op == GE2_OP_LINEAR_GRAD_WEIGHT && b->op == GE2_OP_LINEAR_GRAD_INPUT;
    if ((gi_gw || gw_gi) && a->n_inputs >= 1 && b->n_inputs >= 1 && a->inputs[0] == b->inputs[0] &&
        !ge2_node_reads_output_of(b, a)) /* (two gradients one of which feeds the other: not a pair) */
        return GE2_HEAD_GRADIENTS;
    return GE2_HEAD_NONE;
}

#endif /* GE2_FUSION_HEAD_PATTERN_H */
