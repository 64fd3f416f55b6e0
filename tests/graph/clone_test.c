/* ge2_graph_clone: the copy is the graph (tensors, nodes, constants, the
 * optimizer), trains bit for bit as the original does on the CPU backend,
 * keeps training after the original is freed, and changes to it leave the
 * original alone. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "graph/clone.h"
#include "ge2/ge2.h"
#include "tests/support/check_main.h"

#define API(call) ck_assert_msg((call) == GE2_OK, "%s: %s", #call, ge2_last_error())

enum { B = 8, IN = 12, HIDDEN = 10, CLASSES = 4 };

/* x -> linear relu -> (* a constant) -> linear -> cross-entropy; Adam */
static ge2_graph *build(void)
{
    ge2_graph *g;
    ge2_tensor *x, *y, *w1, *b1, *w2, *k, *h, *loss;
    API(ge2_graph_new(&g));
    API(ge2_graph_set_seed(g, 21));
    API(ge2_input(g, "x", GE2_F32, ge2_shape2(B, IN), &x));
    API(ge2_label(g, "y", GE2_I32, ge2_shape1(B), &y));
    API(ge2_parameter(g, "w1", GE2_F32, ge2_shape2(HIDDEN, IN), (ge2_init){GE2_INIT_LINEAR_DEFAULT, 0, 0, 0}, &w1));
    API(ge2_parameter(g, "b1", GE2_F32, ge2_shape1(HIDDEN), (ge2_init){GE2_INIT_LINEAR_DEFAULT, 0, 0, IN}, &b1));
    API(ge2_parameter(g, "w2", GE2_F32, ge2_shape2(CLASSES, HIDDEN), (ge2_init){GE2_INIT_LINEAR_DEFAULT, 0, 0, 0},
                      &w2));
    float kv[HIDDEN];
    for (int i = 0; i < HIDDEN; i++)
        kv[i] = 0.5f + 0.1f * (float)i;
    API(ge2_constant(g, "k", GE2_F32, ge2_shape1(HIDDEN), kv, &k));
    API(ge2_linear(g, x, w1, b1, GE2_ACT_RELU, 0, &h));
    API(ge2_mul(g, h, k, &h));
    API(ge2_linear(g, h, w2, NULL, GE2_ACT_NONE, 0, &h));
    API(ge2_cross_entropy(g, h, y, 0, &loss));
    API(ge2_backward(g, loss));
    ge2_optimizer_config adam = ge2_optimizer_defaults(GE2_OPT_ADAM);
    API(ge2_optimizer(g, &adam));
    return g;
}

typedef struct run {
    ge2_context *ctx;
    ge2_program *program;
} run;

static void open_run(run *r, ge2_graph *g)
{
    API(ge2_context_new(GE2_DEVICE_CPU, &r->ctx));
    API(ge2_compile(r->ctx, g, NULL, &r->program));
}

static void steps(run *r, ge2_graph *g, int from, int n)
{
    float x[B * IN];
    int32_t y[B];
    for (int s = from; s < from + n; s++) {
        for (int i = 0; i < B * IN; i++)
            x[i] = (float)((i * 7 + s * 3) % 11) / 11.0f - 0.4f;
        for (int i = 0; i < B; i++)
            y[i] = (int32_t)((i + s) % CLASSES);
        ge2_feed f[2] = {{ge2_graph_find(g, "x"), x, ge2_shape2(B, IN)}, {ge2_graph_find(g, "y"), y, ge2_shape1(B)}};
        API(ge2_program_step(r->program, GE2_MODE_TRAIN, f, 2));
    }
    API(ge2_program_sync(r->program));
}

static void params(run *r, ge2_graph *g, float *out) /* [HIDDEN * IN + HIDDEN + CLASSES * HIDDEN] */
{
    API(ge2_program_get_parameter(r->program, ge2_graph_find(g, "w1"), out, sizeof(float) * HIDDEN * IN));
    API(ge2_program_get_parameter(r->program, ge2_graph_find(g, "b1"), out + HIDDEN * IN, sizeof(float) * HIDDEN));
    API(ge2_program_get_parameter(r->program, ge2_graph_find(g, "w2"), out + HIDDEN * IN + HIDDEN,
                                  sizeof(float) * CLASSES * HIDDEN));
}

static void close_run(run *r)
{
    ge2_program_free(r->program);
    ge2_context_free(r->ctx);
}

START_TEST(the_copy_is_the_graph)
{
    ge2_graph *g = build(), *c;
    API(ge2_graph_clone(g, &c));
    ck_assert_int_eq(c->n_tensors, g->n_tensors);
    ck_assert_int_eq(c->n_nodes, g->n_nodes);
    ck_assert_int_eq(c->loss, g->loss);
    ck_assert(c->has_optimizer && c->seed == g->seed && c->n_parameters == g->n_parameters);
    for (int i = 0; i < g->n_tensors; i++) {
        const ge2_tensor *a = g->tensors[i], *b = c->tensors[i];
        ck_assert_ptr_ne(a, b);
        ck_assert_ptr_eq(b->graph, c);
        ck_assert_int_eq(b->id, i);
        ck_assert_str_eq(b->name, a->name);
        ck_assert_int_eq(b->role, a->role);
        ck_assert_int_eq(b->grad, a->grad);
        ck_assert(memcmp(&b->shape, &a->shape, sizeof a->shape) == 0);
        if (a->constant_data) {
            ck_assert_ptr_ne(b->constant_data, a->constant_data);
            ck_assert(memcmp(b->constant_data, a->constant_data, sizeof(float) * HIDDEN) == 0);
        }
    }
    ck_assert(memcmp(c->nodes, g->nodes, sizeof *g->nodes * (size_t)g->n_nodes) == 0);
    /* a node added to the copy is the copy's alone */
    ge2_tensor *extra;
    API(ge2_activate(c, ge2_graph_find(c, "x"), GE2_ACT_RELU, 0, &extra));
    ck_assert_int_eq(c->n_nodes, g->n_nodes + 1);
    ck_assert_int_eq(c->n_tensors, g->n_tensors + 1);
    ge2_graph_free(c);
    ge2_graph_free(g);
}
END_TEST

START_TEST(the_copy_trains_as_the_original_and_outlives_it)
{
    enum { P = HIDDEN * IN + HIDDEN + CLASSES * HIDDEN };
    ge2_graph *g = build(), *c;
    API(ge2_graph_clone(g, &c));
    run a, b;
    open_run(&a, g);
    open_run(&b, c);
    steps(&a, g, 0, 5);
    steps(&b, c, 0, 5);
    float pa[P], pb[P];
    params(&a, g, pa);
    params(&b, c, pb);
    ck_assert_msg(memcmp(pa, pb, sizeof pa) == 0, "the copy trained to other parameters");
    close_run(&a);
    ge2_graph_free(g);
    steps(&b, c, 5, 3); /* nothing of the original is left to read */
    params(&b, c, pb);
    ck_assert_msg(memcmp(pa, pb, sizeof pa) != 0, "three more steps moved nothing");
    close_run(&b);
    ge2_graph_free(c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("clone");
    TCase *tc = tcase_create("clone");
    tcase_add_test(tc, the_copy_is_the_graph);
    tcase_add_test(tc, the_copy_trains_as_the_original_and_outlives_it);
    suite_add_tcase(s, tc);
    return ge2_check_run(s);
}
