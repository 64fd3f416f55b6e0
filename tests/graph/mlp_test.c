/* A two-layer MLP's gradients against hand-derived formulas, and the same
 * graph specialized to another batch size against one built at that size. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/init.h"
#include "tests/support/reference.h"
#include "check/naive.h"
#include "tests/support/check_main.h"
#include "ops/ops.h"

enum { B = 6, IN = 5, H = 7, C = 4 };

typedef struct mlp {
    ge2_graph *g;
    ge2_tensor *x, *labels, *w1, *b1, *w2, *b2, *loss;
} mlp;

static void build(mlp *m, int batch, ge2_activation act)
{
    ck_assert_int_eq(ge2_graph_new(&m->g), GE2_OK);
    ge2_graph_set_seed(m->g, 42);
    ge2_init lin = {GE2_INIT_LINEAR_DEFAULT, 0, 0, 0}, bias1 = {GE2_INIT_LINEAR_DEFAULT, 0, 0, IN},
             bias2 = {GE2_INIT_LINEAR_DEFAULT, 0, 0, H};
    ge2_tensor *h, *logits;
    ck_assert_int_eq(ge2_input(m->g, "x", GE2_F32, ge2_shape2(batch, IN), &m->x), GE2_OK);
    ck_assert_int_eq(ge2_label(m->g, "labels", GE2_I32, ge2_shape1(batch), &m->labels), GE2_OK);
    ck_assert_int_eq(ge2_parameter(m->g, "w1", GE2_F32, ge2_shape2(H, IN), lin, &m->w1), GE2_OK);
    ck_assert_int_eq(ge2_parameter(m->g, "b1", GE2_F32, ge2_shape1(H), bias1, &m->b1), GE2_OK);
    ck_assert_int_eq(ge2_parameter(m->g, "w2", GE2_F32, ge2_shape2(C, H), lin, &m->w2), GE2_OK);
    ck_assert_int_eq(ge2_parameter(m->g, "b2", GE2_F32, ge2_shape1(C), bias2, &m->b2), GE2_OK);
    ck_assert_int_eq(ge2_linear(m->g, m->x, m->w1, m->b1, act, 0, &h), GE2_OK);
    ck_assert_int_eq(ge2_linear(m->g, h, m->w2, m->b2, GE2_ACT_NONE, 0, &logits), GE2_OK);
    ck_assert_int_eq(ge2_cross_entropy(m->g, logits, m->labels, 0.0f, &m->loss), GE2_OK);
    ck_assert_int_eq(ge2_backward(m->g, m->loss), GE2_OK);
}

static void make_batch(int batch, float *x, int32_t *labels)
{
    for (int i = 0; i < batch * IN; i++)
        x[i] = (float)sin(1.7 * i + 0.3);
    for (int r = 0; r < batch; r++)
        labels[r] = (r * 3 + 1) % C;
}

/* d act / dz, derived by hand */
static double act_grad(ge2_activation act, double z)
{
    switch (act) {
    case GE2_ACT_RELU:
        return z > 0;
    case GE2_ACT_TANH:
        return 1 - tanh(z) * tanh(z);
    case GE2_ACT_GELU_ERF: /* Phi(z) + z phi(z) */
        return 0.5 * (1 + erf(z / sqrt(2))) + z * exp(-z * z / 2) / sqrt(2 * M_PI);
    default:
        ck_abort_msg("no hand-derived gradient for this activation");
        return 0;
    }
}

static void check_close(const char *what, const float *got, const double *want, int n)
{
    for (int i = 0; i < n; i++)
        ck_assert_msg(fabs(got[i] - want[i]) <= 1e-6 + 1e-4 * fabs(want[i]), "%s[%d]: got %.8g, hand-derived %.8g",
                      what, i, (double)got[i], want[i]);
}

static void check_mlp(ge2_activation act)
{
    mlp m;
    build(&m, B, act);
    float x[B * IN];
    int32_t labels[B];
    make_batch(B, x, labels);
    ge2_feed feeds[2] = {{m.x, x, m.x->shape}, {m.labels, labels, m.labels->shape}};
    ge2_naive *n;
    ck_assert_int_eq(ge2_naive_run(m.g, feeds, 2, &n), GE2_OK);
    const float *w1 = ge2_naive_data(n, m.w1), *b1 = ge2_naive_data(n, m.b1), *w2 = ge2_naive_data(n, m.w2),
                *b2 = ge2_naive_data(n, m.b2);

    /* forward by hand */
    double z1[B][H], a1[B][H], p[B][C], loss = 0;
    for (int r = 0; r < B; r++) {
        for (int j = 0; j < H; j++) {
            z1[r][j] = b1[j];
            for (int k = 0; k < IN; k++)
                z1[r][j] += (double)x[r * IN + k] * w1[j * IN + k];
            a1[r][j] = ge2_ref_act(act, z1[r][j], 0);
        }
        double mx = -INFINITY, s = 0;
        for (int c = 0; c < C; c++) {
            p[r][c] = b2[c];
            for (int j = 0; j < H; j++)
                p[r][c] += a1[r][j] * w2[c * H + j];
            mx = fmax(mx, p[r][c]);
        }
        for (int c = 0; c < C; c++)
            s += exp(p[r][c] - mx);
        loss += (log(s) + mx - p[r][labels[r]]) / B;
        for (int c = 0; c < C; c++)
            p[r][c] = exp(p[r][c] - mx) / s;
    }
    ck_assert_msg(fabs(*(float *)ge2_naive_data(n, m.loss) - loss) < 1e-5, "loss %g vs %g",
                  (double)*(float *)ge2_naive_data(n, m.loss), loss);

    /* backward by hand: dz2 = (p - onehot) / B, dW2 = dz2ᵀ a1, db2 = Σ dz2,
     * da1 = dz2 W2, dz1 = da1 ⊙ act'(z1), dW1 = dz1ᵀ x, db1 = Σ dz1 */
    double dz2[B][C], dz1[B][H], dw2[C * H] = {0}, db2[C] = {0}, dw1[H * IN] = {0}, db1[H] = {0};
    for (int r = 0; r < B; r++)
        for (int c = 0; c < C; c++) {
            dz2[r][c] = (p[r][c] - (c == labels[r])) / B;
            db2[c] += dz2[r][c];
            for (int j = 0; j < H; j++)
                dw2[c * H + j] += dz2[r][c] * a1[r][j];
        }
    for (int r = 0; r < B; r++)
        for (int j = 0; j < H; j++) {
            double da = 0;
            for (int c = 0; c < C; c++)
                da += dz2[r][c] * w2[c * H + j];
            dz1[r][j] = da * act_grad(act, z1[r][j]);
            db1[j] += dz1[r][j];
            for (int k = 0; k < IN; k++)
                dw1[j * IN + k] += dz1[r][j] * x[r * IN + k];
        }
    check_close("dW1", ge2_naive_data(n, ge2_grad(m.w1)), dw1, H * IN);
    check_close("db1", ge2_naive_data(n, ge2_grad(m.b1)), db1, H);
    check_close("dW2", ge2_naive_data(n, ge2_grad(m.w2)), dw2, C * H);
    check_close("db2", ge2_naive_data(n, ge2_grad(m.b2)), db2, C);
    ck_assert_ptr_null(ge2_grad(m.x));
    ck_assert_ptr_null(ge2_grad(m.labels));
    ge2_naive_free(n);
    ge2_graph_free(m.g);
}

START_TEST(mlp_relu_gradients_match_hand_derivation) { check_mlp(GE2_ACT_RELU); }
END_TEST
START_TEST(mlp_tanh_gradients_match_hand_derivation) { check_mlp(GE2_ACT_TANH); }
END_TEST
/* gelu needs the pre-activation: the Z-stash path */
START_TEST(mlp_gelu_gradients_match_hand_derivation) { check_mlp(GE2_ACT_GELU_ERF); }
END_TEST

/* The loss seed stays implicit: cross-entropy's own dlogits is the gradient, no ones tensor, no MUL. */
START_TEST(cross_entropy_seed_is_implicit)
{
    mlp m;
    build(&m, B, GE2_ACT_RELU);
    ck_assert_ptr_null(ge2_graph_find(m.g, "ge2_grad_seed"));
    int backward_nodes = 0;
    for (int i = 0; i < m.g->n_nodes; i++) {
        ck_assert(!(m.g->nodes[i].phase == GE2_PHASE_BACKWARD && m.g->nodes[i].op == GE2_OP_MUL));
        backward_nodes += m.g->nodes[i].phase == GE2_PHASE_BACKWARD;
    }
    /* layer 2: dx, dW, db; layer 1: relu', dW, db; no dx: x is an input
     * without require_grad (the fuse pass makes these 3 nodes when compiling:
     * tests/fusion/backward_gemm_test) */
    ck_assert_int_eq(backward_nodes, 6);
    ck_assert(m.loss->is_output);
    ge2_graph_free(m.g);
}
END_TEST

/* Built at batch 8, run at batch 3, must equal the graph built at batch 3:
 * every batch-dependent count (mean, cross-entropy's 1/B) follows the feed. */
START_TEST(specialized_batch_matches_graph_built_at_that_batch)
{
    enum { SMALL = 3 };
    mlp big, small;
    build(&big, 8, GE2_ACT_GELU_TANH);
    build(&small, SMALL, GE2_ACT_GELU_TANH);
    float x[SMALL * IN];
    int32_t labels[SMALL];
    make_batch(SMALL, x, labels);
    ge2_naive *nb, *ns;
    ge2_feed fb[2] = {{big.x, x, ge2_shape2(SMALL, IN)}, {big.labels, labels, ge2_shape1(SMALL)}};
    ge2_feed fs[2] = {{small.x, x, ge2_shape2(SMALL, IN)}, {small.labels, labels, ge2_shape1(SMALL)}};
    ck_assert_int_eq(ge2_naive_run(big.g, fb, 2, &nb), GE2_OK);
    ck_assert_int_eq(ge2_naive_run(small.g, fs, 2, &ns), GE2_OK);
    ck_assert_int_eq(big.g->n_tensors, small.g->n_tensors);
    for (int i = 0; i < big.g->n_tensors; i++) {
        const ge2_tensor *t = big.g->tensors[i];
        ck_assert_msg(ge2_shape_numel(nb->shape[i]) == ge2_shape_numel(ns->shape[i]), "'%s' shape differs", t->name);
        size_t bytes = (size_t)ge2_shape_numel(ns->shape[i]) * ge2_dtype_size(t->dtype);
        ck_assert_msg(memcmp(nb->data[i], ns->data[i], bytes) == 0, "'%s' differs bitwise", t->name);
    }
    ge2_naive_free(nb);
    ge2_naive_free(ns);
    ge2_graph_free(big.g);
    ge2_graph_free(small.g);
}
END_TEST

/* MSE backward (EXPAND's mean factor) under specialization: d/dw of mean((x w^T - t)^2) at batch 2 of a batch-5 graph. */
START_TEST(mse_mean_gradient_follows_the_batch)
{
    ge2_graph *g;
    ge2_tensor *x, *t, *w, *y, *loss;
    ck_assert_int_eq(ge2_graph_new(&g), GE2_OK);
    ck_assert_int_eq(ge2_input(g, "x", GE2_F64, ge2_shape2(5, 2), &x), GE2_OK);
    ck_assert_int_eq(ge2_label(g, "t", GE2_F64, ge2_shape2(5, 1), &t), GE2_OK);
    ck_assert_int_eq(ge2_parameter(g, "w", GE2_F64, ge2_shape2(1, 2), (ge2_init){GE2_INIT_CONSTANT, 0.5, 0, 0}, &w),
                     GE2_OK);
    ck_assert_int_eq(ge2_linear(g, x, w, NULL, GE2_ACT_NONE, 0, &y), GE2_OK);
    ck_assert_int_eq(ge2_mse_loss(g, y, t, &loss), GE2_OK);
    ck_assert_int_eq(ge2_backward(g, loss), GE2_OK);
    double xv[4] = {1, 2, -1, 3}, tv[2] = {0.25, -2};
    ge2_feed f[2] = {{x, xv, ge2_shape2(2, 2)}, {t, tv, ge2_shape2(2, 1)}};
    ge2_naive *n;
    ck_assert_int_eq(ge2_naive_run(g, f, 2, &n), GE2_OK);
    /* y = 0.5 (x0 + x1): rows 1.5 and 1.0; residuals 1.25 and 3.0; dL/dw_k = (2/2) Σ r_i x_ik */
    const double *dw = ge2_naive_data(n, ge2_grad(w));
    ck_assert_double_eq_tol(dw[0], 1.25 * 1 + 3.0 * -1, 1e-12);
    ck_assert_double_eq_tol(dw[1], 1.25 * 2 + 3.0 * 3, 1e-12);
    ck_assert_double_eq_tol(*(double *)ge2_naive_data(n, loss), (1.25 * 1.25 + 9.0) / 2, 1e-12);
    ge2_naive_free(n);
    ge2_graph_free(g);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("mlp");
    TCase *tc = tcase_create("mlp");
    tcase_add_test(tc, mlp_relu_gradients_match_hand_derivation);
    tcase_add_test(tc, mlp_tanh_gradients_match_hand_derivation);
    tcase_add_test(tc, mlp_gelu_gradients_match_hand_derivation);
    tcase_add_test(tc, cross_entropy_seed_is_implicit);
    tcase_add_test(tc, specialized_batch_matches_graph_built_at_that_batch);
    tcase_add_test(tc, mse_mean_gradient_follows_the_batch);
    suite_add_tcase(s, tc);
    return ge2_check_run(s);
}
