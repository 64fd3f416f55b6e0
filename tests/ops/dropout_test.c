/* Dropout: the generator against Philox4x32-10's published known answers
 * (Random123's kat_vectors), then through a compiled program on the CPU
 * backend: each train step draws a fresh mask (the optimizer's commit moves
 * the control block's offset on), the keep rate is 1 - p within 4 standard
 * deviations, kept values scale by 1/(1 - p), the same seed draws the same
 * masks again, and an eval step passes x through. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "capture/program_state.h"
#include "ge2/ge2.h"
#include "graph/ir.h"
#include "graph/philox.h"
#include "ops/ops.h"
#include "tests/support/check_main.h"

#define API(call) ck_assert_msg((call) == GE2_OK, "%s: %s", #call, ge2_last_error())

START_TEST(philox_matches_its_known_answers)
{
    static const struct {
        uint32_t counter[4], key[2], want[4];
    } kat[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
        {{~0u, ~0u, ~0u, ~0u}, {~0u, ~0u}, {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
        {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
         {0xa4093822u, 0x299f31d0u},
         {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
    };
    for (size_t k = 0; k < sizeof kat / sizeof kat[0]; k++) {
        ge2_philox4 c = {{kat[k].counter[0], kat[k].counter[1], kat[k].counter[2], kat[k].counter[3]}};
        ge2_philox4 r = ge2_philox4x32_10(c, kat[k].key[0], kat[k].key[1]);
        for (int i = 0; i < 4; i++)
            ck_assert_msg(r.v[i] == kat[k].want[i], "vector %zu word %d: %08x, expected %08x", k, i, r.v[i],
                          kat[k].want[i]);
    }
}
END_TEST

enum { N = 20000, STEPS = 3 };
static const double P = 0.3;

typedef struct net {
    ge2_context *ctx;
    ge2_graph *g;
    ge2_program *prog;
    ge2_tensor *x, *y, *target;
} net;

/* y = dropout(x ⊙ w) with w a parameter of ones that SGD at lr 1e-30 leaves be
 * (the optimizer's commit is what moves the offset) */
static void net_open(net *n, uint64_t seed)
{
    ge2_tensor *w, *h, *loss;
    API(ge2_context_new(GE2_DEVICE_CPU, &n->ctx));
    API(ge2_graph_new(&n->g));
    API(ge2_graph_set_seed(n->g, seed));
    API(ge2_input(n->g, "x", GE2_F32, ge2_shape1(N), &n->x));
    API(ge2_label(n->g, "target", GE2_F32, ge2_shape1(N), &n->target));
    API(ge2_parameter(n->g, "w", GE2_F32, ge2_shape1(N), (ge2_init){GE2_INIT_CONSTANT, 1, 0, 0}, &w));
    API(ge2_mul(n->g, n->x, w, &h));
    API(ge2_dropout(n->g, h, P, &n->y));
    API(ge2_mark_output(n->g, n->y));
    API(ge2_mse_loss(n->g, n->y, n->target, &loss));
    API(ge2_backward(n->g, loss));
    ge2_optimizer_config sgd = ge2_optimizer_defaults(GE2_OPT_SGD);
    sgd.lr = 1e-30; /* w stays 1 in f32 */
    API(ge2_optimizer(n->g, &sgd));
    API(ge2_compile(n->ctx, n->g, NULL, &n->prog));
}

static void net_close(net *n)
{
    ge2_program_free(n->prog);
    ge2_graph_free(n->g);
    ge2_context_free(n->ctx);
}

/* STEPS train steps of x = 1..N; masks[s][i] = y's element i of step s */
static void draw(net *n, float masks[STEPS][N])
{
    static float x[N], t[N];
    for (int i = 0; i < N; i++)
        x[i] = (float)(i + 1);
    ge2_feed f[2] = {{n->x, x, ge2_shape1(N)}, {n->target, t, ge2_shape1(N)}};
    for (int s = 0; s < STEPS; s++) {
        API(ge2_program_step(n->prog, GE2_MODE_TRAIN, f, 2));
        API(ge2_program_read_output(n->prog, GE2_MODE_TRAIN, n->y, masks[s], sizeof(float) * N));
    }
}

START_TEST(train_steps_draw_fresh_masks_at_the_right_rate)
{
    static float a[STEPS][N], b[STEPS][N];
    net n1, n2;
    net_open(&n1, 7);
    net_open(&n2, 7);
    draw(&n1, a);
    draw(&n2, b);
    const float scale = (float)(1.0 / (1.0 - P));
    for (int s = 0; s < STEPS; s++) {
        int kept = 0;
        for (int i = 0; i < N; i++) {
            ck_assert_msg(a[s][i] == 0.0f || a[s][i] == (float)(i + 1) * scale, "step %d [%d] = %g", s, i,
                          (double)a[s][i]);
            kept += a[s][i] != 0.0f;
        }
        const double sd = sqrt(N * P * (1 - P));
        ck_assert_msg(fabs(kept - N * (1 - P)) < 4 * sd, "step %d kept %d of %d (p %g)", s, kept, N, P);
        /* one seed, one sequence of masks */
        ck_assert(memcmp(a[s], b[s], sizeof a[s]) == 0);
    }
    for (int s = 1; s < STEPS; s++) {
        int same = 0;
        for (int i = 0; i < N; i++)
            same += (a[s][i] != 0.0f) == (a[0][i] != 0.0f);
        /* independent masks agree on a fraction p² + (1-p)² of the elements */
        ck_assert_msg(same < N * 0.7, "step %d's mask repeats step 0's (%d of %d agree)", s, same, N);
    }
    net_close(&n1);
    net_close(&n2);
}
END_TEST

START_TEST(eval_passes_x_through)
{
    net n;
    net_open(&n, 3);
    static float x[N], t[N], y[N];
    for (int i = 0; i < N; i++)
        x[i] = (float)i * 0.5f;
    ge2_feed f[2] = {{n.x, x, ge2_shape1(N)}, {n.target, t, ge2_shape1(N)}};
    API(ge2_program_step(n.prog, GE2_MODE_EVAL, f, 2));
    API(ge2_program_read_output(n.prog, GE2_MODE_EVAL, n.y, y, sizeof y));
    ck_assert(memcmp(x, y, sizeof x) == 0);
    net_close(&n);
}
END_TEST

/* r = x + dropout(x ⊙ w): the add_into rewrite gives the ADD to the
 * dropout (no ADD is left in the program's graph), whose eval step then
 * gives x + x exactly, and whose train step gives each element x + 0 or
 * x + x·scale, the two values the plain ops would. */
START_TEST(residual_dropout_adds_its_addend)
{
    ge2_context *ctx;
    ge2_graph *g;
    ge2_program *prog;
    ge2_tensor *x, *t, *w, *h, *r, *loss;
    API(ge2_context_new(GE2_DEVICE_CPU, &ctx));
    API(ge2_graph_new(&g));
    API(ge2_input(g, "x", GE2_F32, ge2_shape1(N), &x));
    API(ge2_label(g, "target", GE2_F32, ge2_shape1(N), &t));
    API(ge2_parameter(g, "w", GE2_F32, ge2_shape1(N), (ge2_init){GE2_INIT_CONSTANT, 1, 0, 0}, &w));
    API(ge2_mul(g, x, w, &h));
    API(ge2_dropout(g, h, P, &h));
    API(ge2_add(g, x, h, &r));
    API(ge2_mark_output(g, r));
    API(ge2_mse_loss(g, r, t, &loss));
    API(ge2_backward(g, loss));
    ge2_optimizer_config sgd = ge2_optimizer_defaults(GE2_OPT_SGD);
    sgd.lr = 1e-30;
    API(ge2_optimizer(g, &sgd));
    API(ge2_compile(ctx, g, NULL, &prog));
    const ge2_graph *pg = ge2_program_graph(prog);
    for (int n = 0; n < pg->n_nodes; n++)
        ck_assert_msg(pg->nodes[n].op != GE2_OP_ADD || pg->nodes[n].phase != GE2_PHASE_FORWARD,
                      "node %d: the residual add was not given to the dropout", n);
    static float xv[N], tv[N], y[N];
    for (int i = 0; i < N; i++)
        xv[i] = (float)(i % 97) * 0.37f - 11.0f;
    ge2_feed f[2] = {{x, xv, ge2_shape1(N)}, {t, tv, ge2_shape1(N)}};
    API(ge2_program_step(prog, GE2_MODE_EVAL, f, 2));
    API(ge2_program_read_output(prog, GE2_MODE_EVAL, r, y, sizeof y));
    for (int i = 0; i < N; i++)
        ck_assert_msg(y[i] == xv[i] + xv[i], "eval [%d]: %.9g, want %.9g", i, y[i], xv[i] + xv[i]);
    API(ge2_program_step(prog, GE2_MODE_TRAIN, f, 2));
    API(ge2_program_read_output(prog, GE2_MODE_TRAIN, r, y, sizeof y));
    const float scale = (float)(1.0 / (1.0 - P));
    int kept = 0;
    for (int i = 0; i < N; i++) {
        const float masked = xv[i] * scale, on = xv[i] + masked, off = xv[i] + 0.0f;
        ck_assert_msg(y[i] == on || y[i] == off, "train [%d]: %.9g, neither %.9g nor %.9g", i, y[i], on, off);
        kept += y[i] == on && on != off;
    }
    ck_assert_int_gt(kept, N / 2); /* 1 - P of them, about */
    ge2_program_free(prog);
    ge2_graph_free(g);
    ge2_context_free(ctx);
}
END_TEST

/* Per-parameter updates may run a backward after the last update moved the
 * random offset on: a graph with dropout takes the flat update (AUTO) and
 * refuses per-parameter (forced), saying why. */
START_TEST(dropout_graphs_take_the_flat_update)
{
    ge2_graph *g;
    ge2_tensor *x, *w, *h, *y, *t, *loss;
    API(ge2_graph_new(&g));
    API(ge2_input(g, "x", GE2_F32, ge2_shape2(4, 8), &x));
    API(ge2_label(g, "t", GE2_F32, ge2_shape2(4, 8), &t));
    API(ge2_parameter(g, "w", GE2_F32, ge2_shape2(8, 8), (ge2_init){GE2_INIT_UNIFORM, -1, 1, 0}, &w));
    API(ge2_linear(g, x, w, NULL, GE2_ACT_NONE, 0, &h));
    API(ge2_dropout(g, h, 0.5, &y));
    API(ge2_mse_loss(g, y, t, &loss));
    API(ge2_backward(g, loss));
    ge2_optimizer_config c = ge2_optimizer_defaults(GE2_OPT_SGD);
    c.update_mode = GE2_UPDATE_PER_PARAMETER;
    ck_assert_int_eq(ge2_optimizer(g, &c), GE2_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "random stream"));
    ge2_graph_free(g);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dropout");
    TCase *tc = tcase_create("dropout");
    tcase_add_test(tc, philox_matches_its_known_answers);
    tcase_add_test(tc, train_steps_draw_fresh_masks_at_the_right_rate);
    tcase_add_test(tc, eval_passes_x_through);
    tcase_add_test(tc, residual_dropout_adds_its_addend);
    tcase_add_test(tc, dropout_graphs_take_the_flat_update);
    suite_add_tcase(s, tc);
    return ge2_check_run(s);
}
