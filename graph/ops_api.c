/* The public op functions: each checks its handles, fills the op's attrs and
 * appends one node through ge2_graph_add_node (which runs the inference). */
#include <string.h>

#include "graph/graph_internal.h"
#include "kernels/activation_math.h"

/* Adds op over ts[0..n) (named what[i] in messages) and returns output 0 in *y. */
static ge2_status add_op(ge2_graph *g, ge2_op op, const char *fn, ge2_tensor *const *ts, const char *const *what,
                         int n, int n_out, const ge2_attrs *attrs, ge2_tensor **y)
{
    GE2_TRY(ge2_check_graph(g, fn));
    if (!y)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "%s: output pointer is NULL", fn);
    int ids[GE2_MAX_INPUTS];
    if (n > GE2_MAX_INPUTS)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "%s: %d inputs, at most %d", fn, n, GE2_MAX_INPUTS);
    for (int i = 0; i < n; i++) {
        GE2_TRY(ge2_check_tensor(g, ts[i], fn, what[i]));
        ids[i] = ts[i]->id;
    }
    int node;
    GE2_TRY(ge2_graph_add_node(g, op, GE2_PHASE_FORWARD, ids, n, n_out, attrs, &node));
    *y = g->tensors[g->nodes[node].outputs[0]];
    return GE2_OK;
}

ge2_status ge2_linear(ge2_graph *graph, ge2_tensor *x, ge2_tensor *w, ge2_tensor *b, ge2_activation act, float slope,
                      ge2_tensor **y)
{
    ge2_tensor *ts[3] = {x, w, b};
    static const char *const what[3] = {"x", "w", "b"};
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    a.linear.act = act;
    a.linear.slope = slope;
    if ((unsigned)act >= GE2_ACT_COUNT)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_linear: unknown activation %d", (int)act);
    int n_out = ge2_linear_stash_of(act, slope) == GE2_STASH_NONE ? 1 : 2;
    return add_op(graph, GE2_OP_LINEAR, "ge2_linear", ts, what, b ? 3 : 2, n_out, &a, y);
}

ge2_status ge2_matmul(ge2_graph *graph, ge2_tensor *a, ge2_tensor *b, bool trans_a, bool trans_b, ge2_tensor **y)
{
    ge2_tensor *ts[2] = {a, b};
    static const char *const what[2] = {"a", "b"};
    ge2_attrs at;
    memset(&at, 0, sizeof at);
    at.matmul.trans_a = trans_a;
    at.matmul.trans_b = trans_b;
    return add_op(graph, GE2_OP_MATMUL, "ge2_matmul", ts, what, 2, 1, &at, y);
}

static const char *const binary_what[2] = {"a", "b"};

ge2_status ge2_add(ge2_graph *graph, ge2_tensor *a, ge2_tensor *b, ge2_tensor **y)
{
    ge2_tensor *ts[2] = {a, b};
    return add_op(graph, GE2_OP_ADD, "ge2_add", ts, binary_what, 2, 1, NULL, y);
}

ge2_status ge2_sub(ge2_graph *graph, ge2_tensor *a, ge2_tensor *b, ge2_tensor **y)
{
    ge2_tensor *ts[2] = {a, b};
    return add_op(graph, GE2_OP_SUB, "ge2_sub", ts, binary_what, 2, 1, NULL, y);
}

ge2_status ge2_mul(ge2_graph *graph, ge2_tensor *a, ge2_tensor *b, ge2_tensor **y)
{
    ge2_tensor *ts[2] = {a, b};
    return add_op(graph, GE2_OP_MUL, "ge2_mul", ts, binary_what, 2, 1, NULL, y);
}

static const char *const unary_what[1] = {"x"};

ge2_status ge2_scale(ge2_graph *graph, ge2_tensor *x, double alpha, ge2_tensor **y)
{
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    a.scale.alpha = alpha;
    return add_op(graph, GE2_OP_SCALE, "ge2_scale", &x, unary_what, 1, 1, &a, y);
}

ge2_status ge2_activate(ge2_graph *graph, ge2_tensor *x, ge2_activation act, float slope, ge2_tensor **y)
{
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    a.act.act = act;
    a.act.slope = slope;
    return add_op(graph, GE2_OP_ACTIVATION, "ge2_activate", &x, unary_what, 1, 1, &a, y);
}

ge2_status ge2_softmax(ge2_graph *graph, ge2_tensor *x, ge2_tensor **y)
{
    return add_op(graph, GE2_OP_SOFTMAX, "ge2_softmax", &x, unary_what, 1, 1, NULL, y);
}

ge2_status ge2_log_softmax(ge2_graph *graph, ge2_tensor *x, ge2_tensor **y)
{
    return add_op(graph, GE2_OP_LOG_SOFTMAX, "ge2_log_softmax", &x, unary_what, 1, 1, NULL, y);
}

/* axis is normalized here so the node (and every backend) sees [0, ndim). */
static ge2_status reduce(ge2_graph *graph, ge2_op op, const char *fn, ge2_tensor *x, int axis, ge2_tensor **y)
{
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    a.reduce.axis = axis;
    if (axis != GE2_AXIS_ALL && x && axis < 0)
        a.reduce.axis = axis + x->shape.ndim;
    if (axis != GE2_AXIS_ALL && x && (a.reduce.axis < 0 || a.reduce.axis >= x->shape.ndim)) {
        char buf[64];
        return ge2_error(GE2_ERR_SHAPE, "%s: axis %d out of range for '%s' %s", fn, axis, x->name,
                         ge2_shape_str(x->shape, buf, sizeof buf));
    }
    return add_op(graph, op, fn, &x, unary_what, 1, 1, &a, y);
}

ge2_status ge2_sum_all(ge2_graph *graph, ge2_tensor *x, ge2_tensor **y)
{
    return reduce(graph, GE2_OP_SUM, "ge2_sum_all", x, GE2_AXIS_ALL, y);
}

ge2_status ge2_mean_all(ge2_graph *graph, ge2_tensor *x, ge2_tensor **y)
{
    return reduce(graph, GE2_OP_MEAN, "ge2_mean_all", x, GE2_AXIS_ALL, y);
}

ge2_status ge2_sum(ge2_graph *graph, ge2_tensor *x, int axis, ge2_tensor **y)
{
    return reduce(graph, GE2_OP_SUM, "ge2_sum", x, axis, y);
}

ge2_status ge2_mean(ge2_graph *graph, ge2_tensor *x, int axis, ge2_tensor **y)
{
    return reduce(graph, GE2_OP_MEAN, "ge2_mean", x, axis, y);
}

ge2_status ge2_reshape(ge2_graph *graph, ge2_tensor *x, ge2_shape shape, ge2_tensor **y)
{
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    a.reshape.shape = shape;
    return add_op(graph, GE2_OP_RESHAPE, "ge2_reshape", &x, unary_what, 1, 1, &a, y);
}

ge2_status ge2_transpose(ge2_graph *graph, ge2_tensor *x, ge2_tensor **y)
{
    return add_op(graph, GE2_OP_TRANSPOSE, "ge2_transpose", &x, unary_what, 1, 1, NULL, y);
}

ge2_status ge2_concat(ge2_graph *graph, ge2_tensor *const *xs, int n, int axis, ge2_tensor **y)
{
    static const char *const what[GE2_MAX_INPUTS] = {"xs[0]", "xs[1]", "xs[2]", "xs[3]",
                                                     "xs[4]", "xs[5]", "xs[6]", "xs[7]"};
    if (!xs || n < 1 || n > GE2_MAX_INPUTS)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_concat: needs 1..%d tensors, got %d%s", GE2_MAX_INPUTS, n,
                         xs ? "" : " (xs is NULL)");
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    a.concat.axis = axis;
    if (xs[0] && axis < 0)
        a.concat.axis = axis + xs[0]->shape.ndim;
    return add_op(graph, GE2_OP_CONCAT, "ge2_concat", xs, what, n, 1, &a, y);
}

ge2_status ge2_slice(ge2_graph *graph, ge2_tensor *x, int axis, int64_t start, int64_t end, ge2_tensor **y)
{
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    a.slice.axis = x && axis < 0 ? axis + x->shape.ndim : axis;
    a.slice.start = start;
    a.slice.end = end;
    return add_op(graph, GE2_OP_SLICE, "ge2_slice", &x, unary_what, 1, 1, &a, y);
}

static const char *const loss_what[2] = {"logits", "labels"};

ge2_status ge2_cross_entropy(ge2_graph *graph, ge2_tensor *logits, ge2_tensor *labels, float label_smoothing,
                             ge2_tensor **loss)
{
    ge2_tensor *ts[2] = {logits, labels};
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    a.loss.label_smoothing = label_smoothing;
    return add_op(graph, GE2_OP_CROSS_ENTROPY, "ge2_cross_entropy", ts, loss_what, 2, 2, &a, loss);
}

ge2_status ge2_mse_loss(ge2_graph *graph, ge2_tensor *pred, ge2_tensor *target, ge2_tensor **loss)
{
    ge2_tensor *ts[2] = {pred, target};
    static const char *const what[2] = {"pred", "target"};
    return add_op(graph, GE2_OP_MSE_LOSS, "ge2_mse_loss", ts, what, 2, 1, NULL, loss);
}

ge2_status ge2_accuracy(ge2_graph *graph, ge2_tensor *logits, ge2_tensor *labels, ge2_tensor **correct)
{
    ge2_tensor *ts[2] = {logits, labels};
    return add_op(graph, GE2_OP_ACCURACY, "ge2_accuracy", ts, loss_what, 2, 1, NULL, correct);
}
