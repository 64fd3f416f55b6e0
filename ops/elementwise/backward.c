/* Backward of the elementwise family. A broadcast input gets its gradient
 * summed back to its own shape with REDUCE_TO (x itself is the shape
 * reference, so a graph key with another batch stays correct). */
#include <string.h>

#include "ops/elementwise/elementwise.h"
#include "kernels/activation_math.h"
#include "ops/reduce/reduce.h"

static ge2_status scale(ge2_autograd *ag, int x, double alpha, int *out)
{
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    GE2_ATTRS(ge2_scale_attrs, a)->alpha = alpha;
    return ge2_ag_emit(ag, GE2_OP_SCALE, &x, 1, &a, out);
}

/* Gives g (the broadcast shape) to input x, reduced to x's shape and times sign. */
static ge2_status give_reduced(ge2_autograd *ag, int x, int g, double sign)
{
    if (!ge2_ag_wants(ag, x))
        return GE2_OK;
    const ge2_graph *gr = ag->graph;
    const ge2_tensor *tx = gr->tensors[x], *tg = gr->tensors[g];
    bool same = tx->shape.ndim == tg->shape.ndim;
    for (int i = 0; same && i < tx->shape.ndim; i++)
        same = tx->shape.dim[i] == tg->shape.dim[i];
    if (!same) {
        ge2_attrs a;
        memset(&a, 0, sizeof a);
        GE2_ATTRS(ge2_expand_attrs, a)->scale = 1.0;
        GE2_TRY(ge2_ag_emit2(ag, GE2_OP_REDUCE_TO, g, x, &a, &g));
    }
    if (sign != 1.0)
        GE2_TRY(scale(ag, g, sign, &g));
    return ge2_ag_accumulate(ag, x, g);
}

/* ADD: da = dy, db = dy; SUB: db = -dy (each reduced to its input's shape). */
ge2_status ge2_backward_add_sub(ge2_autograd *ag, const ge2_node *node, const int *dy)
{
    int d;
    GE2_TRY(ge2_ag_dy_tensor(ag, dy[0], &d));
    GE2_TRY(give_reduced(ag, node->inputs[0], d, 1.0));
    return give_reduced(ag, node->inputs[1], d, node->op == GE2_OP_SUB ? -1.0 : 1.0);
}

/* MUL: da = dy * b, db = dy * a. */
ge2_status ge2_backward_mul(ge2_autograd *ag, const ge2_node *node, const int *dy)
{
    int d, g;
    GE2_TRY(ge2_ag_dy_tensor(ag, dy[0], &d));
    for (int i = 0; i < 2; i++) {
        if (!ge2_ag_wants(ag, node->inputs[i]))
            continue;
        GE2_TRY(ge2_ag_emit2(ag, GE2_OP_MUL, d, node->inputs[1 - i], NULL, &g));
        GE2_TRY(give_reduced(ag, node->inputs[i], g, 1.0));
    }
    return GE2_OK;
}

ge2_status ge2_backward_scale(ge2_autograd *ag, const ge2_node *node, const int *dy)
{
    int d, g;
    GE2_TRY(ge2_ag_dy_tensor(ag, dy[0], &d));
    GE2_TRY(scale(ag, d, GE2_ATTRS(ge2_scale_attrs, node->attrs)->alpha, &g));
    return ge2_ag_accumulate(ag, node->inputs[0], g);
}

/* dz = dy * act'(z), computed from y where the activation allows (y is kept
 * alive anyway as the next layer's input; z then need not be). */
ge2_status ge2_backward_activation(ge2_autograd *ag, const ge2_node *node, const int *dy)
{
    int d, g;
    GE2_TRY(ge2_ag_dy_tensor(ag, dy[0], &d));
    ge2_attrs a = node->attrs;
    GE2_ATTRS(ge2_act_attrs, a)->from_output = ge2_act_grad_from_output(GE2_ATTRS(ge2_act_attrs, a)->act, GE2_ATTRS(ge2_act_attrs, a)->slope);
    int saved = GE2_ATTRS(ge2_act_attrs, a)->from_output ? node->outputs[0] : node->inputs[0];
    GE2_TRY(ge2_ag_emit2(ag, GE2_OP_ACTIVATION_BACKWARD, d, saved, &a, &g));
    return ge2_ag_accumulate(ag, node->inputs[0], g);
}
