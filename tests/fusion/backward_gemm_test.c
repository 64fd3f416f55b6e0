/* The backward_gemm rewrite (fusion/backward_gemm) on the plain LINEAR
 * backward autograd emits: a 3-layer MLP's train graph has the node count
 * the rewrite promises, still matches finite differences, and on the CPU
 * equals the plain graph within 1e-6 relative; the plain nodes stay where
 * the pattern does not hold. (tests/fusion/pattern_test runs the row
 * through ge2_compile like every other.) */
#include <check.h>
#include <math.h>
#include <stdlib.h>

#include "tests/support/check_main.h"
#include "check/gradients.h"
#include "check/naive.h"
#include "fusion/fusion.h"
#include "graph/verify.h"
#include "ops/ops.h"

enum { B = 5, IN = 6, H1 = 9, H2 = 7, C = 4 };

typedef struct mlp {
    ge2_graph *g;
    ge2_tensor *x, *labels, *params[6], *loss;
    double xv[B * IN];
    int32_t lv[B];
} mlp;

/* x -> linear(act1) -> h1 -> linear(act2) -> h2 -> linear -> cross-entropy.
 * With h1_twice, h1 also reaches the logits through a row sum, so h1's
 * gradient has two contributions and layer 2's dx stays a plain MATMUL. */
static void build(mlp *m, ge2_dtype dt, ge2_activation act1, ge2_activation act2, bool fuse, bool h1_twice)
{
    ck_assert_int_eq(ge2_graph_new(&m->g), GE2_OK);
    ge2_graph_set_seed(m->g, 7);
    static const int64_t dims[4] = {IN, H1, H2, C};
    ck_assert_int_eq(ge2_input(m->g, "x", dt, ge2_shape2(B, IN), &m->x), GE2_OK);
    ck_assert_int_eq(ge2_label(m->g, "labels", GE2_I32, ge2_shape1(B), &m->labels), GE2_OK);
    for (int l = 0; l < 3; l++) {
        char name[32];
        ge2_init w = {GE2_INIT_UNIFORM, -0.8, 0.8, 0}, b = {GE2_INIT_UNIFORM, -0.5, 0.5, 0};
        snprintf(name, sizeof name, "w%d", l);
        ck_assert_int_eq(ge2_parameter(m->g, name, dt, ge2_shape2(dims[l + 1], dims[l]), w, &m->params[2 * l]),
                         GE2_OK);
        snprintf(name, sizeof name, "b%d", l);
        ck_assert_int_eq(ge2_parameter(m->g, name, dt, ge2_shape1(dims[l + 1]), b, &m->params[2 * l + 1]), GE2_OK);
    }
    ge2_tensor *h1, *h2, *logits;
    ck_assert_int_eq(ge2_linear(m->g, m->x, m->params[0], m->params[1], act1, 0.1f, &h1), GE2_OK);
    ck_assert_int_eq(ge2_linear(m->g, h1, m->params[2], m->params[3], act2, 0.1f, &h2), GE2_OK);
    ck_assert_int_eq(ge2_linear(m->g, h2, m->params[4], m->params[5], GE2_ACT_NONE, 0, &logits), GE2_OK);
    if (h1_twice) {
        ge2_tensor *h1s;
        ck_assert_int_eq(ge2_sum(m->g, h1, 1, &h1s), GE2_OK); /* [B] */
        ck_assert_int_eq(ge2_reshape(m->g, h1s, ge2_shape2(B, 1), &h1s), GE2_OK);
        ck_assert_int_eq(ge2_add(m->g, logits, h1s, &logits), GE2_OK);
    }
    ck_assert_int_eq(ge2_cross_entropy(m->g, logits, m->labels, 0.0f, &m->loss), GE2_OK);
    ck_assert_int_eq(ge2_backward(m->g, m->loss), GE2_OK);
    if (fuse) {
        ge2_fusion_set every;
        ck_assert_int_eq(ge2_fusion_set_parse(NULL, &every), GE2_OK);
        ck_assert_msg(ge2_fusion_rewrite(m->g, every, NULL, NULL) == GE2_OK, "%s", ge2_last_error());
    }
    for (int i = 0; i < B * IN; i++)
        m->xv[i] = sin(0.9 * i + 0.2) * 1.5;
    for (int r = 0; r < B; r++)
        m->lv[r] = (r * 3 + 2) % C;
}

static int count_ops(const ge2_graph *g, ge2_op op)
{
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        n += g->nodes[i].op == op;
    return n;
}

static int backward_nodes(const ge2_graph *g)
{
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        n += g->nodes[i].phase == GE2_PHASE_BACKWARD;
    return n;
}

START_TEST(three_layer_mlp_backward_is_five_nodes)
{
    mlp m, plain;
    build(&m, GE2_F32, GE2_ACT_RELU, GE2_ACT_RELU, true, false);
    build(&plain, GE2_F32, GE2_ACT_RELU, GE2_ACT_RELU, false, false);
    /* layer 3: dW+db; layer 2: dx3 through relu' + db, dW; layer 1: the same; x wants none */
    ck_assert_int_eq(backward_nodes(m.g), 5);
    ck_assert_int_eq(count_ops(m.g, GE2_OP_LINEAR_GRAD_WEIGHT), 3);
    ck_assert_int_eq(count_ops(m.g, GE2_OP_LINEAR_GRAD_INPUT), 2);
    /* generic: 2 relu', 2 dx, 3 dW, 3 db */
    ck_assert_int_eq(backward_nodes(plain.g), 10);
    ck_assert_int_eq(count_ops(plain.g, GE2_OP_LINEAR_GRAD_INPUT) + count_ops(plain.g, GE2_OP_LINEAR_GRAD_WEIGHT), 0);
    ge2_graph_free(m.g);
    ge2_graph_free(plain.g);
}
END_TEST

static const ge2_activation acts[][2] = {
    {GE2_ACT_RELU, GE2_ACT_RELU},          {GE2_ACT_GELU_TANH, GE2_ACT_TANH},
    {GE2_ACT_SIGMOID, GE2_ACT_GELU_ERF},   {GE2_ACT_LEAKY_RELU, GE2_ACT_SILU},
    {GE2_ACT_NONE, GE2_ACT_RELU},
};
enum { N_ACTS = sizeof acts / sizeof acts[0] };

START_TEST(fused_mlp_matches_finite_differences)
{
    for (int twice = 0; twice < 2; twice++) {
        mlp m;
        build(&m, GE2_F64, acts[_i][0], acts[_i][1], true, twice);
        ck_assert_int_eq(count_ops(m.g, GE2_OP_LINEAR_GRAD_INPUT), twice ? 1 : 2);
        ge2_feed feeds[2] = {{m.x, m.xv, m.x->shape}, {m.labels, m.lv, m.labels->shape}};
        ge2_check_result r = ge2_grad_check(m.g, m.loss, feeds, 2, m.params, 6, 1e-7, 1e-5);
        ck_assert_msg(r.ok, "%s/%s%s: %s", ge2_activation_name(acts[_i][0]), ge2_activation_name(acts[_i][1]),
                      twice ? " (h1 read twice)" : "", r.message);
        ge2_graph_free(m.g);
    }
}
END_TEST

/* f32 on the CPU kernels: the fused graph's gradients equal the generic graph's within 1e-6 relative. */
START_TEST(fused_equals_unfused_on_cpu)
{
    mlp f, u;
    build(&f, GE2_F32, acts[_i][0], acts[_i][1], true, false);
    build(&u, GE2_F32, acts[_i][0], acts[_i][1], false, false);
    float x[B * IN];
    for (int i = 0; i < B * IN; i++)
        x[i] = (float)f.xv[i];
    ge2_feed ff[2] = {{f.x, x, f.x->shape}, {f.labels, f.lv, f.labels->shape}};
    ge2_feed uf[2] = {{u.x, x, u.x->shape}, {u.labels, u.lv, u.labels->shape}};
    ge2_naive *nf, *nu;
    ck_assert_int_eq(ge2_naive_run(f.g, ff, 2, &nf), GE2_OK);
    ck_assert_int_eq(ge2_naive_run(u.g, uf, 2, &nu), GE2_OK);
    for (int p = 0; p < 6; p++) {
        const float *gf = ge2_naive_data(nf, ge2_grad(f.params[p])), *gu = ge2_naive_data(nu, ge2_grad(u.params[p]));
        int64_t n = ge2_shape_numel(f.params[p]->shape);
        double scale = 0;
        for (int64_t i = 0; i < n; i++)
            scale = fmax(scale, fabs(gu[i]));
        for (int64_t i = 0; i < n; i++)
            ck_assert_msg(fabs(gf[i] - gu[i]) <= 1e-6 * scale, "%s/%s grad %s[%lld]: fused %.9g, generic %.9g",
                          ge2_activation_name(acts[_i][0]), ge2_activation_name(acts[_i][1]), f.params[p]->name,
                          (long long)i, (double)gf[i], (double)gu[i]);
    }
    ge2_naive_free(nf);
    ge2_naive_free(nu);
    ge2_graph_free(f.g);
    ge2_graph_free(u.g);
}
END_TEST

/* A LINEAR whose y is read elsewhere keeps the plain dx (a MATMUL) and its
 * activation derivative. */
START_TEST(generic_path_where_the_pattern_does_not_hold)
{
    mlp m;
    build(&m, GE2_F32, GE2_ACT_RELU, GE2_ACT_RELU, true, true);
    ck_assert_int_eq(count_ops(m.g, GE2_OP_LINEAR_GRAD_INPUT), 1); /* layer 3 into layer 2 only */
    ck_assert_int_eq(count_ops(m.g, GE2_OP_MATMUL), 1);            /* layer 2's dx */
    ck_assert_int_eq(count_ops(m.g, GE2_OP_ACTIVATION_BACKWARD), 1);
    ck_assert_ptr_nonnull(ge2_grad(m.params[1]));
    ge2_graph_free(m.g);
}
END_TEST

static void rewrite_all(ge2_graph *g)
{
    ge2_fusion_set every;
    ck_assert_int_eq(ge2_fusion_set_parse(NULL, &every), GE2_OK);
    ck_assert_msg(ge2_fusion_rewrite(g, every, NULL, NULL) == GE2_OK, "%s", ge2_last_error());
    ck_assert_msg(ge2_graph_verify(g) == GE2_OK, "%s", ge2_last_error());
}

/* x -> fc1 (relu) -> h1 -> fc(w) (tanh) -> h2 -> fc(w again) (relu) -> h3 -> head:
 * one weight in two layers still fuses every dx with the act' below it, and
 * w's gradient is the sum of its two LINEAR_GRAD_WEIGHTs. */
START_TEST(a_weight_used_twice_still_fuses)
{
    enum { H = 5 };
    ge2_graph *g;
    ge2_tensor *x, *labels, *w1, *w, *w4, *h, *loss;
    ck_assert_int_eq(ge2_graph_new(&g), GE2_OK);
    ge2_graph_set_seed(g, 3);
    ge2_init u = {GE2_INIT_UNIFORM, -0.7, 0.7, 0};
    ck_assert_int_eq(ge2_input(g, "x", GE2_F64, ge2_shape2(B, IN), &x), GE2_OK);
    ck_assert_int_eq(ge2_label(g, "labels", GE2_I32, ge2_shape1(B), &labels), GE2_OK);
    ck_assert_int_eq(ge2_parameter(g, "w1", GE2_F64, ge2_shape2(H, IN), u, &w1), GE2_OK);
    ck_assert_int_eq(ge2_parameter(g, "w", GE2_F64, ge2_shape2(H, H), u, &w), GE2_OK);
    ck_assert_int_eq(ge2_parameter(g, "w4", GE2_F64, ge2_shape2(C, H), u, &w4), GE2_OK);
    ck_assert_int_eq(ge2_linear(g, x, w1, NULL, GE2_ACT_RELU, 0, &h), GE2_OK);
    ck_assert_int_eq(ge2_linear(g, h, w, NULL, GE2_ACT_TANH, 0, &h), GE2_OK);
    ck_assert_int_eq(ge2_linear(g, h, w, NULL, GE2_ACT_RELU, 0, &h), GE2_OK);
    ck_assert_int_eq(ge2_linear(g, h, w4, NULL, GE2_ACT_NONE, 0, &h), GE2_OK);
    ck_assert_int_eq(ge2_cross_entropy(g, h, labels, 0.0f, &loss), GE2_OK);
    ck_assert_int_eq(ge2_backward(g, loss), GE2_OK);
    rewrite_all(g);
    ck_assert_int_eq(count_ops(g, GE2_OP_LINEAR_GRAD_INPUT), 3);
    ck_assert_int_eq(count_ops(g, GE2_OP_LINEAR_GRAD_WEIGHT), 4);
    ck_assert_int_eq(count_ops(g, GE2_OP_ACTIVATION_BACKWARD) + count_ops(g, GE2_OP_MATMUL), 0);
    double xv[B * IN];
    int32_t lv[B];
    for (int i = 0; i < B * IN; i++)
        xv[i] = cos(0.7 * i) * 1.2;
    for (int r = 0; r < B; r++)
        lv[r] = r % C;
    ge2_feed feeds[2] = {{x, xv, x->shape}, {labels, lv, labels->shape}};
    ge2_tensor *params[3] = {w1, w, w4};
    ge2_check_result r = ge2_grad_check(g, loss, feeds, 2, params, 3, 1e-7, 1e-5);
    ck_assert_msg(r.ok, "%s", r.message);
    ge2_graph_free(g);
}
END_TEST

/* A dx the user marked as an output keeps its meaning: that product and the
 * act' after it stay plain; layer 3's still fuses. */
START_TEST(a_marked_dx_stays_plain)
{
    mlp m;
    build(&m, GE2_F32, GE2_ACT_RELU, GE2_ACT_RELU, false, false);
    ge2_tensor *h1 = m.g->tensors[m.g->nodes[0].outputs[0]];
    ck_assert_ptr_nonnull(ge2_grad(h1));
    ck_assert_int_eq(ge2_mark_output(m.g, ge2_grad(h1)), GE2_OK);
    rewrite_all(m.g);
    ck_assert_int_eq(count_ops(m.g, GE2_OP_LINEAR_GRAD_INPUT), 1);
    ck_assert_int_eq(count_ops(m.g, GE2_OP_MATMUL), 1);
    ck_assert_int_eq(count_ops(m.g, GE2_OP_ACTIVATION_BACKWARD), 1);
    ck_assert_ptr_nonnull(ge2_grad(h1));
    ge2_graph_free(m.g);
}
END_TEST

/* Through ge2_compile: a program made with the row off runs the plain
 * nodes; compiling the graph again with it on fuses them in the graph
 * itself, and the first program then refuses to step rather than run
 * nodes that changed under it. */
START_TEST(compile_fuses_and_an_earlier_program_notices)
{
    mlp m;
    build(&m, GE2_F32, GE2_ACT_GELU_TANH, GE2_ACT_RELU, false, false);
    const int plain_nodes = m.g->n_nodes;
    ge2_context *ctx;
    ge2_program *plain, *fused;
    ck_assert_int_eq(ge2_context_new(GE2_DEVICE_CPU, &ctx), GE2_OK);
    ge2_compile_options o = ge2_compile_defaults();
    o.disable_fusions = "backward_gemm";
    ck_assert_msg(ge2_compile(ctx, m.g, &o, &plain) == GE2_OK, "%s", ge2_last_error());
    ck_assert_int_eq(m.g->n_nodes, plain_nodes);
    float x[B * IN];
    for (int i = 0; i < B * IN; i++)
        x[i] = (float)m.xv[i];
    ge2_feed feeds[2] = {{m.x, x, m.x->shape}, {m.labels, m.lv, m.labels->shape}};
    ck_assert_msg(ge2_program_step(plain, GE2_MODE_TRAIN, feeds, 2) == GE2_OK, "%s", ge2_last_error());
    ck_assert_msg(ge2_compile(ctx, m.g, NULL, &fused) == GE2_OK, "%s", ge2_last_error());
    ck_assert_int_eq(m.g->n_nodes, plain_nodes - 5); /* 2 act', 3 bias sums */
    ck_assert_msg(ge2_program_step(fused, GE2_MODE_TRAIN, feeds, 2) == GE2_OK, "%s", ge2_last_error());
    ck_assert_int_eq(ge2_program_step(plain, GE2_MODE_TRAIN, feeds, 2), GE2_ERR_STATE);
    ge2_program_free(plain);
    ge2_program_free(fused);
    ge2_context_free(ctx);
    ge2_graph_free(m.g);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("backward_gemm");
    TCase *tc = tcase_create("backward_gemm");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, three_layer_mlp_backward_is_five_nodes);
    tcase_add_loop_test(tc, fused_mlp_matches_finite_differences, 0, N_ACTS);
    tcase_add_loop_test(tc, fused_equals_unfused_on_cpu, 0, N_ACTS);
    tcase_add_test(tc, generic_path_where_the_pattern_does_not_hold);
    tcase_add_test(tc, a_weight_used_twice_still_fuses);
    tcase_add_test(tc, a_marked_dx_stays_plain);
    tcase_add_test(tc, compile_fuses_and_an_earlier_program_notices);
    suite_add_tcase(s, tc);
    return ge2_check_run(s);
}
