/* Optimizers end to end on the CPU backend against an independent float64
 * re-implementation of torch.optim's single-tensor algorithms (written here
 * as plain loops, not through optim/optimizer_math.h).
 *
 * Model: pred = x · Wᵀ + b, loss = mean((pred - t)^2). Its gradient is
 * derived by hand: dW = 2/(B·O) · rᵀx, db = 2/(B·O) · Σ_rows r, r = pred - t.
 * The reference keeps its own float64 parameters and state, so program and
 * reference only share the initial values and the data. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "capture/program_state.h"
#include "ge2/ge2.h"
#include "optim/optimizer_math.h"
#include "optim/optim.h"
#include "tests/data/testutil.h"
#include "ops/ops.h"

#define API(call) ck_assert_msg((call) == GE2_OK, "%s: %s", #call, ge2_last_error())

enum { IN = 5, OUT = 3, MAXB = 16, NP = OUT * IN + OUT };

/* ------------------------------------------------------------ the model */

typedef struct model {
    ge2_context *ctx;
    ge2_graph *graph;
    ge2_program *program;
    ge2_tensor *x, *t, *w, *b, *loss;
    int batch;
} model;

static void model_open(model *m, int batch, const ge2_optimizer_config *cfg, const double *p0)
{
    memset(m, 0, sizeof *m);
    m->batch = batch;
    ge2_init zeros = {GE2_INIT_ZEROS, 0, 0, 0};
    ge2_tensor *pred;
    API(ge2_context_new(GE2_DEVICE_CPU, &m->ctx));
    API(ge2_graph_new(&m->graph));
    API(ge2_input(m->graph, "x", GE2_F32, ge2_shape2(batch, IN), &m->x));
    API(ge2_label(m->graph, "t", GE2_F32, ge2_shape2(batch, OUT), &m->t));
    API(ge2_parameter(m->graph, "w", GE2_F32, ge2_shape2(OUT, IN), zeros, &m->w));
    API(ge2_parameter(m->graph, "b", GE2_F32, ge2_shape1(OUT), zeros, &m->b));
    API(ge2_linear(m->graph, m->x, m->w, m->b, GE2_ACT_NONE, 0.0f, &pred));
    API(ge2_mse_loss(m->graph, pred, m->t, &m->loss));
    API(ge2_backward(m->graph, m->loss));
    API(ge2_optimizer(m->graph, cfg));
    ge2_compile_options opt = ge2_compile_defaults();
    API(ge2_compile(m->ctx, m->graph, &opt, &m->program));
    float w[OUT * IN], b[OUT];
    for (int i = 0; i < OUT * IN; i++)
        w[i] = (float)p0[i];
    for (int i = 0; i < OUT; i++)
        b[i] = (float)p0[OUT * IN + i];
    API(ge2_program_set_parameter(m->program, m->w, w, sizeof w));
    API(ge2_program_set_parameter(m->program, m->b, b, sizeof b));
}

static void model_close(model *m)
{
    ge2_program_free(m->program);
    ge2_graph_free(m->graph);
    ge2_context_free(m->ctx);
}

/* Data of step s, rows [0, batch): deterministic, and different every step. */
static void make_batch(int s, int row0, int batch, float *x, float *t)
{
    for (int r = 0; r < batch; r++) {
        for (int i = 0; i < IN; i++)
            x[r * IN + i] = (float)sin(0.7 * (r + row0) + 1.3 * i + 0.37 * s);
        for (int o = 0; o < OUT; o++)
            t[r * OUT + o] = (float)cos(0.5 * (r + row0) - 0.9 * o + 0.11 * s);
    }
}

static void model_step(model *m, const float *x, const float *t, int batch)
{
    ge2_feed feeds[2] = {{m->x, x, ge2_shape2(batch, IN)}, {m->t, t, ge2_shape2(batch, OUT)}};
    API(ge2_program_step(m->program, GE2_MODE_TRAIN, feeds, 2));
}

static void model_params(model *m, float *p)
{
    API(ge2_program_get_parameter(m->program, m->w, p, OUT * IN * sizeof(float)));
    API(ge2_program_get_parameter(m->program, m->b, p + OUT * IN, OUT * sizeof(float)));
}

/* --------------------------------------------- float64 reference (torch) */

typedef struct ref {
    ge2_optimizer_config c;
    double p[NP], m[NP], v[NP], vmax[NP], buf[NP];
    long t;
} ref;

/* d loss / d p at p for the batch, by the hand-derived formula. */
static void ref_grad(const double *p, const float *x, const float *t, int batch, double *g)
{
    memset(g, 0, NP * sizeof *g);
    double scale = 2.0 / (batch * OUT);
    for (int r = 0; r < batch; r++)
        for (int o = 0; o < OUT; o++) {
            double pred = p[OUT * IN + o];
            for (int i = 0; i < IN; i++)
                pred += (double)x[r * IN + i] * p[o * IN + i];
            double res = pred - t[r * OUT + o];
            for (int i = 0; i < IN; i++)
                g[o * IN + i] += scale * res * x[r * IN + i];
            g[OUT * IN + o] += scale * res;
        }
}

static double ref_norm(const double *g)
{
    double s = 0;
    for (int i = 0; i < NP; i++)
        s += g[i] * g[i];
    return sqrt(s);
}

/* torch.optim.{SGD,Adam,AdamW}.step() with lr, after clip_grad_norm_. */
static void ref_step(ref *r, double *g, double lr)
{
    const ge2_optimizer_config *c = &r->c;
    r->t++;
    if (c->clip_norm > 0) {
        double norm = ref_norm(g), coef = c->clip_norm / (norm + 1e-6);
        if (coef < 1)
            for (int i = 0; i < NP; i++)
                g[i] *= coef;
    }
    for (int i = 0; i < NP; i++) {
        double gi = g[i];
        if (c->kind == GE2_OPT_SGD) {
            gi += c->weight_decay * r->p[i];
            if (c->momentum != 0) {
                r->buf[i] = r->t == 1 ? gi : c->momentum * r->buf[i] + (1 - c->dampening) * gi;
                gi = c->nesterov ? gi + c->momentum * r->buf[i] : r->buf[i];
            }
            r->p[i] -= lr * gi;
            continue;
        }
        if (c->kind == GE2_OPT_ADAMW)
            r->p[i] *= 1 - lr * c->weight_decay;
        else
            gi += c->weight_decay * r->p[i];
        r->m[i] = c->beta1 * r->m[i] + (1 - c->beta1) * gi;
        r->v[i] = c->beta2 * r->v[i] + (1 - c->beta2) * gi * gi;
        double bc1 = 1 - pow(c->beta1, (double)r->t), bc2 = 1 - pow(c->beta2, (double)r->t);
        double vh = r->v[i];
        if (c->amsgrad) {
            r->vmax[i] = fmax(r->vmax[i], r->v[i]);
            vh = r->vmax[i];
        }
        r->p[i] -= lr / bc1 * r->m[i] / (sqrt(vh) / sqrt(bc2) + c->eps);
    }
}

static void initial_params(double *p)
{
    for (int i = 0; i < NP; i++)
        p[i] = 0.3 * sin(1.7 * i + 0.2);
}

static void expect_close(const float *got, const double *want, double tol, const char *what, int step)
{
    for (int i = 0; i < NP; i++)
        ck_assert_msg(fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i])), "%s step %d param %d: ge2 %.9g, torch %.9g",
                      what, step, i, got[i], want[i]);
}

/* Runs `steps` steps of cfg on the program and the reference, comparing after each. */
static void run_against_reference(const ge2_optimizer_config *cfg, int steps, int batch, double tol, const char *what)
{
    ref r;
    memset(&r, 0, sizeof r);
    r.c = *cfg;
    initial_params(r.p);
    model m;
    model_open(&m, batch, cfg, r.p);
    float x[MAXB * IN], t[MAXB * OUT], p[NP];
    double g[NP];
    for (int s = 0; s < steps; s++) {
        make_batch(s, 0, batch, x, t);
        ref_grad(r.p, x, t, batch, g);
        ref_step(&r, g, ge2_schedule_lr(&cfg->schedule, (float)cfg->lr, s));
        model_step(&m, x, t, batch);
        model_params(&m, p);
        expect_close(p, r.p, tol, what, s);
    }
    int64_t count;
    API(ge2_program_step_count(m.program, &count));
    ck_assert_int_eq(count, steps);
    model_close(&m);
}

/* ---------------------------------------------------------------- tests */

typedef struct opt_case {
    const char *name;
    ge2_optimizer_kind kind;
    double lr, momentum, dampening, weight_decay;
    bool nesterov, amsgrad;
} opt_case;

static const opt_case cases[] = {
    {"sgd", GE2_OPT_SGD, 0.1, 0, 0, 0, false, false},
    {"sgd momentum", GE2_OPT_SGD, 0.05, 0.9, 0, 0, false, false},
    {"sgd nesterov", GE2_OPT_SGD, 0.05, 0.9, 0, 0, true, false},
    {"sgd dampening", GE2_OPT_SGD, 0.05, 0.8, 0.3, 0, false, false},
    {"sgd weight decay", GE2_OPT_SGD, 0.05, 0.9, 0, 0.05, false, false},
    {"adam", GE2_OPT_ADAM, 0.01, 0, 0, 0, false, false},
    {"adam weight decay", GE2_OPT_ADAM, 0.01, 0, 0, 0.1, false, false},
    {"adamw", GE2_OPT_ADAMW, 0.01, 0, 0, 0.1, false, false},
    {"adam amsgrad", GE2_OPT_ADAM, 0.01, 0, 0, 0, false, true},
    {"adamw amsgrad", GE2_OPT_ADAMW, 0.01, 0, 0, 0.05, false, true},
};

START_TEST(optimizer_matches_torch)
{
    const opt_case *k = &cases[_i];
    ge2_optimizer_config c = ge2_optimizer_defaults(k->kind);
    c.lr = k->lr;
    c.momentum = k->momentum;
    c.dampening = k->dampening;
    c.weight_decay = k->weight_decay;
    c.nesterov = k->nesterov;
    c.amsgrad = k->amsgrad;
    run_against_reference(&c, 8, 7, 2e-5, k->name);
}
END_TEST

START_TEST(clipping_matches_hand_norm)
{
    /* clip_norm far below the gradient norm: every step is scaled */
    ge2_optimizer_config c = ge2_optimizer_defaults(GE2_OPT_SGD);
    c.lr = 0.1;
    c.momentum = 0.5;
    c.clip_norm = 0.05;
    double p0[NP], g[NP];
    initial_params(p0);
    float x[MAXB * IN], t[MAXB * OUT];
    make_batch(0, 0, 6, x, t);
    ref_grad(p0, x, t, 6, g);
    double norm = ref_norm(g);
    ck_assert_msg(norm > 0.5, "test data too tame: gradient norm %g", norm);
    model m;
    model_open(&m, 6, &c, p0);
    model_step(&m, x, t, 6);
    API(ge2_program_download_control(m.program));
    const ge2_control *ctl = ge2_program_control_host(m.program);
    ck_assert_double_eq_tol(ctl->grad_norm, norm, 1e-5 * norm);
    ck_assert_double_eq_tol(ctl->clip_factor, 0.05 / (norm + 1e-6), 1e-6);
    model_close(&m);
    run_against_reference(&c, 6, 6, 2e-5, "clipped sgd");
    c = ge2_optimizer_defaults(GE2_OPT_ADAM);
    c.clip_norm = 0.05;
    run_against_reference(&c, 6, 6, 2e-5, "clipped adam");
    /* a clip above the norm changes nothing */
    c.clip_norm = 1e6;
    run_against_reference(&c, 4, 6, 2e-5, "loosely clipped adam");
}
END_TEST

START_TEST(schedule_values)
{
    ge2_schedule cosine = {GE2_SCHEDULE_COSINE, 0, 0, 10, 110, 0.1};
    ck_assert_float_eq_tol(ge2_schedule_lr(&cosine, 1.0f, 0), 0.0f, 1e-7);
    ck_assert_float_eq_tol(ge2_schedule_lr(&cosine, 1.0f, 5), 0.5f, 1e-7);   /* half-way through warm-up */
    ck_assert_float_eq_tol(ge2_schedule_lr(&cosine, 1.0f, 10), 1.0f, 1e-7);  /* warm-up end: the peak */
    ck_assert_float_eq_tol(ge2_schedule_lr(&cosine, 1.0f, 60), 0.55f, 1e-6); /* midpoint: (lr + min_lr) / 2 */
    ck_assert_float_eq_tol(ge2_schedule_lr(&cosine, 1.0f, 35), 0.1 + 0.9 * (1 + cos(M_PI / 4)) / 2, 1e-6);
    ck_assert_float_eq_tol(ge2_schedule_lr(&cosine, 1.0f, 110), 0.1f, 1e-7); /* end: min_lr */
    ck_assert_float_eq_tol(ge2_schedule_lr(&cosine, 1.0f, 500), 0.1f, 1e-7); /* and stays there */
    ge2_schedule step = {GE2_SCHEDULE_STEP, 3, 0.5, 0, 0, 0};
    ck_assert_float_eq(ge2_schedule_lr(&step, 0.8f, 0), 0.8f);
    ck_assert_float_eq(ge2_schedule_lr(&step, 0.8f, 2), 0.8f);
    ck_assert_float_eq_tol(ge2_schedule_lr(&step, 0.8f, 3), 0.4f, 1e-7);
    ck_assert_float_eq_tol(ge2_schedule_lr(&step, 0.8f, 7), 0.2f, 1e-7);
    ge2_schedule constant = {GE2_SCHEDULE_CONSTANT, 0, 0, 0, 0, 0};
    ck_assert_float_eq(ge2_schedule_lr(&constant, 0.3f, 1000), 0.3f);
    /* clip factor: torch.nn.utils.clip_grad_norm_ */
    ck_assert_float_eq_tol(ge2_clip_factor(1.0, 4.0f), 1.0 / (4.0 + 1e-6), 1e-7);
    ck_assert_float_eq(ge2_clip_factor(1.0, 0.5f), 1.0f);
}
END_TEST

START_TEST(schedules_end_to_end)
{
    ge2_optimizer_config c = ge2_optimizer_defaults(GE2_OPT_SGD);
    c.lr = 0.2;
    c.momentum = 0.9;
    c.schedule = (ge2_schedule){GE2_SCHEDULE_STEP, 2, 0.5, 0, 0, 0};
    run_against_reference(&c, 7, 5, 2e-5, "step schedule");
    c = ge2_optimizer_defaults(GE2_OPT_ADAMW);
    c.lr = 0.02;
    c.schedule = (ge2_schedule){GE2_SCHEDULE_COSINE, 0, 0, 3, 9, 0.001};
    run_against_reference(&c, 10, 5, 2e-5, "cosine schedule");
}
END_TEST

START_TEST(set_lr_takes_effect_next_step)
{
    ge2_optimizer_config c = ge2_optimizer_defaults(GE2_OPT_SGD);
    c.lr = 0.1;
    ref r;
    memset(&r, 0, sizeof r);
    r.c = c;
    initial_params(r.p);
    model m;
    model_open(&m, 4, &c, r.p);
    float x[MAXB * IN], t[MAXB * OUT], p[NP];
    double g[NP];
    /* the first two at the config's lr; then a new one before every step,
     * more steps than ge2_set_lr's ring of upload slots */
    const double lrs[12] = {0.1, 0.1, 0.02, 0.5, 0.07, 0.3, 0.01, 0.2, 0.05, 0.4, 0.03, 0.15};
    for (int s = 0; s < 12; s++) {
        if (s >= 2) {
            API(ge2_set_lr(m.program, lrs[s]));
            double got;
            API(ge2_get_lr(m.program, &got));
            ck_assert_double_eq_tol(got, lrs[s], 1e-7);
        }
        make_batch(s, 0, 4, x, t);
        ref_grad(r.p, x, t, 4, g);
        ref_step(&r, g, lrs[s]);
        model_step(&m, x, t, 4);
        model_params(&m, p);
        expect_close(p, r.p, 1e-5, "set_lr", s);
    }
    model_close(&m);
}
END_TEST

/* k micro-batches of B under accumulation == one batch of k·B (mean loss). */
static void check_accumulation(ge2_optimizer_kind kind, int k, double clip_norm)
{
    ge2_optimizer_config acc = ge2_optimizer_defaults(kind), one = acc;
    acc.lr = one.lr = kind == GE2_OPT_SGD ? 0.1 : 0.01;
    acc.momentum = one.momentum = kind == GE2_OPT_SGD ? 0.9 : 0.0;
    acc.clip_norm = one.clip_norm = clip_norm; /* the norm of the mean gradient is clipped, as for the big batch */
    acc.accumulation_steps = k;
    ck_assert_int_eq(ge2_opt_state_slots(&acc), ge2_opt_state_slots(&one) + 1);
    double p0[NP];
    initial_params(p0);
    const int B = 4;
    model ma, mb;
    model_open(&ma, B, &acc, p0);
    model_open(&mb, k * B, &one, p0);
    float x[MAXB * IN], t[MAXB * OUT], pa[NP], pb[NP];
    float prev[NP]; /* ma's parameters as the previous update left them */
    for (int i = 0; i < NP; i++)
        prev[i] = (float)p0[i];
    for (int update = 0; update < 3; update++) {
        make_batch(update, 0, k * B, x, t);
        for (int micro = 0; micro < k; micro++) {
            model_step(&ma, x + micro * B * IN, t + micro * B * OUT, B);
            if (micro < k - 1) { /* nothing moves before the k-th micro-batch */
                model_params(&ma, pa);
                for (int i = 0; i < NP; i++)
                    ck_assert_msg(pa[i] == prev[i], "%s k=%d update %d micro %d param %d moved: %.9g -> %.9g",
                                  ge2_optimizer_name(kind), k, update, micro, i, prev[i], pa[i]);
            }
        }
        model_step(&mb, x, t, k * B);
        model_params(&ma, pa);
        model_params(&mb, pb);
        for (int i = 0; i < NP; i++)
            ck_assert_msg(fabsf(pa[i] - pb[i]) <= 1e-6f, "%s k=%d update %d param %d: accumulated %.9g, full batch %.9g",
                          ge2_optimizer_name(kind), k, update, i, pa[i], pb[i]);
        memcpy(prev, pa, sizeof prev);
    }
    int64_t na, nb;
    API(ge2_program_step_count(ma.program, &na));
    API(ge2_program_step_count(mb.program, &nb));
    ck_assert_int_eq(na, 3);
    ck_assert_int_eq(nb, 3);
    model_close(&ma);
    model_close(&mb);
}

START_TEST(accumulation_equals_big_batch)
{
    check_accumulation(GE2_OPT_SGD, 2, 0.0);
    check_accumulation(GE2_OPT_ADAM, 2, 0.0);
    check_accumulation(GE2_OPT_SGD, 3, 0.0);
    check_accumulation(GE2_OPT_SGD, 2, 0.05);
    check_accumulation(GE2_OPT_ADAMW, 3, 0.05);
}
END_TEST

/* x [2,3] · wᵀ, mean: the smallest graph with a parameter; returns the loss. */
static ge2_tensor *tiny_graph(ge2_graph **g)
{
    API(ge2_graph_new(g));
    ge2_tensor *x, *w, *y, *loss;
    ge2_init init = {GE2_INIT_CONSTANT, 0.5, 0, 0};
    API(ge2_input(*g, "x", GE2_F32, ge2_shape2(2, 3), &x));
    API(ge2_parameter(*g, "w", GE2_F32, ge2_shape2(1, 3), init, &w));
    API(ge2_linear(*g, x, w, NULL, GE2_ACT_NONE, 0, &y));
    API(ge2_mean_all(*g, y, &loss));
    return loss;
}

static void expect_invalid(const ge2_optimizer_config *c, const char *needle)
{
    ge2_graph *g;
    API(ge2_backward(g, tiny_graph(&g)));
    int n_nodes = g->n_nodes;
    ck_assert_int_eq(ge2_optimizer(g, c), GE2_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(ge2_last_error(), needle) != NULL, "message \"%s\" lacks \"%s\"", ge2_last_error(), needle);
    ck_assert_int_eq(g->n_nodes, n_nodes);
    ck_assert(!g->has_optimizer);
    ge2_graph_free(g);
}

START_TEST(validation_errors)
{
    ge2_optimizer_config c = ge2_optimizer_defaults(GE2_OPT_ADAM);
    c.lr = 0;
    expect_invalid(&c, "lr must be > 0, got 0");
    c.lr = -0.1;
    expect_invalid(&c, "lr must be > 0, got -0.1");
    c.lr = NAN;
    expect_invalid(&c, "lr must be > 0");
    c = ge2_optimizer_defaults(GE2_OPT_ADAM);
    c.beta1 = 1.0;
    expect_invalid(&c, "beta1 must be in [0, 1), got 1");
    c = ge2_optimizer_defaults(GE2_OPT_ADAMW);
    c.beta2 = -0.5;
    expect_invalid(&c, "adamw: beta2 must be in [0, 1), got -0.5");
    c = ge2_optimizer_defaults(GE2_OPT_ADAM);
    c.eps = 0;
    expect_invalid(&c, "eps must be > 0, got 0");
    c = ge2_optimizer_defaults(GE2_OPT_SGD);
    c.nesterov = true;
    expect_invalid(&c, "nesterov needs momentum > 0 and dampening 0, got momentum 0, dampening 0");
    c.momentum = 0.9;
    c.dampening = 0.1;
    expect_invalid(&c, "nesterov needs momentum > 0 and dampening 0, got momentum 0.9, dampening 0.1");
    c = ge2_optimizer_defaults(GE2_OPT_SGD);
    c.momentum = -1;
    expect_invalid(&c, "momentum must be >= 0, got -1");
    c = ge2_optimizer_defaults(GE2_OPT_SGD);
    c.weight_decay = -1e-4;
    expect_invalid(&c, "weight_decay must be >= 0, got -0.0001");
    c = ge2_optimizer_defaults(GE2_OPT_SGD);
    c.accumulation_steps = 0;
    expect_invalid(&c, "accumulation_steps must be >= 1, got 0");
    c = ge2_optimizer_defaults(GE2_OPT_SGD);
    c.clip_norm = -1;
    expect_invalid(&c, "clip_norm must be >= 0");
    c = ge2_optimizer_defaults(GE2_OPT_SGD);
    c.schedule = (ge2_schedule){GE2_SCHEDULE_STEP, 0, 0.5, 0, 0, 0};
    expect_invalid(&c, "schedule.step_size must be > 0, got 0");
    c.schedule = (ge2_schedule){GE2_SCHEDULE_COSINE, 0, 0, 10, 10, 0};
    expect_invalid(&c, "schedule.total_steps must exceed warmup_steps (10), got 10");
    c.kind = GE2_OPT_COUNT;
    expect_invalid(&c, "unknown kind");
}
END_TEST

START_TEST(state_errors)
{
    ge2_optimizer_config c = ge2_optimizer_defaults(GE2_OPT_SGD);
    ge2_graph *g;
    ge2_tensor *loss = tiny_graph(&g);
    ck_assert_int_eq(ge2_optimizer(g, &c), GE2_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "call ge2_backward first"));
    API(ge2_backward(g, loss));
    c.clip_norm = 1.0;
    int before = g->n_nodes;
    API(ge2_optimizer(g, &c));
    ck_assert_int_eq(g->n_nodes, before + 2);
    ck_assert_int_eq(g->nodes[before].op, GE2_OP_GRAD_NORM);
    ck_assert_int_eq(g->nodes[before + 1].op, GE2_OP_OPTIMIZER_UPDATE);
    ck_assert_int_eq(g->nodes[before + 1].phase, GE2_PHASE_OPTIMIZER);
    ck_assert_double_eq(GE2_ATTRS(ge2_optim_attrs, g->nodes[before + 1].attrs)->config.clip_norm, 1.0);
    ck_assert_int_eq(ge2_optimizer(g, &c), GE2_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "already has an optimizer"));
    ck_assert_int_eq(ge2_optimizer(NULL, &c), GE2_ERR_INVALID_ARGUMENT);
    ge2_graph_free(g);

    /* the flat pools are f32: an f64 parameter (gradient checks) cannot be optimized */
    API(ge2_graph_new(&g));
    ge2_tensor *x64, *w64, *y64, *l64;
    API(ge2_input(g, "x", GE2_F64, ge2_shape2(2, 3), &x64));
    API(ge2_parameter(g, "w64", GE2_F64, ge2_shape2(1, 3), (ge2_init){GE2_INIT_CONSTANT, 0.5, 0, 0}, &w64));
    API(ge2_linear(g, x64, w64, NULL, GE2_ACT_NONE, 0, &y64));
    API(ge2_mean_all(g, y64, &l64));
    API(ge2_backward(g, l64));
    ck_assert_int_eq(ge2_optimizer(g, &c), GE2_ERR_DTYPE);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "parameter 'w64' is f64"));
    ge2_graph_free(g);
}
END_TEST

START_TEST(defaults_names_slots)
{
    ge2_optimizer_config a = ge2_optimizer_defaults(GE2_OPT_ADAM);
    ck_assert_double_eq(a.lr, 1e-3);
    ck_assert_double_eq(a.beta1, 0.9);
    ck_assert_double_eq(a.beta2, 0.999);
    ck_assert_double_eq(a.eps, 1e-8);
    ck_assert_double_eq(a.weight_decay, 0);
    ck_assert_double_eq(ge2_optimizer_defaults(GE2_OPT_ADAMW).weight_decay, 1e-2);
    ge2_optimizer_config s = ge2_optimizer_defaults(GE2_OPT_SGD);
    ck_assert_double_eq(s.lr, 0.01);
    ck_assert_int_eq(s.accumulation_steps, 1);
    ck_assert_str_eq(ge2_optimizer_name(GE2_OPT_ADAMW), "adamw");
    ck_assert_int_eq(ge2_opt_state_slots(&s), 0);
    s.momentum = 0.9;
    ck_assert_int_eq(ge2_opt_state_slots(&s), 1);
    ck_assert_int_eq(ge2_opt_state_slots(&a), 2);
    a.amsgrad = true;
    a.accumulation_steps = 4;
    ck_assert_int_eq(ge2_opt_state_slots(&a), 4);
    const char *names[4];
    ck_assert_int_eq(ge2_opt_state_names(&a, names), 4);
    ck_assert_str_eq(names[0], "exp_avg");
    ck_assert_str_eq(names[1], "exp_avg_sq");
    ck_assert_str_eq(names[2], "max_exp_avg_sq");
    ck_assert_str_eq(names[3], "grad_accum");
    ge2_optimizer_kind k;
    API(ge2_optimizer_parse("adamw", &k));
    ck_assert_int_eq(k, GE2_OPT_ADAMW);
    ck_assert_int_eq(ge2_optimizer_parse("rmsprop", &k), GE2_ERR_INVALID_ARGUMENT);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("optim");
    TCase *tc = tcase_create("optim");
    tcase_add_loop_test(tc, optimizer_matches_torch, 0, (int)(sizeof cases / sizeof cases[0]));
    tcase_add_test(tc, clipping_matches_hand_norm);
    tcase_add_test(tc, schedule_values);
    tcase_add_test(tc, schedules_end_to_end);
    tcase_add_test(tc, set_lr_takes_effect_next_step);
    tcase_add_test(tc, accumulation_equals_big_batch);
    tcase_add_test(tc, validation_errors);
    tcase_add_test(tc, state_errors);
    tcase_add_test(tc, defaults_names_slots);
    suite_add_tcase(s, tc);
    return ge2_check_run(s);
}
