/* Every fusion row of the registry against its own unfused nodes, on the
 * graph its row gives (fusion/fusion.h: example): the program with every
 * row on must form at least one group of a group pattern (or one fused
 * node of a rewrite), and train to the same losses and parameters as the
 * program with that row off. A group on the CPU backend, which runs a
 * group's nodes: bitwise (the plan differs only in lifetimes). A rewrite on
 * the CPU: bitwise where its row says it is exact, else within fp32
 * rounding (the fused kernels sum in another order); anything on CUDA
 * (built with GE2_PATTERN_TEST_CUDA): within fp32 rounding, and a group
 * pattern with a CUDA implementation that names itself in the kernel report
 * must run it (not its nodes) for some group. A new pattern is tested the day it is added. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "capture/program_inspect.h"
#include "fusion/fusion.h"
#include "fusion/recompute_act/recompute_act.h"
#include "ops/elementwise/elementwise.h"
#include "ops/ops.h"
#include "tests/support/check_main.h"
#ifdef GE2_PATTERN_TEST_CUDA
#include "tests/gpu_probe.h"
#endif

enum { STEPS = 4, MAX_PARAMS = 16 };

/* relative, normwise per parameter */
static const double rounding = 1e-4;
#ifdef GE2_PATTERN_TEST_CUDA
static const ge2_device device = GE2_DEVICE_CUDA;
static bool bitwise(const ge2_fusion_pattern *p) { (void)p; return false; }
#else
static const ge2_device device = GE2_DEVICE_CPU;
static bool bitwise(const ge2_fusion_pattern *p) { return !p->rewrite || p->exact; }
#endif

typedef struct run {
    float loss[STEPS];
    float *params[MAX_PARAMS];
    int64_t numel[MAX_PARAMS];
    int n_params;
    int groups_of_pattern; /* in the train key's plan, or the fused nodes of a rewrite row */
    int groups_run_fused;  /* of those groups, the ones the backend ran with the pattern's implementation */
} run;

static uint64_t rng;
static float uniform(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

/* Random feeds for every input and label of g (labels in [0, 2): every
 * example has at least two classes). */
static int make_feeds(ge2_graph *g, ge2_feed *feeds, void **bufs)
{
    int n = 0;
    for (int i = 0; i < g->n_tensors; i++) {
        ge2_tensor *t = g->tensors[i];
        if (t->role != GE2_ROLE_INPUT && t->role != GE2_ROLE_LABEL)
            continue;
        const int64_t numel = ge2_shape_numel(t->shape);
        bufs[n] = malloc((size_t)numel * 4);
        for (int64_t k = 0; k < numel; k++)
            if (t->role == GE2_ROLE_LABEL)
                ((int32_t *)bufs[n])[k] = (int32_t)(uniform() > 0 ? 1 : 0);
            else
                ((float *)bufs[n])[k] = uniform();
        feeds[n] = (ge2_feed){t, bufs[n], t->shape};
        n++;
    }
    return n;
}

static void train(ge2_graph *g, int pattern, const char *disable, run *r)
{
    memset(r, 0, sizeof *r);
    ge2_context *ctx;
    ge2_program *prog;
    ge2_compile_options o = ge2_compile_defaults();
    o.disable_fusions = disable;
    ck_assert_int_eq(ge2_context_new(device, &ctx), GE2_OK);
    ck_assert_msg(ge2_compile(ctx, g, &o, &prog) == GE2_OK, "%s", ge2_last_error());
    r->groups_of_pattern += ge2_program_rewritten(prog, pattern); /* a rewrite row's fused nodes */
    rng = 0x5eed;
    for (int s = 0; s < STEPS; s++) {
        ge2_feed feeds[4];
        void *bufs[4];
        int n = make_feeds(g, feeds, bufs);
        ck_assert_msg(ge2_program_step(prog, GE2_MODE_TRAIN, feeds, n) == GE2_OK, "%s", ge2_last_error());
        ck_assert_int_eq(ge2_program_read_output(prog, GE2_MODE_TRAIN, g->tensors[g->loss], &r->loss[s], 4), GE2_OK);
        for (int i = 0; i < n; i++)
            free(bufs[i]);
    }
    const ge2_key_view key = ge2_program_key_view(prog, ge2_program_last_key(prog, GE2_MODE_TRAIN));
    const ge2_plan *plan = key.plan;
    for (int i = 0; i < plan->n_groups; i++) {
        r->groups_of_pattern += plan->groups[i].pattern == pattern;
        /* the backend names the implementation in a group's launches when it runs it */
        r->groups_run_fused += plan->groups[i].pattern == pattern && key.exec->launches[plan->groups[i].first].fused_into;
    }
    for (int i = 0; i < g->n_tensors && r->n_params < MAX_PARAMS; i++) {
        const ge2_tensor *t = g->tensors[i];
        if (t->role != GE2_ROLE_PARAMETER)
            continue;
        const int k = r->n_params++;
        r->numel[k] = ge2_shape_numel(t->shape);
        r->params[k] = malloc((size_t)r->numel[k] * sizeof(float));
        ck_assert_int_eq(ge2_program_get_parameter(prog, t, r->params[k], (size_t)r->numel[k] * sizeof(float)),
                         GE2_OK);
    }
    ge2_program_free(prog);
    ge2_context_free(ctx);
}

static double rel_diff(const float *a, const float *b, int64_t n)
{
    double d = 0, s = 0;
    for (int64_t i = 0; i < n; i++) {
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        s += (double)b[i] * b[i];
    }
    return sqrt(d) / (sqrt(s) > 1e-30 ? sqrt(s) : 1e-30);
}

START_TEST(test_pattern_equals_its_nodes)
{
    const ge2_fusion_pattern *p = ge2_fusion_pattern_at(_i);
    ck_assert_msg(p->example, "pattern %s has no example graph", p->name);
    /* a graph each: compiling applies the rewrites to the graph itself */
    ge2_graph *g, *plain;
    ck_assert_msg(p->example(&g) == GE2_OK, "%s's example: %s", p->name, ge2_last_error());
    ck_assert_msg(p->example(&plain) == GE2_OK, "%s's example: %s", p->name, ge2_last_error());
    run on, off;
    train(g, _i, NULL, &on);
    train(plain, _i, p->name, &off);
    const double tolerance = bitwise(p) ? 0 : rounding;
    ck_assert_msg(on.groups_of_pattern > 0, "%s: its example formed no group", p->name);
#ifdef GE2_PATTERN_TEST_CUDA
    ck_assert_msg(!p->match || !p->cuda || !(p->cuda->describe || p->cuda->what) || on.groups_run_fused > 0,
                  "%s: CUDA ran the nodes of all %d of its groups, never its implementation", p->name,
                  on.groups_of_pattern);
#endif
    ck_assert_msg(off.groups_of_pattern == 0, "%s: %d groups or fused nodes with it off (%d on)", p->name, off.groups_of_pattern, on.groups_of_pattern);
    for (int s = 0; s < STEPS; s++)
        ck_assert_msg(tolerance ? fabs(on.loss[s] - off.loss[s]) <= tolerance * fabs(off.loss[s])
                                : on.loss[s] == off.loss[s],
                      "%s, step %d: loss %.9g fused, %.9g unfused", p->name, s, on.loss[s], off.loss[s]);
    for (int k = 0; k < on.n_params; k++) {
        const double d = rel_diff(on.params[k], off.params[k], on.numel[k]);
        ck_assert_msg(tolerance ? d <= tolerance : d == 0, "%s: parameter %d differs by %.3g", p->name, k, d);
        free(on.params[k]);
        free(off.params[k]);
    }
    ge2_graph_free(g);
    ge2_graph_free(plain);
}
END_TEST

#ifndef GE2_PATTERN_TEST_CUDA
/* g compiled with every pattern on the CPU, after one train step on random
 * feeds: its train key's plan is made */
static ge2_program *after_a_step(ge2_graph *g, ge2_context **ctx)
{
    ge2_program *prog;
    ge2_compile_options o = ge2_compile_defaults();
    ck_assert_int_eq(ge2_context_new(GE2_DEVICE_CPU, ctx), GE2_OK);
    ck_assert_msg(ge2_compile(*ctx, g, &o, &prog) == GE2_OK, "%s", ge2_last_error());
    rng = 0x5eed;
    ge2_feed feeds[4];
    void *bufs[4];
    const int n_feeds = make_feeds(g, feeds, bufs);
    ck_assert_msg(ge2_program_step(prog, GE2_MODE_TRAIN, feeds, n_feeds) == GE2_OK, "%s", ge2_last_error());
    for (int i = 0; i < n_feeds; i++)
        free(bufs[i]);
    return prog;
}

static const ge2_plan *train_plan(const ge2_program *prog)
{
    return ge2_program_key_view(prog, ge2_program_last_key(prog, GE2_MODE_TRAIN)).plan;
}

/* x -> linear -> h + dropout(h) -> layer_norm -> head, rows of `width`:
 * the train key's groups of dropout_ln, and of ln_backward with three
 * nodes (the dropout's backward of its dx taken in) */
static void layer_norm_groups(int64_t width, int *dropout_ln, int *ln_backward_of3)
{
    ge2_graph *g;
    ge2_tensor *labels, *h, *d = NULL, *n = NULL;
    ck_assert_msg(ge2_fusion_example_rows(width, &g, &labels, &h) == GE2_OK, "%s", ge2_last_error());
    ge2_status st = ge2_dropout(g, h, 0.3, &d);
    if (st == GE2_OK)
        st = ge2_add(g, h, d, &d);
    if (st == GE2_OK)
        st = ge2_layer_norm_layer(g, "ln", d, true, 1e-5, &n);
    ck_assert_msg(ge2_fusion_example_head(g, st, n, 10, labels, &g) == GE2_OK, "%s", ge2_last_error());
    int at_dropout_ln, at_ln_backward;
    ck_assert_int_eq(ge2_fusion_pattern_find("dropout_ln", &at_dropout_ln), GE2_OK);
    ck_assert_int_eq(ge2_fusion_pattern_find("ln_backward", &at_ln_backward), GE2_OK);
    ge2_context *ctx;
    ge2_program *prog = after_a_step(g, &ctx);
    const ge2_plan *plan = train_plan(prog);
    *dropout_ln = *ln_backward_of3 = 0;
    for (int i = 0; i < plan->n_groups; i++) {
        *dropout_ln += plan->groups[i].pattern == at_dropout_ln;
        *ln_backward_of3 += plan->groups[i].pattern == at_ln_backward && plan->groups[i].count == 3;
    }
    ge2_program_free(prog);
    ge2_context_free(ctx);
    ge2_graph_free(g);
}

/* The layer-norm fusions plan groups only for rows their CUDA kernels take
 * (a multiple of 4 values: four a lane), so a group that would run node by
 * node does not stretch its tensors' lifetimes; and ln_backward takes in a
 * residual branch's dropout backward, as a pre-LN transformer has one
 * after every layer norm's */
START_TEST(test_layer_norm_groups_follow_their_kernels_rows)
{
    int dropout_ln, ln_backward_of3;
    layer_norm_groups(300, &dropout_ln, &ln_backward_of3);
    ck_assert_int_eq(dropout_ln, 1);
    ck_assert_int_eq(ln_backward_of3, 1);
    layer_norm_groups(302, &dropout_ln, &ln_backward_of3);
    ck_assert_int_eq(dropout_ln, 0);
    ck_assert_int_eq(ln_backward_of3, 0);
}
END_TEST

/* Under recompute_act the input gradient's dx takes over z's memory where
 * z is read last (ge2_op_def.output_over_input): its example's train plan
 * puts some LINEAR_GRAD_INPUT's dx on its z (test_pattern_equals_its_nodes
 * holds that plan to the unfused one bit for bit on the CPU) */
START_TEST(test_recompute_puts_dx_over_z)
{
    int at;
    ck_assert_int_eq(ge2_fusion_pattern_find("recompute_act", &at), GE2_OK);
    ge2_graph *g;
    ck_assert_msg(ge2_fusion_pattern_at(at)->example(&g) == GE2_OK, "%s", ge2_last_error());
    ge2_context *ctx;
    ge2_program *prog = after_a_step(g, &ctx);
    const ge2_plan *plan = train_plan(prog);
    int over_z = 0;
    for (int p = 0; p < plan->n_steps; p++) {
        const ge2_node *node = &g->nodes[plan->schedule[p]];
        over_z += node->op == ge2_op_linear_grad_input_recompute() &&
                  plan->tensors[node->outputs[0]].reuses == node->inputs[2];
    }
    ck_assert_int_ge(over_z, 1);
    ge2_program_free(prog);
    ge2_context_free(ctx);
    ge2_graph_free(g);
}
END_TEST
#endif

int main(void)
{
#ifdef GE2_PATTERN_TEST_CUDA
    char why[256];
    if (!ge2_test_gpu_probe(why, sizeof why)) {
        printf("fusion pattern test: no GPU (%s); nothing to run\n", why);
        return 0;
    }
#endif
    Suite *s = suite_create("fusion_patterns");
    TCase *tc = tcase_create("patterns");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_pattern_equals_its_nodes, 0, ge2_fusion_pattern_count());
#ifndef GE2_PATTERN_TEST_CUDA
    tcase_add_test(tc, test_layer_norm_groups_follow_their_kernels_rows);
    tcase_add_test(tc, test_recompute_puts_dx_over_z);
#endif
    suite_add_tcase(s, tc);
    return ge2_check_run(s);
}
