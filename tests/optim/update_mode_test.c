/* Per-parameter optimizer updates (ge2_optimizer_config.update_mode) on the
 * CPU backend.
 *
 * The reference is the flat update: the same element math over the same
 * values in one node, so the two modes must agree bit for bit (parameters,
 * optimizer state, step counter, bias corrections) after many steps, on
 * MLPs and on random graphs (shared parameters, diamonds, generic backward).
 * Then: which mode AUTO picks, computed here from the shapes alone and the
 * documented threshold (24 MiB of f32 gradients per update node); that it
 * never picks per-parameter under clipping, accumulation, an observed
 * gradient or a parameter without one, and that forcing it there is refused;
 * how the nodes are grouped; what the program allocates and reports. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture/program_state.h"
#include "ge2/ge2.h"
#include "graph/ir.h"
#include "optim/optimizer_math.h"
#include "tests/planner/random_graph.h"
#include "tests/support/check_main.h"
#include "ops/ops.h"

#define API(call) ck_assert_msg((call) == GE2_OK, "%s: %s", #call, ge2_last_error())

/* The documented AUTO threshold, restated (ge2.h): bytes of f32 gradients per update node. */
#define AUTO_BYTES_PER_NODE ((size_t)24 << 20)

/* ------------------------------------------------------------ the model */

/* An MLP: dims[0] inputs, dims[n_layers] classes; layer `no_bias` (-1: none)
 * has no bias. Relu between layers, mean cross-entropy. */
typedef struct mlp {
    ge2_graph *graph;
    ge2_tensor *x, *y, *loss;
    ge2_tensor *w[4], *b[4];
    int n_layers;
    int64_t batch, in, classes;
} mlp;

static void mlp_build(mlp *m, const int64_t *dims, int n_layers, int64_t batch, int no_bias)
{
    memset(m, 0, sizeof *m);
    m->n_layers = n_layers;
    m->batch = batch;
    m->in = dims[0];
    m->classes = dims[n_layers];
    API(ge2_graph_new(&m->graph));
    API(ge2_graph_set_seed(m->graph, 11));
    API(ge2_input(m->graph, "x", GE2_F32, ge2_shape2(batch, dims[0]), &m->x));
    API(ge2_label(m->graph, "y", GE2_I32, ge2_shape1(batch), &m->y));
    ge2_tensor *h = m->x;
    for (int l = 0; l < n_layers; l++) {
        char wn[16], bn[16];
        snprintf(wn, sizeof wn, "fc%d.weight", l + 1);
        snprintf(bn, sizeof bn, "fc%d.bias", l + 1);
        ge2_init wi = {GE2_INIT_LINEAR_DEFAULT, 0, 0, 0}, bi = {GE2_INIT_LINEAR_DEFAULT, 0, 0, dims[l]};
        API(ge2_parameter(m->graph, wn, GE2_F32, ge2_shape2(dims[l + 1], dims[l]), wi, &m->w[l]));
        if (l != no_bias)
            API(ge2_parameter(m->graph, bn, GE2_F32, ge2_shape1(dims[l + 1]), bi, &m->b[l]));
        API(ge2_linear(m->graph, h, m->w[l], m->b[l], l + 1 < n_layers ? GE2_ACT_RELU : GE2_ACT_NONE, 0, &h));
    }
    API(ge2_cross_entropy(m->graph, h, m->y, 0, &m->loss));
    API(ge2_backward(m->graph, m->loss));
}

static int count_op(const ge2_graph *g, ge2_op op)
{
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        n += g->nodes[i].op == op;
    return n;
}

/* Step s's batch: deterministic, different every step. */
static void make_batch(const mlp *m, int s, float *x, int32_t *y)
{
    for (int64_t r = 0; r < m->batch; r++) {
        for (int64_t i = 0; i < m->in; i++)
            x[r * m->in + i] = (float)__builtin_sin(0.37 * (double)(r * m->in + i) + 1.9 * s);
        y[r] = (int32_t)((r * 7 + s) % m->classes);
    }
}

/* The persistent state a program trains, as host copies: params, then the state slots. */
static float *program_state(ge2_program *p, size_t *count)
{
    ge2_flat_pools pools = ge2_program_pools(p);
    *count = (size_t)(pools.n * (1 + pools.slots));
    float *out = malloc(*count * sizeof(float));
    memcpy(out, pools.params, (size_t)pools.n * sizeof(float)); /* CPU backend: host memory */
    if (pools.slots)
        memcpy(out + pools.n, pools.state, (size_t)(pools.n * pools.slots) * sizeof(float));
    return out;
}

static void expect_same_state(ge2_program *flat, ge2_program *per, const char *what, int step)
{
    size_t nf, np;
    float *a = program_state(flat, &nf), *b = program_state(per, &np);
    ck_assert_uint_eq(nf, np);
    for (size_t i = 0; i < nf; i++)
        ck_assert_msg(memcmp(&a[i], &b[i], sizeof(float)) == 0,
                      "%s step %d: element %zu: flat %.9g, per-parameter %.9g", what, step, i, a[i], b[i]);
    free(a);
    free(b);
    const ge2_control *cf = ge2_program_control_host(flat), *cp = ge2_program_control_host(per);
    API(ge2_program_download_control(flat));
    API(ge2_program_download_control(per));
    ck_assert_int_eq(cf->step, cp->step);
    ck_assert_int_eq(cp->step, step + 1); /* advanced once per step, not once per update node */
    ck_assert_int_eq(cp->updates_done, 0);
    ck_assert_msg(memcmp(&cf->lr, &cp->lr, sizeof cf->lr) == 0 &&
                      memcmp(&cf->bias_correction1, &cp->bias_correction1, sizeof(float)) == 0 &&
                      memcmp(&cf->bias_correction2, &cp->bias_correction2, sizeof(float)) == 0,
                  "%s step %d: lr/bias corrections differ", what, step);
}

/* The same MLP twice, one with the flat update and one per-parameter
 * (cfg's update_mode is set for each), both compiled on the CPU. */
typedef struct twins {
    mlp flat, per;
    ge2_context *ctx;
    ge2_program *pf, *pp;
} twins;

static void twins_build(twins *t, const int64_t *dims, int n_layers, int64_t batch, int no_bias,
                        const ge2_optimizer_config *cfg)
{
    memset(t, 0, sizeof *t);
    mlp_build(&t->flat, dims, n_layers, batch, no_bias);
    mlp_build(&t->per, dims, n_layers, batch, no_bias);
    ge2_optimizer_config c = *cfg;
    c.update_mode = GE2_UPDATE_FLAT;
    API(ge2_optimizer(t->flat.graph, &c));
    c.update_mode = GE2_UPDATE_PER_PARAMETER;
    API(ge2_optimizer(t->per.graph, &c));
}

static void twins_compile(twins *t)
{
    API(ge2_context_new(GE2_DEVICE_CPU, &t->ctx));
    API(ge2_compile(t->ctx, t->flat.graph, NULL, &t->pf));
    API(ge2_compile(t->ctx, t->per.graph, NULL, &t->pp));
}

/* One train step of batch s on both. */
static void twins_step(twins *t, int s)
{
    const mlp *m = &t->flat;
    float *x = malloc(sizeof(float) * (size_t)(m->batch * m->in));
    int32_t *y = malloc(sizeof(int32_t) * (size_t)m->batch);
    make_batch(m, s, x, y);
    ge2_feed ff[2] = {{m->x, x, ge2_shape2(m->batch, m->in)}, {m->y, y, ge2_shape1(m->batch)}};
    ge2_feed fp[2] = {{t->per.x, x, ge2_shape2(m->batch, m->in)}, {t->per.y, y, ge2_shape1(m->batch)}};
    API(ge2_program_step(t->pf, GE2_MODE_TRAIN, ff, 2));
    API(ge2_program_step(t->pp, GE2_MODE_TRAIN, fp, 2));
    free(x);
    free(y);
}

static void twins_free(twins *t)
{
    ge2_program_free(t->pf);
    ge2_program_free(t->pp);
    ge2_context_free(t->ctx);
    ge2_graph_free(t->flat.graph);
    ge2_graph_free(t->per.graph);
}

/* ---------------------------------------------- bitwise the flat update */

typedef struct opt_case {
    const char *name;
    ge2_optimizer_kind kind;
    double lr, momentum, weight_decay;
    bool nesterov, amsgrad, cosine;
} opt_case;

static const opt_case cases[] = {
    {"sgd momentum", GE2_OPT_SGD, 0.05, 0.9, 0, false, false, false},
    {"sgd nesterov weight decay", GE2_OPT_SGD, 0.05, 0.9, 0.01, true, false, true},
    {"adam", GE2_OPT_ADAM, 0.01, 0, 0, false, false, false},
    {"adam amsgrad weight decay", GE2_OPT_ADAM, 0.01, 0, 0.05, false, true, true},
    {"adamw", GE2_OPT_ADAMW, 0.01, 0, 0.1, false, false, false},
    {"adamw amsgrad cosine", GE2_OPT_ADAMW, 0.02, 0, 0.1, false, true, true},
};

static ge2_optimizer_config config_of(const opt_case *k)
{
    ge2_optimizer_config c = ge2_optimizer_defaults(k->kind);
    c.lr = k->lr;
    c.momentum = k->momentum;
    c.weight_decay = k->weight_decay;
    c.nesterov = k->nesterov;
    c.amsgrad = k->amsgrad;
    if (k->cosine)
        c.schedule = (ge2_schedule){GE2_SCHEDULE_COSINE, 0, 0, 2, 10, 0.001};
    return c;
}

START_TEST(per_parameter_matches_flat_bitwise)
{
    const opt_case *k = &cases[_i];
    static const int64_t dims[] = {12, 32, 24, 5};
    enum { B = 8, STEPS = 9 };
    twins t;
    ge2_optimizer_config cfg = config_of(k);
    twins_build(&t, dims, 3, B, 1, &cfg); /* layer 2 without a bias: one pair in its update */
    ck_assert(!t.flat.graph->per_parameter_updates && t.per.graph->per_parameter_updates);
    ck_assert_int_eq(count_op(t.flat.graph, GE2_OP_OPTIMIZER_UPDATE), 1);
    ck_assert_int_eq(count_op(t.per.graph, GE2_OP_OPTIMIZER_UPDATE), 3);
    twins_compile(&t);
    for (int s = 0; s < STEPS; s++) {
        if (s == 4) { /* a new LR between steps reaches every update node */
            API(ge2_set_lr(t.pf, 0.5 * k->lr));
            API(ge2_set_lr(t.pp, 0.5 * k->lr));
        }
        twins_step(&t, s);
        float lf, lp;
        API(ge2_program_read_output(t.pf, GE2_MODE_TRAIN, t.flat.loss, &lf, sizeof lf));
        API(ge2_program_read_output(t.pp, GE2_MODE_TRAIN, t.per.loss, &lp, sizeof lp));
        ck_assert_msg(memcmp(&lf, &lp, sizeof lf) == 0, "%s step %d: loss flat %.9g, per-parameter %.9g", k->name, s,
                      lf, lp);
        expect_same_state(t.pf, t.pp, k->name, s);
    }
    twins_free(&t);
}
END_TEST

/* Random graphs: parameters read by several ops (gradients summed by ADD),
 * matmul weights (generic backward), diamonds. Adam, three steps. */
START_TEST(random_graphs_match_flat_bitwise)
{
    int checked = 0;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        rg_graph rf, rp;
        API(rg_build(seed, true, &rf));
        API(rg_build(seed, true, &rp));
        ge2_optimizer_config c = ge2_optimizer_defaults(GE2_OPT_ADAM);
        c.lr = 0.01;
        c.update_mode = GE2_UPDATE_FLAT;
        API(ge2_optimizer(rf.graph, &c));
        c.update_mode = GE2_UPDATE_PER_PARAMETER;
        API(ge2_optimizer(rp.graph, &c));
        ge2_context *ctx;
        ge2_program *pf, *pp;
        API(ge2_context_new(GE2_DEVICE_CPU, &ctx));
        API(ge2_compile(ctx, rf.graph, NULL, &pf));
        API(ge2_compile(ctx, rp.graph, NULL, &pp));
        int64_t b = rf.batch;
        float *x = malloc(sizeof(float) * (size_t)(b * rg_x_row(&rf)));
        void *label = malloc(4 * (size_t)(b * (rg_label_row(&rf) ? rg_label_row(&rf) : 1)));
        uint64_t rng = seed;
        for (int s = 0; s < 3; s++) {
            ge2_feed feeds[2];
            int n = rg_feeds(&rf, b, &rng, x, label, feeds);
            API(ge2_program_step(pf, GE2_MODE_TRAIN, feeds, n));
            feeds[0].tensor = rp.x;
            if (n > 1)
                feeds[1].tensor = rp.label;
            API(ge2_program_step(pp, GE2_MODE_TRAIN, feeds, n));
            char what[48];
            snprintf(what, sizeof what, "random graph %llu", (unsigned long long)seed);
            expect_same_state(pf, pp, what, s);
        }
        checked += count_op(rp.graph, GE2_OP_OPTIMIZER_UPDATE) > 1;
        free(x);
        free(label);
        ge2_program_free(pf);
        ge2_program_free(pp);
        ge2_context_free(ctx);
        rg_free(&rf);
        rg_free(&rp);
    }
    ck_assert_int_gt(checked, 20); /* most graphs have several update nodes */
}
END_TEST

/* ------------------------------------------------------ what AUTO picks */

/* Bytes of f32 gradients of the MLP, from its dims (weights and biases). */
static size_t mlp_gradient_bytes(const int64_t *dims, int n_layers)
{
    size_t n = 0;
    for (int l = 0; l < n_layers; l++)
        n += (size_t)(dims[l] * dims[l + 1] + dims[l + 1]);
    return n * sizeof(float);
}

/* AUTO on an MLP; true when it chose per-parameter (then one node per layer). */
static bool auto_picks_per_parameter(const int64_t *dims, int n_layers, const ge2_optimizer_config *cfg)
{
    mlp m;
    mlp_build(&m, dims, n_layers, 4, -1);
    API(ge2_optimizer(m.graph, cfg));
    bool per = m.graph->per_parameter_updates;
    ck_assert_int_eq(count_op(m.graph, GE2_OP_OPTIMIZER_UPDATE), per ? n_layers : 1);
    ck_assert_int_eq(count_op(m.graph, GE2_OP_GRAD_NORM), cfg->clip_norm > 0 ? 1 : 0);
    ge2_graph_free(m.graph);
    return per;
}

START_TEST(auto_picks_per_parameter_for_large_gradients_only)
{
    ge2_optimizer_config adam = ge2_optimizer_defaults(GE2_OPT_ADAM);
    static const int64_t small[] = {784, 256, 128, 10}, medium[] = {784, 1024, 1024, 10},
                         large[] = {784, 4096, 4096, 4096, 10};
    /* the bench's three MLPs: 0.3, 2.4 and 35 MiB per layer */
    ck_assert(mlp_gradient_bytes(small, 3) / 3 < AUTO_BYTES_PER_NODE);
    ck_assert(mlp_gradient_bytes(medium, 3) / 3 < AUTO_BYTES_PER_NODE);
    ck_assert(mlp_gradient_bytes(large, 4) / 4 >= AUTO_BYTES_PER_NODE);
    ck_assert(!auto_picks_per_parameter(small, 3, &adam));
    ck_assert(!auto_picks_per_parameter(medium, 3, &adam));
    ck_assert(auto_picks_per_parameter(large, 4, &adam));
    /* at the threshold: one layer of 6144 x 1024 + 1024 is 24 MiB + 4 KiB; 6140 inputs are below */
    static const int64_t above[] = {6144, 1024}, below[] = {6140, 1024};
    ck_assert(mlp_gradient_bytes(above, 1) >= AUTO_BYTES_PER_NODE);
    ck_assert(mlp_gradient_bytes(below, 1) < AUTO_BYTES_PER_NODE);
    ck_assert(auto_picks_per_parameter(above, 1, &adam));
    ck_assert(!auto_picks_per_parameter(below, 1, &adam));
    /* FLAT keeps one update whatever the size */
    ge2_optimizer_config flat = adam;
    flat.update_mode = GE2_UPDATE_FLAT;
    ck_assert(!auto_picks_per_parameter(large, 4, &flat));
    /* data parallel: AUTO picks per-parameter updates there too, each
     * after an all-reduce of its layer's gradients (they run at the
     * backward's end, so the last layers' updates overlap the first
     * layers' sums); with FLAT a bucket closes at the gradient that brings
     * it to 25 MiB, layers last first: {fc4.w, fc4.b, fc3.w (64 MiB)},
     * {fc3.b, fc2.w (64 MiB)}, {fc2.b, fc1.w (12 MiB), fc1.b} */
    ge2_optimizer_config dp = adam;
    dp.data_parallel = true;
    ck_assert(auto_picks_per_parameter(large, 4, &dp));
    ck_assert(!auto_picks_per_parameter(medium, 3, &dp));
    mlp m;
    dp.update_mode = GE2_UPDATE_FLAT;
    mlp_build(&m, large, 4, 4, -1);
    API(ge2_optimizer(m.graph, &dp));
    ck_assert_int_eq(count_op(m.graph, GE2_OP_ALL_REDUCE), 3);
    ge2_graph_free(m.graph);
    /* per-parameter: one all-reduce per update node */
    dp.update_mode = GE2_UPDATE_PER_PARAMETER;
    mlp_build(&m, large, 4, 4, -1);
    API(ge2_optimizer(m.graph, &dp));
    ck_assert_int_eq(count_op(m.graph, GE2_OP_ALL_REDUCE), 4);
    ck_assert_int_eq(count_op(m.graph, GE2_OP_OPTIMIZER_UPDATE), 4);
    ge2_graph_free(m.graph);
}
END_TEST

/* Not with clipping, accumulation, a gradient read after the step, or a
 * parameter without a gradient: AUTO falls back to FLAT, a forced
 * PER_PARAMETER is refused with the reason and leaves the graph as it was. */
START_TEST(never_where_it_cannot_run)
{
    static const int64_t large[] = {784, 4096, 4096, 4096, 10};
    for (int why = 0; why < 4; why++) {
        static const char *const needles[] = {"clip_norm", "accumulation_steps", "marked output", "has no gradient"};
        for (int forced = 0; forced < 2; forced++) {
            mlp m;
            mlp_build(&m, large, 4, 4, -1);
            ge2_optimizer_config c = ge2_optimizer_defaults(GE2_OPT_ADAMW);
            c.update_mode = forced ? GE2_UPDATE_PER_PARAMETER : GE2_UPDATE_AUTO;
            if (why == 0)
                c.clip_norm = 1.0;
            if (why == 1)
                c.accumulation_steps = 2;
            if (why == 2)
                API(ge2_mark_output(m.graph, ge2_grad(m.w[1])));
            if (why == 3) { /* a parameter the loss does not depend on: built after the backward */
                ge2_tensor *unused;
                API(ge2_parameter(m.graph, "unused", GE2_F32, ge2_shape1(4), (ge2_init){GE2_INIT_ZEROS, 0, 0, 0},
                                  &unused));
            }
            int n_nodes = m.graph->n_nodes;
            if (!forced) {
                API(ge2_optimizer(m.graph, &c));
                ck_assert_msg(!m.graph->per_parameter_updates, "case %s: AUTO chose per-parameter", needles[why]);
                ck_assert_int_eq(count_op(m.graph, GE2_OP_OPTIMIZER_UPDATE), 1);
            } else {
                ck_assert_int_eq(ge2_optimizer(m.graph, &c), GE2_ERR_INVALID_ARGUMENT);
                ck_assert_msg(strstr(ge2_last_error(), needles[why]) && strstr(ge2_last_error(), "per_parameter"),
                              "message: %s", ge2_last_error());
                ck_assert_int_eq(m.graph->n_nodes, n_nodes);
                ck_assert(!m.graph->has_optimizer && !m.graph->per_parameter_updates);
            }
            ge2_graph_free(m.graph);
        }
    }
    mlp m;
    mlp_build(&m, large, 4, 4, -1);
    ge2_optimizer_config c = ge2_optimizer_defaults(GE2_OPT_ADAM);
    c.update_mode = (ge2_update_mode)7;
    ck_assert_int_eq(ge2_optimizer(m.graph, &c), GE2_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(ge2_last_error(), "update_mode is unknown: 7"), "%s", ge2_last_error());
    ge2_graph_free(m.graph);
    ck_assert_str_eq(ge2_update_mode_name(GE2_UPDATE_PER_PARAMETER), "per_parameter");
    ck_assert_str_eq(ge2_update_mode_name(GE2_UPDATE_AUTO), "auto");
    ck_assert_str_eq(ge2_update_mode_name(GE2_UPDATE_FLAT), "flat");
}
END_TEST

/* One node per node that makes parameter gradients: (weight, its gradient,
 * bias, its gradient), each counting the step's nodes. */
START_TEST(one_node_per_layer)
{
    static const int64_t dims[] = {12, 32, 24, 5};
    mlp m;
    mlp_build(&m, dims, 3, 8, 1);
    ge2_optimizer_config c = ge2_optimizer_defaults(GE2_OPT_SGD);
    c.update_mode = GE2_UPDATE_PER_PARAMETER;
    API(ge2_optimizer(m.graph, &c));
    int seen = 0;
    for (int n = 0; n < m.graph->n_nodes; n++) {
        const ge2_node *node = &m.graph->nodes[n];
        if (node->op != GE2_OP_OPTIMIZER_UPDATE)
            continue;
        ck_assert_int_eq(node->phase, GE2_PHASE_OPTIMIZER);
        ck_assert_int_eq(GE2_ATTRS(ge2_optim_attrs, node->attrs)->update_nodes, 3);
        ck_assert_int_eq(node->n_outputs, 0);
        /* created in backward order: the last layer first */
        int l = 2 - seen++;
        ck_assert_int_eq(node->n_inputs, l == 1 ? 2 : 4);
        ck_assert_int_eq(node->inputs[0], m.w[l]->id);
        ck_assert_int_eq(node->inputs[1], ge2_grad(m.w[l])->id);
        if (l != 1) {
            ck_assert_int_eq(node->inputs[2], m.b[l]->id);
            ck_assert_int_eq(node->inputs[3], ge2_grad(m.b[l])->id);
        }
    }
    ck_assert_int_eq(seen, 3);
    ge2_graph_free(m.graph);
}
END_TEST

/* x · (w ⊙ w): the parameter's first reader reads it twice; its update
 * takes it once, and trains as the flat update does. */
static ge2_graph *squared_weight_graph(ge2_tensor **x, ge2_tensor **y)
{
    ge2_graph *g;
    ge2_tensor *w, *ww, *logits, *loss;
    API(ge2_graph_new(&g));
    API(ge2_graph_set_seed(g, 5));
    API(ge2_input(g, "x", GE2_F32, ge2_shape2(4, 3), x));
    API(ge2_label(g, "y", GE2_I32, ge2_shape1(4), y));
    API(ge2_parameter(g, "w", GE2_F32, ge2_shape2(3, 3), (ge2_init){GE2_INIT_UNIFORM, -1, 1, 0}, &w));
    API(ge2_mul(g, w, w, &ww));
    API(ge2_matmul(g, *x, ww, false, false, &logits));
    API(ge2_cross_entropy(g, logits, *y, 0.0f, &loss));
    API(ge2_backward(g, loss));
    return g;
}

/* Adam over gf (flat) and gp (per-parameter: `nodes` update nodes taking
 * `params` (parameter, gradient) pairs in all, each parameter once) for
 * three steps on the same feeds (data[i] for the graphs' tensors named
 * names[i]): the same state after each. Frees both graphs. */
static void flat_and_per_parameter_agree(ge2_graph *gf, ge2_graph *gp, int nodes, int params, const char *what,
                                         const char *const *names, const void *const *data, const ge2_shape *shapes,
                                         int n_feeds)
{
    ge2_optimizer_config c = ge2_optimizer_defaults(GE2_OPT_ADAM);
    c.update_mode = GE2_UPDATE_FLAT;
    API(ge2_optimizer(gf, &c));
    c.update_mode = GE2_UPDATE_PER_PARAMETER;
    API(ge2_optimizer(gp, &c));
    ck_assert_int_eq(count_op(gp, GE2_OP_OPTIMIZER_UPDATE), nodes);
    int pairs = 0;
    for (int n = 0; n < gp->n_nodes; n++)
        pairs += gp->nodes[n].op == GE2_OP_OPTIMIZER_UPDATE ? gp->nodes[n].n_inputs / 2 : 0;
    ck_assert_int_eq(pairs, params);
    ge2_context *ctx;
    ge2_program *pf, *pp;
    API(ge2_context_new(GE2_DEVICE_CPU, &ctx));
    API(ge2_compile(ctx, gf, NULL, &pf));
    API(ge2_compile(ctx, gp, NULL, &pp));
    ge2_feed ff[4], fp[4];
    ck_assert_int_le(n_feeds, 4);
    for (int i = 0; i < n_feeds; i++) {
        ff[i] = (ge2_feed){ge2_graph_find(gf, names[i]), data[i], shapes[i]};
        fp[i] = (ge2_feed){ge2_graph_find(gp, names[i]), data[i], shapes[i]};
    }
    for (int s = 0; s < 3; s++) {
        API(ge2_program_step(pf, GE2_MODE_TRAIN, ff, n_feeds));
        API(ge2_program_step(pp, GE2_MODE_TRAIN, fp, n_feeds));
        expect_same_state(pf, pp, what, s);
    }
    ge2_program_free(pf);
    ge2_program_free(pp);
    ge2_context_free(ctx);
    ge2_graph_free(gf);
    ge2_graph_free(gp);
}

START_TEST(a_parameter_read_twice_by_its_layer_is_updated_once)
{
    ge2_tensor *xf, *yf, *xp, *yp;
    ge2_graph *gf = squared_weight_graph(&xf, &yf), *gp = squared_weight_graph(&xp, &yp);
    float x[12];
    int32_t y[4] = {0, 1, 2, 1};
    for (int i = 0; i < 12; i++)
        x[i] = (float)(i % 5) * 0.3f - 0.5f;
    static const char *const names[2] = {"x", "y"};
    const void *data[2] = {x, y};
    const ge2_shape shapes[2] = {ge2_shape2(4, 3), ge2_shape1(4)};
    flat_and_per_parameter_agree(gf, gp, 1, 1, "x (w w)", names, data, shapes, 2); /* (w, grad w) once */
}
END_TEST

/* attention(q, k, v) with q, k and v parameters: one layer of three
 * parameters, more than one update node takes, so two nodes (two pairs and
 * one); per-parameter trains as the flat update does. */
static ge2_graph *three_parameter_graph(ge2_tensor **y)
{
    ge2_graph *g;
    ge2_tensor *p[3], *a, *target, *loss;
    static const char *const names[3] = {"q", "k", "v"};
    API(ge2_graph_new(&g));
    API(ge2_graph_set_seed(g, 4));
    API(ge2_label(g, "target", GE2_F32, ge2_shape3(2, 3, 4), &target));
    for (int i = 0; i < 3; i++)
        API(ge2_parameter(g, names[i], GE2_F32, ge2_shape3(2, 3, 4), (ge2_init){GE2_INIT_UNIFORM, -1, 1, 0}, &p[i]));
    API(ge2_attention(g, p[0], p[1], p[2], true, &a));
    API(ge2_mse_loss(g, a, target, &loss));
    API(ge2_backward(g, loss));
    *y = target;
    return g;
}

START_TEST(a_layer_with_more_parameters_than_one_node_takes_gets_two)
{
    ge2_tensor *tf, *tp;
    ge2_graph *gf = three_parameter_graph(&tf), *gp = three_parameter_graph(&tp);
    float t[24];
    for (int i = 0; i < 24; i++)
        t[i] = (float)(i % 7) * 0.2f - 0.6f;
    static const char *const names[1] = {"target"};
    const void *data[1] = {t};
    const ge2_shape shapes[1] = {ge2_shape3(2, 3, 4)};
    flat_and_per_parameter_agree(gf, gp, 2, 3, "attention(q, k, v)", names, data, shapes, 1);
}
END_TEST

/* -------------------------------------------- the program and its reports */

static char *text_of(ge2_status (*report)(ge2_program *, FILE *), ge2_program *p)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    API(report(p, f));
    fclose(f);
    return text;
}

static ge2_status train_kernel_report(ge2_program *p, FILE *f)
{
    return ge2_program_kernel_report(p, GE2_MODE_TRAIN, f);
}

START_TEST(program_allocates_and_reports_the_mode)
{
    static const int64_t dims[] = {12, 32, 24, 5};
    twins t;
    ge2_optimizer_config adam = ge2_optimizer_defaults(GE2_OPT_ADAM);
    twins_build(&t, dims, 3, 8, -1, &adam);
    /* after ge2_optimizer: this gradient goes to the IO buffer and stays readable */
    API(ge2_mark_output(t.per.graph, ge2_grad(t.per.b[0])));
    twins_compile(&t);

    /* Parameters by hand: each padded to 64 floats. */
    size_t padded = 0;
    for (int l = 0; l < 3; l++)
        padded += ((size_t)(dims[l] * dims[l + 1] + 63) / 64 * 64 + (size_t)(dims[l + 1] + 63) / 64 * 64) * 4;
    ge2_plan_stats sf, sp;
    API(ge2_program_plan_stats(t.pf, GE2_MODE_TRAIN, &sf));
    API(ge2_program_plan_stats(t.pp, GE2_MODE_TRAIN, &sp));
    ck_assert_uint_eq(sf.parameter_bytes, padded);
    ck_assert_uint_eq(sf.gradient_bytes, padded);
    ck_assert_int_eq(sf.update_mode, GE2_UPDATE_FLAT);
    ck_assert_int_eq(sf.update_nodes, 1);
    ck_assert_uint_eq(sp.parameter_bytes, padded);
    ck_assert_uint_eq(sp.gradient_bytes, 0);
    ck_assert_uint_eq(sp.optimizer_state_bytes, 2 * padded);
    ck_assert_int_eq(sp.update_mode, GE2_UPDATE_PER_PARAMETER);
    ck_assert_int_eq(sp.update_nodes, 3);
    ck_assert_ptr_null(ge2_program_pools(t.pp).grads);
    ck_assert_int_eq(sp.n_nodes, sf.n_nodes + 2);

    char *plan = text_of(ge2_program_plan_report, t.pp);
    ck_assert_msg(strstr(plan, " grads=0 ") && strstr(plan, "optimizer: per_parameter (3 update nodes"), "%s", plan);
    free(plan);
    plan = text_of(ge2_program_plan_report, t.pf);
    ck_assert_msg(strstr(plan, "optimizer: flat"), "%s", plan);
    free(plan);

    twins_step(&t, 0);
    ck_assert_int_eq(ge2_program_launch_count(t.pp, GE2_MODE_TRAIN),
                     ge2_program_launch_count(t.pf, GE2_MODE_TRAIN) + 2);
    char *kernels = text_of(train_kernel_report, t.pp);
    ck_assert_msg(strstr(kernels, "\noptimizer: per_parameter (3 update nodes, gradients in the arena)\n"), "%s",
                  kernels);
    /* layer 3's update: w3 [5,24] and its gradient, b3 [5] and its gradient */
    ck_assert_msg(strstr(kernels, " optimizer_update     [5,24] [5,24] [5] [5] ->: cpu optimizer_update\n"), "%s",
                  kernels);
    free(kernels);

    /* the marked gradient equals the flat program's gradient pool, bitwise */
    float got[32], *want = ge2_program_pools(t.pf).grads + ge2_program_layout(t.pf)->offset[t.flat.b[0]->id] / sizeof(float);
    API(ge2_program_read_output(t.pp, GE2_MODE_TRAIN, ge2_grad(t.per.b[0]), got, sizeof got));
    ck_assert_mem_eq(got, want, sizeof got);
    /* an unmarked one is gone after its update */
    float w1[32 * 12];
    ck_assert_int_eq(ge2_program_read_output(t.pp, GE2_MODE_TRAIN, ge2_grad(t.per.w[0]), w1, sizeof w1),
                     GE2_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(ge2_last_error(), "grad/fc1.weight") && strstr(ge2_last_error(), "per-parameter update"),
                  "%s", ge2_last_error());
    twins_free(&t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("update_mode");
    TCase *tc = tcase_create("update_mode");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, per_parameter_matches_flat_bitwise, 0, (int)(sizeof cases / sizeof cases[0]));
    tcase_add_test(tc, random_graphs_match_flat_bitwise);
    tcase_add_test(tc, auto_picks_per_parameter_for_large_gradients_only);
    tcase_add_test(tc, never_where_it_cannot_run);
    tcase_add_test(tc, one_node_per_layer);
    tcase_add_test(tc, a_parameter_read_twice_by_its_layer_is_updated_once);
    tcase_add_test(tc, a_layer_with_more_parameters_than_one_node_takes_gets_two);
    tcase_add_test(tc, program_allocates_and_reports_the_mode);
    suite_add_tcase(s, tc);
    return ge2_check_run(s);
}
