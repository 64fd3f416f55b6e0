/* The public builders of the loss family: ge2_cross_entropy, ge2_mse_loss and ge2_accuracy. Each checks its
 * arguments, fills the op's attrs and appends one node (which runs the
 * inference). */
#include <string.h>

#include "ops/loss/loss.h"

static const char *const loss_what[2] = {"logits", "labels"};

ge2_status ge2_cross_entropy_padded(ge2_graph *graph, ge2_tensor *logits, ge2_tensor *labels, float label_smoothing,
                                    int64_t classes, ge2_tensor **loss)
{
    ge2_tensor *ts[2] = {logits, labels};
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    GE2_ATTRS(ge2_loss_attrs, a)->label_smoothing = label_smoothing;
    if (classes < 0)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_cross_entropy_padded: classes %lld is negative (0: every column)", (long long)classes);
    /* every column a class is the plain loss: 0, so fusions that know only it still match */
    GE2_ATTRS(ge2_loss_attrs, a)->classes = logits && classes == ge2_tensor_shape(logits).dim[1] ? 0 : classes;
    return ge2_graph_add_forward(graph, GE2_OP_CROSS_ENTROPY, "ge2_cross_entropy", ts, loss_what, 2, 2, &a, loss);
}

ge2_status ge2_cross_entropy(ge2_graph *graph, ge2_tensor *logits, ge2_tensor *labels, float label_smoothing,
                             ge2_tensor **loss)
{
    return ge2_cross_entropy_padded(graph, logits, labels, label_smoothing, 0, loss);
}

ge2_status ge2_mse_loss(ge2_graph *graph, ge2_tensor *pred, ge2_tensor *target, ge2_tensor **loss)
{
    ge2_tensor *ts[2] = {pred, target};
    static const char *const what[2] = {"pred", "target"};
    return ge2_graph_add_forward(graph, GE2_OP_MSE_LOSS, "ge2_mse_loss", ts, what, 2, 1, NULL, loss);
}

ge2_status ge2_accuracy(ge2_graph *graph, ge2_tensor *logits, ge2_tensor *labels, ge2_tensor **correct)
{
    ge2_tensor *ts[2] = {logits, labels};
    return ge2_graph_add_forward(graph, GE2_OP_ACCURACY, "ge2_accuracy", ts, loss_what, 2, 1, NULL, correct);
}
