/* Backward of the losses. CROSS_ENTROPY's forward kernel already wrote the
 * gradient of the mean loss (dlogits), so its backward is that tensor —
 * times dy only when the loss is not itself the seed (when it is, the
 * kernel applies the loss scale the seed would have carried). */
#include <string.h>

#include "ops/loss/loss.h"
#include "ops/reduce/reduce.h"

ge2_status ge2_backward_cross_entropy(ge2_autograd *ag, const ge2_node *node, const int *dy)
{
    int g = node->outputs[1];
    if (dy[0] == GE2_GRAD_NONE)
        return GE2_OK; /* only dlogits was consumed: no second derivatives */
    /* The loss itself: dlogits starts the backward, so the kernel multiplies
     * it by the loss scale, as LOSS_SCALE would the seed (ge2_loss_scaling);
     * otherwise dy carries the scale already */
    GE2_ATTRS(ge2_loss_attrs, ag->graph->nodes[node->id].attrs)->seeds_backward = dy[0] == GE2_GRAD_SEED;
    if (dy[0] != GE2_GRAD_SEED) {
        GE2_TRY(ge2_ag_emit2(ag, GE2_OP_MUL, g, dy[0], NULL, &g));
    }
    return ge2_ag_accumulate(ag, node->inputs[0], g);
}

/* loss = mean (p - t)^2: dp = (2 dy / n) (p - t), dt = -dp. The 2/n comes
 * from EXPAND's mean attr so that n follows the batch. */
ge2_status ge2_backward_mse_loss(ge2_autograd *ag, const ge2_node *node, const int *dy)
{
    int p = node->inputs[0], t = node->inputs[1], d, e, diff, g;
    GE2_TRY(ge2_ag_dy_tensor(ag, dy[0], &d));
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    GE2_ATTRS(ge2_expand_attrs, a)->scale = 2.0;
    GE2_ATTRS(ge2_expand_attrs, a)->mean = true;
    GE2_TRY(ge2_ag_emit2(ag, GE2_OP_EXPAND, d, p, &a, &e));
    GE2_TRY(ge2_ag_emit2(ag, GE2_OP_SUB, p, t, NULL, &diff));
    GE2_TRY(ge2_ag_emit2(ag, GE2_OP_MUL, diff, e, NULL, &g));
    GE2_TRY(ge2_ag_accumulate(ag, p, g));
    if (ge2_ag_wants(ag, t)) {
        memset(&a, 0, sizeof a);
        GE2_ATTRS(ge2_scale_attrs, a)->alpha = -1.0;
        GE2_TRY(ge2_ag_emit(ag, GE2_OP_SCALE, &g, 1, &a, &g));
        GE2_TRY(ge2_ag_accumulate(ag, t, g));
    }
    return GE2_OK;
}
