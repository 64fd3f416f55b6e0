#include "tests/planner/random_graph.h"

#include <stdio.h>

#include "graph/error.h"
#include "graph/rng.h"

#define RG_MAX_VALUES 96

typedef struct value {
    ge2_tensor *t; /* [B, d] */
    int64_t d;
    int uses;
} value;

typedef struct builder {
    rg_graph *g;
    uint64_t *rng;
    value vals[RG_MAX_VALUES];
    int n;
    int n_params;
} builder;

uint64_t rg_next(uint64_t *state) { return ge2_splitmix64_next(state); }

int64_t rg_below(uint64_t *state, int64_t n) { return (int64_t)(rg_next(state) % (uint64_t)n); }

float rg_uniform(uint64_t *state) { return (float)((double)(rg_next(state) >> 11) * 0x1.0p-53 * 2.0 - 1.0); }

static const int64_t widths[] = {8, 16, 24, 40};
static const ge2_activation acts[] = {GE2_ACT_NONE,    GE2_ACT_RELU, GE2_ACT_TANH,      GE2_ACT_SIGMOID,
                                      GE2_ACT_GELU_TANH, GE2_ACT_SILU, GE2_ACT_LEAKY_RELU};
#define N_ACTS ((int)(sizeof acts / sizeof acts[0]))

static ge2_status push(builder *b, ge2_tensor *t, int64_t d)
{
    if (b->n == RG_MAX_VALUES)
        return GE2_ERR_INVALID_ARGUMENT;
    b->vals[b->n++] = (value){t, d, 0};
    return GE2_OK;
}

/* Mostly the newest value (chains), sometimes any (diamonds, many consumers). */
static int pick_src(builder *b) { return rg_below(b->rng, 10) < 6 ? b->n - 1 : (int)rg_below(b->rng, b->n); }

/* Another value of width d, possibly i itself (x * x). */
static int pick_same_width(builder *b, int i)
{
    int candidates[RG_MAX_VALUES], n = 0;
    for (int j = 0; j < b->n; j++)
        if (b->vals[j].d == b->vals[i].d)
            candidates[n++] = j;
    return candidates[rg_below(b->rng, n)];
}

static ge2_status param(builder *b, ge2_shape shape, int64_t fan_in, ge2_tensor **out)
{
    char name[32];
    snprintf(name, sizeof name, "p%d", b->n_params++);
    ge2_init init = {GE2_INIT_LINEAR_DEFAULT, 0, 0, fan_in};
    return ge2_parameter(b->g->graph, name, GE2_F32, shape, init, out);
}

static ge2_status op_linear(builder *b, int s)
{
    int64_t in = b->vals[s].d, out = widths[rg_below(b->rng, 4)];
    ge2_tensor *w, *bias = NULL, *y;
    GE2_TRY(param(b, ge2_shape2(out, in), 0, &w));
    if (rg_below(b->rng, 4) != 0)
        GE2_TRY(param(b, ge2_shape1(out), in, &bias));
    GE2_TRY(ge2_linear(b->g->graph, b->vals[s].t, w, bias, acts[rg_below(b->rng, N_ACTS)], 0.1f, &y));
    b->vals[s].uses++;
    return push(b, y, out);
}

static ge2_status op_matmul(builder *b, int s)
{
    int64_t in = b->vals[s].d, out = widths[rg_below(b->rng, 4)];
    bool trans = rg_below(b->rng, 2);
    ge2_tensor *w, *y;
    GE2_TRY(param(b, trans ? ge2_shape2(out, in) : ge2_shape2(in, out), in, &w));
    GE2_TRY(ge2_matmul(b->g->graph, b->vals[s].t, w, false, trans, &y));
    b->vals[s].uses++;
    return push(b, y, out);
}

static ge2_status op_binary(builder *b, int s)
{
    ge2_graph *g = b->g->graph;
    ge2_tensor *other;
    int o = -1;
    if (rg_below(b->rng, 10) < 3) {
        GE2_TRY(param(b, ge2_shape1(b->vals[s].d), b->vals[s].d, &other)); /* broadcast over the batch */
    } else {
        o = pick_same_width(b, s);
        other = b->vals[o].t;
    }
    ge2_tensor *y;
    switch (rg_below(b->rng, 3)) {
    case 0: GE2_TRY(ge2_add(g, b->vals[s].t, other, &y)); break;
    case 1: GE2_TRY(ge2_sub(g, b->vals[s].t, other, &y)); break;
    default: GE2_TRY(ge2_mul(g, b->vals[s].t, other, &y)); break;
    }
    b->vals[s].uses++;
    if (o >= 0)
        b->vals[o].uses++;
    return push(b, y, b->vals[s].d);
}

static ge2_status op_unary(builder *b, int s)
{
    ge2_graph *g = b->g->graph;
    ge2_tensor *y;
    switch (rg_below(b->rng, 4)) {
    case 0: GE2_TRY(ge2_scale(g, b->vals[s].t, 0.5 + rg_uniform(b->rng), &y)); break;
    case 1: GE2_TRY(ge2_activate(g, b->vals[s].t, acts[1 + rg_below(b->rng, N_ACTS - 1)], 0.1f, &y)); break;
    case 2: GE2_TRY(ge2_softmax(g, b->vals[s].t, &y)); break;
    default: GE2_TRY(ge2_log_softmax(g, b->vals[s].t, &y)); break;
    }
    b->vals[s].uses++;
    return push(b, y, b->vals[s].d);
}

/* A view and back: [B, d] -> [B, 1, d] -> [B, d] (reshapes, which the
 * planner may place on their input's memory) */
static ge2_status op_reshape(builder *b, int s)
{
    ge2_graph *g = b->g->graph;
    ge2_tensor *v, *y;
    GE2_TRY(ge2_reshape(g, b->vals[s].t, ge2_shape3(-1, 1, b->vals[s].d), &v));
    GE2_TRY(ge2_reshape(g, v, ge2_shape2(-1, b->vals[s].d), &y));
    b->vals[s].uses++;
    return push(b, y, b->vals[s].d);
}

/* The head value feeds the loss; every other unread value adds its mean. */
static ge2_status close_with_loss(builder *b)
{
    rg_graph *rg = b->g;
    ge2_graph *g = rg->graph;
    value *head = &b->vals[b->n - 1];
    ge2_tensor *loss;
    rg->loss_kind = (rg_loss_kind)rg_below(b->rng, RG_LOSS_KIND_COUNT);
    switch (rg->loss_kind) {
    case RG_LOSS_MEAN:
        GE2_TRY(ge2_mean_all(g, head->t, &loss));
        break;
    case RG_LOSS_MSE:
        GE2_TRY(ge2_label(g, "label", GE2_F32, ge2_shape2(rg->batch, head->d), &rg->label));
        GE2_TRY(ge2_mse_loss(g, head->t, rg->label, &loss));
        break;
    default: {
        ge2_tensor *w, *logits;
        rg->classes = 2 + rg_below(b->rng, 9);
        GE2_TRY(param(b, ge2_shape2(rg->classes, head->d), 0, &w));
        GE2_TRY(ge2_linear(g, head->t, w, NULL, GE2_ACT_NONE, 0, &logits));
        GE2_TRY(ge2_label(g, "label", GE2_I32, ge2_shape1(rg->batch), &rg->label));
        GE2_TRY(ge2_cross_entropy(g, logits, rg->label, 0.0f, &loss));
        break;
    }
    }
    head->uses++;
    for (int i = 1; i < b->n; i++) {
        if (b->vals[i].uses > 0)
            continue;
        ge2_tensor *m;
        GE2_TRY(ge2_mean_all(g, b->vals[i].t, &m));
        GE2_TRY(ge2_add(g, loss, m, &loss));
    }
    rg->loss = loss;
    return GE2_OK;
}

ge2_status rg_build(uint64_t seed, bool with_backward, rg_graph *out)
{
    uint64_t rng = seed * 0x2545f4914f6cdd1dull + 1;
    *out = (rg_graph){0};
    builder b = {.g = out, .rng = &rng};
    GE2_TRY(ge2_graph_new(&out->graph));
    GE2_TRY(ge2_graph_set_seed(out->graph, seed));
    out->batch = 2 + rg_below(&rng, 15);
    int64_t d0 = widths[rg_below(&rng, 4)];
    GE2_TRY(ge2_input(out->graph, "x", GE2_F32, ge2_shape2(out->batch, d0), &out->x));
    GE2_TRY(push(&b, out->x, d0));
    GE2_TRY(op_linear(&b, 0)); /* at least one parameter to train */
    out->n_ops = 3 + (int)rg_below(&rng, 22);
    for (int i = 0; i < out->n_ops; i++) {
        int s = pick_src(&b);
        switch (rg_below(&rng, 11)) {
        case 0: case 1: GE2_TRY(op_linear(&b, s)); break;
        case 2: GE2_TRY(op_matmul(&b, s)); break;
        case 3: case 4: case 5: GE2_TRY(op_binary(&b, s)); break;
        case 10: GE2_TRY(op_reshape(&b, s)); break;
        default: GE2_TRY(op_unary(&b, s)); break;
        }
    }
    GE2_TRY(close_with_loss(&b));
    if (with_backward) {
        if (rg_below(&rng, 3) == 0)
            GE2_TRY(ge2_require_grad(out->graph, out->x));
        GE2_TRY(ge2_backward(out->graph, out->loss));
    }
    return GE2_OK;
}

void rg_free(rg_graph *g)
{
    ge2_graph_free(g->graph);
    g->graph = NULL;
}

int64_t rg_x_row(const rg_graph *g) { return ge2_tensor_shape(g->x).dim[1]; }

int64_t rg_label_row(const rg_graph *g)
{
    if (!g->label)
        return 0;
    return g->loss_kind == RG_LOSS_MSE ? ge2_tensor_shape(g->label).dim[1] : 1;
}

int rg_feeds(const rg_graph *g, int64_t b, uint64_t *state, float *x_buf, void *label_buf, ge2_feed *feeds)
{
    int64_t row = rg_x_row(g);
    for (int64_t i = 0; i < b * row; i++)
        x_buf[i] = rg_uniform(state);
    feeds[0] = (ge2_feed){g->x, x_buf, ge2_shape2(b, row)};
    if (!g->label)
        return 1;
    if (g->loss_kind == RG_LOSS_MSE) {
        int64_t lrow = rg_label_row(g);
        float *t = label_buf;
        for (int64_t i = 0; i < b * lrow; i++)
            t[i] = rg_uniform(state);
        feeds[1] = (ge2_feed){g->label, label_buf, ge2_shape2(b, lrow)};
    } else {
        int32_t *c = label_buf;
        for (int64_t i = 0; i < b; i++)
            c[i] = (int32_t)rg_below(state, g->classes);
        feeds[1] = (ge2_feed){g->label, label_buf, ge2_shape1(b)};
    }
    return 2;
}
