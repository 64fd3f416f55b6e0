#include "tests/support/op_cases.h"

#include <string.h>

#include "graph/alloc.h"
#include "graph/error.h"
#include "graph/init.h"
#include "ops/ops.h"

/* What a builder works with: the instance, its dtype and a counter-based RNG. */
typedef struct ctx {
    ge2_op_instance *inst;
    ge2_dtype dtype;
    uint64_t key, counter;
    int n_names;
} ctx;

static double uniform(ctx *c, double lo, double hi) { return lo + (hi - lo) * ge2_init_uniform01(c->key, c->counter++); }
static int64_t irange(ctx *c, int64_t lo, int64_t hi) { return lo + (int64_t)(uniform(c, 0, 1) * (double)(hi - lo + 1)); }
static bool coin(ctx *c) { return uniform(c, 0, 1) < 0.5; }

static ge2_shape random_shape(ctx *c, int min_nd, int max_nd)
{
    ge2_shape s = ge2_shape0();
    s.ndim = (int)irange(c, min_nd, max_nd);
    for (int i = 0; i < s.ndim; i++)
        s.dim[i] = irange(c, 1, 4);
    return s;
}

static void next_name(ctx *c, char *buf, const char *stem) { snprintf(buf, GE2_NAME_MAX, "%s%d", stem, c->n_names++); }

/* A fed tensor with random data: float operands in [-1, 1), labels in [0, classes). */
static ge2_status feed(ctx *c, ge2_role role, ge2_dtype dtype, ge2_shape s, int64_t classes, bool wrt, ge2_tensor **out)
{
    ge2_op_instance *inst = c->inst;
    char name[GE2_NAME_MAX];
    next_name(c, name, role == GE2_ROLE_LABEL ? "label" : "x");
    GE2_TRY(role == GE2_ROLE_LABEL ? ge2_label(inst->graph, name, dtype, s, out)
                                   : ge2_input(inst->graph, name, dtype, s, out));
    int64_t n = ge2_shape_numel(s);
    void *data = ge2_malloc((size_t)n * ge2_dtype_size(dtype) + 1);
    if (!data)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "op_cases: out of memory");
    for (int64_t i = 0; i < n; i++) {
        if (dtype == GE2_I32)
            ((int32_t *)data)[i] = (int32_t)irange(c, 0, classes - 1);
        else if (dtype == GE2_U8)
            ((uint8_t *)data)[i] = (uint8_t)irange(c, 0, 255);
        else if (dtype == GE2_F64)
            ((double *)data)[i] = uniform(c, -1, 1);
        else
            ((float *)data)[i] = (float)uniform(c, -1, 1);
    }
    inst->feeds[inst->n_feeds++] = (ge2_feed){*out, data, s};
    if (wrt) {
        GE2_TRY(ge2_require_grad(inst->graph, *out));
        inst->wrt[inst->n_wrt++] = *out;
    }
    return GE2_OK;
}

/* A differentiated float operand: a PARAMETER the first time (ge2_backward
 * needs one), a required INPUT after that, so both paths are exercised. */
static ge2_status operand(ctx *c, ge2_shape s, ge2_tensor **out)
{
    ge2_op_instance *inst = c->inst;
    if (inst->graph->n_parameters > 0)
        return feed(c, GE2_ROLE_INPUT, c->dtype, s, 0, true, out);
    char name[GE2_NAME_MAX];
    next_name(c, name, "p");
    ge2_init init = {GE2_INIT_UNIFORM, -1.0, 1.0, 0};
    GE2_TRY(ge2_parameter(inst->graph, name, c->dtype, s, init, out));
    inst->wrt[inst->n_wrt++] = *out;
    return GE2_OK;
}

/* A float operand nobody differentiates (shape references, backward-op inputs). */
static ge2_status plain(ctx *c, ge2_shape s, ge2_tensor **out) { return feed(c, GE2_ROLE_INPUT, c->dtype, s, 0, false, out); }

static ge2_status last_node(ctx *c)
{
    c->inst->node = c->inst->graph->n_nodes - 1;
    return GE2_OK;
}

static ge2_status direct(ctx *c, ge2_op op, ge2_tensor *const *ts, int n, int n_out, const ge2_attrs *a)
{
    int ids[GE2_MAX_INPUTS];
    for (int i = 0; i < n; i++)
        ids[i] = ts[i]->id;
    return ge2_graph_add_node(c->inst->graph, op, GE2_PHASE_FORWARD, ids, n, n_out, a, &c->inst->node);
}

static ge2_activation random_act(ctx *c, float *slope)
{
    *slope = coin(c) ? 0.1f : -0.2f;
    return (ge2_activation)irange(c, 0, GE2_ACT_COUNT - 1);
}

/* Attrs of an activation derivative: any activation, from y where y allows it, else from z. */
static ge2_attrs random_act_backward(ctx *c)
{
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    a.act.act = random_act(c, &a.act.slope);
    a.act.from_output = coin(c) && (a.act.act == GE2_ACT_RELU || a.act.act == GE2_ACT_SIGMOID ||
                                    a.act.act == GE2_ACT_TANH || (a.act.act == GE2_ACT_LEAKY_RELU && a.act.slope >= 0));
    return a;
}

/* ------------------------------------------------------------- the cases */

static ge2_status case_linear(ctx *c)
{
    int64_t b = irange(c, 1, 4), in = irange(c, 1, 5), out = irange(c, 1, 5);
    ge2_tensor *w, *x, *bias = NULL, *y;
    GE2_TRY(operand(c, ge2_shape2(out, in), &w));
    GE2_TRY(operand(c, ge2_shape2(b, in), &x));
    if (coin(c))
        GE2_TRY(operand(c, ge2_shape1(out), &bias));
    float slope;
    ge2_activation act = random_act(c, &slope);
    GE2_TRY(ge2_linear(c->inst->graph, x, w, bias, act, slope, &y));
    return last_node(c);
}

static ge2_status case_matmul(ctx *c)
{
    bool ta = coin(c), tb = coin(c), batched = coin(c);
    int64_t n = irange(c, 1, 3), m = irange(c, 1, 4), k = irange(c, 1, 4), p = irange(c, 1, 4);
    ge2_shape sa = ta ? ge2_shape2(k, m) : ge2_shape2(m, k), sb = tb ? ge2_shape2(p, k) : ge2_shape2(k, p);
    if (batched) {
        sa = ge2_shape3(n, sa.dim[0], sa.dim[1]);
        sb = ge2_shape3(n, sb.dim[0], sb.dim[1]);
    }
    ge2_tensor *a, *b, *y;
    GE2_TRY(operand(c, sa, &a));
    GE2_TRY(operand(c, sb, &b));
    GE2_TRY(ge2_matmul(c->inst->graph, a, b, ta, tb, &y));
    return last_node(c);
}

/* big, and small that broadcasts to it: a suffix of big with some dims set to 1. */
static void broadcast_shapes(ctx *c, ge2_shape *big, ge2_shape *small)
{
    *big = random_shape(c, 1, 4);
    *small = ge2_shape0();
    small->ndim = (int)irange(c, 0, big->ndim);
    for (int i = 0; i < small->ndim; i++)
        small->dim[i] = coin(c) ? big->dim[big->ndim - small->ndim + i] : 1;
}

static ge2_status case_binary(ctx *c, ge2_status (*fn)(ge2_graph *, ge2_tensor *, ge2_tensor *, ge2_tensor **))
{
    ge2_shape sa, sb;
    broadcast_shapes(c, &sa, &sb);
    if (coin(c)) {
        ge2_shape t = sa;
        sa = sb;
        sb = t;
    }
    ge2_tensor *a, *b, *y;
    GE2_TRY(operand(c, sa, &a));
    GE2_TRY(operand(c, sb, &b));
    GE2_TRY(fn(c->inst->graph, a, b, &y));
    return last_node(c);
}

static ge2_status case_add(ctx *c) { return case_binary(c, ge2_add); }
static ge2_status case_sub(ctx *c) { return case_binary(c, ge2_sub); }
static ge2_status case_mul(ctx *c) { return case_binary(c, ge2_mul); }

static ge2_status case_scale(ctx *c)
{
    ge2_tensor *x, *y;
    GE2_TRY(operand(c, random_shape(c, 0, 4), &x));
    GE2_TRY(ge2_scale(c->inst->graph, x, uniform(c, -2, 2), &y));
    return last_node(c);
}

static ge2_status case_activation(ctx *c)
{
    ge2_tensor *x, *y;
    float slope;
    ge2_activation act = random_act(c, &slope);
    GE2_TRY(operand(c, random_shape(c, 1, 4), &x));
    GE2_TRY(ge2_activate(c->inst->graph, x, act, slope, &y));
    return last_node(c);
}

static ge2_status case_softmax_op(ctx *c, bool log_out)
{
    ge2_tensor *x, *y;
    GE2_TRY(operand(c, random_shape(c, 1, 3), &x));
    GE2_TRY(log_out ? ge2_log_softmax(c->inst->graph, x, &y) : ge2_softmax(c->inst->graph, x, &y));
    return last_node(c);
}

static ge2_status case_softmax(ctx *c) { return case_softmax_op(c, false); }
static ge2_status case_log_softmax(ctx *c) { return case_softmax_op(c, true); }

static ge2_status case_reduce(ctx *c, bool mean)
{
    ge2_tensor *x, *y;
    ge2_shape s = random_shape(c, 1, 4);
    GE2_TRY(operand(c, s, &x));
    int axis = (int)irange(c, -1, s.ndim - 1);
    ge2_graph *g = c->inst->graph;
    if (coin(c))
        GE2_TRY(mean ? ge2_mean_all(g, x, &y) : ge2_sum_all(g, x, &y));
    else
        GE2_TRY(mean ? ge2_mean(g, x, axis, &y) : ge2_sum(g, x, axis, &y));
    return last_node(c);
}

static ge2_status case_sum(ctx *c) { return case_reduce(c, false); }
static ge2_status case_mean(ctx *c) { return case_reduce(c, true); }

static ge2_status case_reshape(ctx *c)
{
    int64_t a = irange(c, 1, 4), b = irange(c, 1, 4), d = irange(c, 1, 3);
    ge2_tensor *x, *y;
    GE2_TRY(operand(c, ge2_shape3(a, b, d), &x));
    ge2_shape to = coin(c) ? ge2_shape2(-1, d) : ge2_shape4(d, 1, b, a);
    GE2_TRY(ge2_reshape(c->inst->graph, x, to, &y));
    return last_node(c);
}

static ge2_status case_transpose(ctx *c)
{
    ge2_tensor *x, *y;
    GE2_TRY(operand(c, random_shape(c, 2, 2), &x));
    GE2_TRY(ge2_transpose(c->inst->graph, x, &y));
    return last_node(c);
}

static ge2_status case_concat(ctx *c)
{
    ge2_shape s = random_shape(c, 1, 3);
    int axis = (int)irange(c, 0, s.ndim - 1), n = (int)irange(c, 1, 3);
    ge2_tensor *xs[3], *y;
    for (int i = 0; i < n; i++) {
        s.dim[axis] = irange(c, 1, 3);
        GE2_TRY(operand(c, s, &xs[i]));
    }
    GE2_TRY(ge2_concat(c->inst->graph, xs, n, axis - (coin(c) ? s.ndim : 0), &y));
    return last_node(c);
}

static void random_window(ctx *c, ge2_shape s, ge2_attrs *a)
{
    memset(a, 0, sizeof *a);
    a->slice.axis = (int)irange(c, 0, s.ndim - 1);
    a->slice.start = irange(c, 0, s.dim[a->slice.axis] - 1);
    a->slice.end = irange(c, a->slice.start + 1, s.dim[a->slice.axis]);
}

static ge2_status case_slice(ctx *c)
{
    ge2_shape s = random_shape(c, 1, 3);
    ge2_tensor *x, *y;
    ge2_attrs a;
    random_window(c, s, &a);
    GE2_TRY(operand(c, s, &x));
    GE2_TRY(ge2_slice(c->inst->graph, x, a.slice.axis, a.slice.start, a.slice.end, &y));
    return last_node(c);
}

static ge2_status case_slice_backward(ctx *c)
{
    ge2_shape s = random_shape(c, 1, 3), w;
    ge2_attrs a;
    random_window(c, s, &a);
    w = s;
    w.dim[a.slice.axis] = a.slice.end - a.slice.start;
    ge2_tensor *ts[2];
    GE2_TRY(operand(c, w, &ts[0]));
    GE2_TRY(plain(c, s, &ts[1]));
    return direct(c, GE2_OP_SLICE_BACKWARD, ts, 2, 1, &a);
}

/* EXPAND (small -> big) and REDUCE_TO (big -> small), with a scale and maybe the mean factor. */
static ge2_status case_broadcast(ctx *c, ge2_op op)
{
    ge2_shape big, small;
    broadcast_shapes(c, &big, &small);
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    a.expand.scale = uniform(c, 0.5, 2);
    a.expand.mean = coin(c);
    ge2_tensor *ts[2];
    GE2_TRY(operand(c, op == GE2_OP_EXPAND ? small : big, &ts[0]));
    GE2_TRY(plain(c, op == GE2_OP_EXPAND ? big : small, &ts[1]));
    return direct(c, op, ts, 2, 1, &a);
}

static ge2_status case_expand(ctx *c) { return case_broadcast(c, GE2_OP_EXPAND); }
static ge2_status case_reduce_to(ctx *c) { return case_broadcast(c, GE2_OP_REDUCE_TO); }

/* logits [B, C] and labels [B] i32 */
static ge2_status logits_labels(ctx *c, bool differentiate, ge2_tensor **logits, ge2_tensor **labels)
{
    int64_t b = irange(c, 1, 5), k = irange(c, 2, 6);
    GE2_TRY(differentiate ? operand(c, ge2_shape2(b, k), logits) : plain(c, ge2_shape2(b, k), logits));
    return feed(c, GE2_ROLE_LABEL, GE2_I32, ge2_shape1(b), k, false, labels);
}

static ge2_status case_cross_entropy(ctx *c)
{
    ge2_tensor *x, *l, *y;
    GE2_TRY(logits_labels(c, true, &x, &l));
    GE2_TRY(ge2_cross_entropy(c->inst->graph, x, l, coin(c) ? 0.0f : 0.1f, &y));
    return last_node(c);
}

static ge2_status case_accuracy(ctx *c)
{
    ge2_tensor *x, *l, *y;
    GE2_TRY(logits_labels(c, false, &x, &l));
    GE2_TRY(ge2_accuracy(c->inst->graph, x, l, &y));
    return last_node(c);
}

static ge2_status case_mse_loss(ctx *c)
{
    ge2_shape s = random_shape(c, 1, 3);
    ge2_tensor *p, *t, *y;
    GE2_TRY(operand(c, s, &p));
    GE2_TRY(operand(c, s, &t));
    GE2_TRY(ge2_mse_loss(c->inst->graph, p, t, &y));
    return last_node(c);
}

static ge2_status case_activation_backward(ctx *c)
{
    ge2_shape s = random_shape(c, 1, 4);
    ge2_attrs a = random_act_backward(c);
    ge2_tensor *ts[2];
    GE2_TRY(plain(c, s, &ts[0]));
    GE2_TRY(plain(c, s, &ts[1]));
    return direct(c, GE2_OP_ACTIVATION_BACKWARD, ts, 2, 1, &a);
}

static ge2_status case_softmax_backward_op(ctx *c, ge2_op op)
{
    ge2_shape s = random_shape(c, 1, 3);
    ge2_tensor *ts[2];
    GE2_TRY(plain(c, s, &ts[0]));
    GE2_TRY(plain(c, s, &ts[1]));
    return direct(c, op, ts, 2, 1, NULL);
}

static ge2_status case_softmax_backward(ctx *c) { return case_softmax_backward_op(c, GE2_OP_SOFTMAX_BACKWARD); }
static ge2_status case_log_softmax_backward(ctx *c) { return case_softmax_backward_op(c, GE2_OP_LOG_SOFTMAX_BACKWARD); }

/* dz [B, out], w [out, in][, saved] -> dx[, db]: every activation, each
 * stash kind (relu's random bit-mask, z, y), with and without db. */
static ge2_status case_linear_grad_input(ctx *c)
{
    int64_t b = irange(c, 1, 4), out = irange(c, 1, 5), in = irange(c, 1, 12);
    ge2_attrs a = random_act_backward(c);
    ge2_tensor *ts[3];
    int n = 2;
    GE2_TRY(plain(c, ge2_shape2(b, out), &ts[0]));
    GE2_TRY(plain(c, ge2_shape2(out, in), &ts[1]));
    if (a.act.act == GE2_ACT_RELU && !a.act.from_output)
        GE2_TRY(feed(c, GE2_ROLE_INPUT, GE2_U8, ge2_shape2(b, (in + 127) / 128 * 16), 0, false, &ts[n++]));
    else if (a.act.act != GE2_ACT_NONE)
        GE2_TRY(plain(c, ge2_shape2(b, in), &ts[n++]));
    return direct(c, GE2_OP_LINEAR_GRAD_INPUT, ts, n, coin(c) ? 2 : 1, &a);
}

/* dz [B, out], x [B, in] -> dw[, db] */
static ge2_status case_linear_grad_weight(ctx *c)
{
    int64_t b = irange(c, 1, 6), out = irange(c, 1, 5), in = irange(c, 1, 5);
    ge2_tensor *ts[2];
    GE2_TRY(plain(c, ge2_shape2(b, out), &ts[0]));
    GE2_TRY(plain(c, ge2_shape2(b, in), &ts[1]));
    return direct(c, GE2_OP_LINEAR_GRAD_WEIGHT, ts, 2, coin(c) ? 2 : 1, NULL);
}

/* ------------------------------------------------------------- the table */

void ge2_op_instance_free(ge2_op_instance *inst)
{
    if (!inst)
        return;
    for (int i = 0; i < inst->n_feeds; i++)
        ge2_free((void *)inst->feeds[i].data);
    ge2_graph_free(inst->graph);
    memset(inst, 0, sizeof *inst);
}

/* Wraps a case body: fresh graph seeded like the data, cleanup on failure. */
#define CASE(fn)                                                                                   \
    static ge2_status build_##fn(uint64_t seed, ge2_dtype dtype, ge2_op_instance *out)            \
    {                                                                                              \
        memset(out, 0, sizeof *out);                                                               \
        GE2_TRY(ge2_graph_new(&out->graph));                                                       \
        ge2_graph_set_seed(out->graph, seed);                                                      \
        ctx c = {out, dtype, ge2_init_key(seed, #fn), 0, 0};                                       \
        ge2_status st = case_##fn(&c);                                                             \
        if (st != GE2_OK)                                                                          \
            ge2_op_instance_free(out);                                                             \
        return st;                                                                                 \
    }

CASE(linear)
CASE(matmul)
CASE(add)
CASE(sub)
CASE(mul)
CASE(scale)
CASE(activation)
CASE(softmax)
CASE(log_softmax)
CASE(sum)
CASE(mean)
CASE(reshape)
CASE(transpose)
CASE(concat)
CASE(slice)
CASE(expand)
CASE(reduce_to)
CASE(cross_entropy)
CASE(mse_loss)
CASE(accuracy)
CASE(activation_backward)
CASE(softmax_backward)
CASE(log_softmax_backward)
CASE(slice_backward)
CASE(linear_grad_input)
CASE(linear_grad_weight)

const ge2_op_case ge2_op_cases[GE2_OP_BUILTIN_COUNT] = {
    [GE2_OP_LINEAR] = {GE2_CASE_GRADIENT, build_linear},
    [GE2_OP_MATMUL] = {GE2_CASE_GRADIENT, build_matmul},
    [GE2_OP_ADD] = {GE2_CASE_GRADIENT, build_add},
    [GE2_OP_SUB] = {GE2_CASE_GRADIENT, build_sub},
    [GE2_OP_MUL] = {GE2_CASE_GRADIENT, build_mul},
    [GE2_OP_SCALE] = {GE2_CASE_GRADIENT, build_scale},
    [GE2_OP_ACTIVATION] = {GE2_CASE_GRADIENT, build_activation},
    [GE2_OP_SOFTMAX] = {GE2_CASE_GRADIENT, build_softmax},
    [GE2_OP_LOG_SOFTMAX] = {GE2_CASE_GRADIENT, build_log_softmax},
    [GE2_OP_SUM] = {GE2_CASE_GRADIENT, build_sum},
    [GE2_OP_MEAN] = {GE2_CASE_GRADIENT, build_mean},
    [GE2_OP_RESHAPE] = {GE2_CASE_GRADIENT, build_reshape},
    [GE2_OP_TRANSPOSE] = {GE2_CASE_GRADIENT, build_transpose},
    [GE2_OP_CONCAT] = {GE2_CASE_GRADIENT, build_concat},
    [GE2_OP_SLICE] = {GE2_CASE_GRADIENT, build_slice},
    [GE2_OP_EXPAND] = {GE2_CASE_GRADIENT, build_expand},
    [GE2_OP_REDUCE_TO] = {GE2_CASE_GRADIENT, build_reduce_to},
    [GE2_OP_CROSS_ENTROPY] = {GE2_CASE_GRADIENT, build_cross_entropy},
    [GE2_OP_MSE_LOSS] = {GE2_CASE_GRADIENT, build_mse_loss},
    [GE2_OP_ACCURACY] = {GE2_CASE_FORWARD, build_accuracy},
    [GE2_OP_ACTIVATION_BACKWARD] = {GE2_CASE_FORWARD, build_activation_backward},
    [GE2_OP_SOFTMAX_BACKWARD] = {GE2_CASE_FORWARD, build_softmax_backward},
    [GE2_OP_LOG_SOFTMAX_BACKWARD] = {GE2_CASE_FORWARD, build_log_softmax_backward},
    [GE2_OP_SLICE_BACKWARD] = {GE2_CASE_GRADIENT, build_slice_backward},
    [GE2_OP_LINEAR_GRAD_INPUT] = {GE2_CASE_FORWARD, build_linear_grad_input},
    [GE2_OP_LINEAR_GRAD_WEIGHT] = {GE2_CASE_FORWARD, build_linear_grad_weight},
    [GE2_OP_GRAD_NORM] = {GE2_CASE_ELSEWHERE, NULL},
    [GE2_OP_OPTIMIZER_UPDATE] = {GE2_CASE_ELSEWHERE, NULL},
};

const ge2_op_case *ge2_op_case_of(ge2_op op)
{
    static const ge2_op_case missing = {GE2_CASE_GRADIENT, NULL};
    return op >= 0 && op < GE2_OP_BUILTIN_COUNT ? &ge2_op_cases[op] : &missing;
}
