/* Autograd on composed graphs: accumulation over reuse, parameters shared by
 * several ops, required inputs, a scaled cross-entropy, concat/slice of one
 * tensor — each checked by central differences — and the structure the
 * planner relies on (who owns a parameter's gradient). */
#include <check.h>
#include <math.h>
#include <string.h>

#include "graph/verify.h"
#include "tests/support/check_main.h"
#include "check/gradients.h"
#include "ops/ops.h"

static ge2_graph *g;

static void setup(void)
{
    ck_assert_int_eq(ge2_graph_new(&g), GE2_OK);
    ge2_graph_set_seed(g, 11);
}

static void teardown(void) { ge2_graph_free(g); }

static ge2_tensor *param(const char *name, ge2_shape s)
{
    ge2_tensor *t;
    ck_assert_int_eq(ge2_parameter(g, name, GE2_F64, s, (ge2_init){GE2_INIT_UNIFORM, -1, 1, 0}, &t), GE2_OK);
    return t;
}

#define OK(call) ck_assert_msg((call) == GE2_OK, "%s: %s", #call, ge2_last_error())

static void expect_gradients(ge2_tensor *loss, const ge2_feed *feeds, int n_feeds, ge2_tensor *const *wrt, int n_wrt)
{
    OK(ge2_backward(g, loss));
    OK(ge2_graph_verify(g));
    ge2_check_result r = ge2_grad_check(g, loss, feeds, n_feeds, wrt, n_wrt, 1e-6, 1e-5);
    ck_assert_msg(r.ok, "%s", r.message);
    /* the figures a user reads: a difference and its bound, both >= 0 (the
     * margin worst_error is <= 0 when it passes) */
    ck_assert(r.worst_error <= 0 && r.worst_difference >= 0 && r.worst_bound >= 1e-6 &&
              r.worst_difference <= r.worst_bound);
}

START_TEST(reuse_accumulates)
{
    /* h used three times, w in two ops, x an input with require_grad */
    ge2_tensor *x, *w = param("w", ge2_shape2(3, 3)), *b = param("b", ge2_shape1(3)), *h, *u, *v, *s, *q, *t, *loss;
    OK(ge2_input(g, "x", GE2_F64, ge2_shape2(4, 3), &x));
    OK(ge2_require_grad(g, x));
    OK(ge2_linear(g, x, w, b, GE2_ACT_TANH, 0, &h));
    OK(ge2_mul(g, h, h, &u));
    OK(ge2_add(g, u, h, &v));
    OK(ge2_mean(g, v, 1, &s));
    OK(ge2_matmul(g, h, w, false, true, &q)); /* h wᵀ: w again */
    OK(ge2_sum(g, q, 0, &t));
    ge2_tensor *st, *tt, *a;
    OK(ge2_sum_all(g, s, &st));
    OK(ge2_sum_all(g, t, &tt));
    OK(ge2_sub(g, st, tt, &a));
    OK(ge2_mul(g, a, a, &loss));
    double xv[12];
    for (int i = 0; i < 12; i++)
        xv[i] = 0.1 * i - 0.5;
    ge2_feed f = {x, xv, x->shape};
    ge2_tensor *wrt[3] = {w, b, x};
    expect_gradients(loss, &f, 1, wrt, 3);
}
END_TEST

START_TEST(scaled_cross_entropy_and_log_softmax)
{
    /* loss = 3 * CE(z) + sum(log_softmax(z) * c): CE's backward is MUL(dlogits, dy), not the seed */
    ge2_tensor *x, *labels, *c, *w = param("w", ge2_shape2(5, 2)), *z, *ce, *ce3, *ls, *m, *ms, *loss;
    OK(ge2_input(g, "x", GE2_F64, ge2_shape2(3, 2), &x));
    OK(ge2_label(g, "labels", GE2_I32, ge2_shape1(3), &labels));
    double cv[15];
    for (int i = 0; i < 15; i++)
        cv[i] = (i % 4) * 0.25;
    OK(ge2_constant(g, "c", GE2_F64, ge2_shape2(3, 5), cv, &c));
    OK(ge2_linear(g, x, w, NULL, GE2_ACT_GELU_TANH, 0, &z));
    OK(ge2_cross_entropy(g, z, labels, 0.1f, &ce));
    OK(ge2_scale(g, ce, 3.0, &ce3));
    OK(ge2_log_softmax(g, z, &ls));
    OK(ge2_mul(g, ls, c, &m));
    OK(ge2_sum_all(g, m, &ms));
    OK(ge2_add(g, ce3, ms, &loss));
    double xv[6] = {0.5, -1, 2, 0.25, -0.75, 1};
    int32_t lv[3] = {4, 0, 2};
    ge2_feed f[2] = {{x, xv, x->shape}, {labels, lv, labels->shape}};
    expect_gradients(loss, f, 2, &w, 1);
    ck_assert_ptr_null(ge2_grad(c));
    ck_assert_ptr_null(ge2_grad(labels));
    ck_assert_ptr_null(ge2_grad(x));
}
END_TEST

START_TEST(concat_slice_reshape_transpose_of_one_tensor)
{
    ge2_tensor *p = param("p", ge2_shape2(2, 3)), *xs[3], *cat, *sl, *r, *tr, *sm, *e, *loss;
    xs[0] = p, xs[1] = p, xs[2] = p;
    OK(ge2_concat(g, xs, 3, 1, &cat));          /* [2, 9] */
    OK(ge2_slice(g, cat, 1, 2, 7, &sl));        /* [2, 5] overlaps two copies */
    OK(ge2_reshape(g, sl, ge2_shape2(5, -1), &r));
    OK(ge2_transpose(g, r, &tr));
    OK(ge2_softmax(g, tr, &sm));
    OK(ge2_mul(g, sm, tr, &e));
    OK(ge2_mean_all(g, e, &loss));
    expect_gradients(loss, NULL, 0, &p, 1);
}
END_TEST

static int count_backward(ge2_op op)
{
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        n += g->nodes[i].phase == GE2_PHASE_BACKWARD && g->nodes[i].op == op;
    return n;
}

/* Slices that tile their tensor's axis (q, k, v cut from one projection)
 * get one CONCAT as that tensor's gradient, in window order whatever the
 * order of the slices; windows that overlap or leave gaps keep a
 * SLICE_BACKWARD each. Both join the tensor's other gradients. */
START_TEST(windows_that_tile_become_one_concat)
{
    ge2_tensor *p = param("p", ge2_shape2(4, 9)), *w = param("w", ge2_shape2(9, 9)), *r = param("r", ge2_shape2(4, 6));
    ge2_tensor *h, *q, *k, *v, *a, *b, *c, *t, *u, *pp, *loss;
    OK(ge2_linear(g, p, w, NULL, GE2_ACT_TANH, 0, &h)); /* [4, 9], an activation: settled in the walk */
    OK(ge2_slice(g, h, 1, 3, 6, &k));
    OK(ge2_slice(g, h, 1, 0, 3, &q));
    OK(ge2_slice(g, h, 1, 6, 9, &v));
    OK(ge2_mul(g, q, k, &a));
    OK(ge2_mul(g, a, v, &b));
    OK(ge2_slice(g, p, 1, 0, 4, &c)); /* p's own windows: 0:4 and 4:9 tile it, and p has another use */
    OK(ge2_slice(g, p, 1, 4, 9, &t));
    OK(ge2_slice(g, r, 1, 0, 4, &u)); /* r's windows overlap: no concat */
    ge2_tensor *u2, *m1, *m2, *m3, *s1, *s2, *s3, *s4, *l1, *l2, *l3;
    OK(ge2_slice(g, r, 1, 2, 6, &u2));
    OK(ge2_mul(g, c, u, &m1));
    OK(ge2_mul(g, u2, u2, &m2));
    OK(ge2_mul(g, t, t, &m3));
    OK(ge2_mul(g, p, p, &pp));
    OK(ge2_sum_all(g, b, &s1));
    OK(ge2_sum_all(g, m1, &s2));
    OK(ge2_sum_all(g, m2, &s3));
    OK(ge2_sum_all(g, m3, &s4));
    OK(ge2_add(g, s1, s2, &l1));
    OK(ge2_add(g, l1, s3, &l2));
    OK(ge2_add(g, l2, s4, &l3));
    ge2_tensor *s5;
    OK(ge2_sum_all(g, pp, &s5));
    OK(ge2_add(g, l3, s5, &loss));
    ge2_tensor *wrt[3] = {p, w, r};
    expect_gradients(loss, NULL, 0, wrt, 3);
    ck_assert_int_eq(count_backward(GE2_OP_CONCAT), 2);         /* h's and p's */
    ck_assert_int_eq(count_backward(GE2_OP_SLICE_BACKWARD), 2); /* r's two */
}
END_TEST

START_TEST(mse_with_a_differentiated_target)
{
    ge2_tensor *a = param("a", ge2_shape2(2, 2)), *b = param("b", ge2_shape1(2)), *t, *loss;
    OK(ge2_activate(g, b, GE2_ACT_SILU, 0, &t));
    ge2_tensor *tb;
    OK(ge2_mul(g, t, a, &tb)); /* broadcast [2] against [2,2] */
    OK(ge2_mse_loss(g, a, tb, &loss));
    ge2_tensor *wrt[2] = {a, b};
    expect_gradients(loss, NULL, 0, wrt, 2);
}
END_TEST

/* The planner writes a parameter's gradient tensor straight into the gradient
 * pool: it must be made by a backward node, be that parameter's alone, and
 * say so in grad_of. */
START_TEST(each_parameter_owns_its_gradient_tensor)
{
    ge2_tensor *w1 = param("w1", ge2_shape1(3)), *w2 = param("w2", ge2_shape1(3)), *unused = param("unused", ge2_shape1(2));
    ge2_tensor *y, *loss;
    OK(ge2_add(g, w1, w2, &y)); /* both gradients are dy itself */
    OK(ge2_sum_all(g, y, &loss));
    OK(ge2_backward(g, loss));
    ge2_tensor *g1 = ge2_grad(w1), *g2 = ge2_grad(w2);
    ck_assert_ptr_nonnull(g1);
    ck_assert_ptr_nonnull(g2);
    ck_assert_ptr_ne(g1, g2);
    ck_assert_int_eq(g1->grad_of, w1->id);
    ck_assert_int_eq(g2->grad_of, w2->id);
    ck_assert_str_eq(g1->name, "grad/w1");
    ck_assert_int_eq(g->nodes[g1->producer].phase, GE2_PHASE_BACKWARD);
    ck_assert_int_eq(g->nodes[g2->producer].phase, GE2_PHASE_BACKWARD);
    ck_assert_ptr_null(ge2_grad(unused));
    ck_assert_int_eq(g->loss, loss->id);
    ck_assert(loss->is_output);
    OK(ge2_graph_verify(g));
}
END_TEST

START_TEST(a_parameter_used_as_logits_gets_a_copy_of_dlogits)
{
    ge2_tensor *w = param("w", ge2_shape2(2, 3)), *labels, *loss;
    OK(ge2_label(g, "labels", GE2_I32, ge2_shape1(2), &labels));
    OK(ge2_cross_entropy(g, w, labels, 0.0f, &loss));
    OK(ge2_backward(g, loss));
    const ge2_tensor *gw = ge2_grad(w);
    /* dlogits is a forward tensor (made with the loss); the pool needs a tensor of its own */
    ck_assert_int_eq(g->nodes[gw->producer].phase, GE2_PHASE_BACKWARD);
    ck_assert_int_eq(g->nodes[gw->producer].op, GE2_OP_SCALE);
    int32_t lv[2] = {2, 0};
    ge2_feed f = {labels, lv, labels->shape};
    ge2_check_result r = ge2_grad_check(g, loss, &f, 1, &w, 1, 1e-6, 1e-5);
    ck_assert_msg(r.ok, "%s", r.message);
}
END_TEST

/* A backward that fails part-way leaves the graph as it was. */
START_TEST(failed_backward_rolls_back)
{
    ge2_tensor *p = param("p", ge2_shape1(3)), *y, *loss, *ok_loss;
    int ids[2] = {p->id, p->id}, node;
    /* an op only the backward emits, used forward: it has no backward rule */
    OK(ge2_graph_add_node(g, GE2_OP_SOFTMAX_BACKWARD, GE2_PHASE_FORWARD, ids, 2, 1, NULL, &node));
    y = g->tensors[g->nodes[node].outputs[0]];
    OK(ge2_sum_all(g, y, &loss));
    OK(ge2_mean_all(g, p, &ok_loss));
    int n_nodes = g->n_nodes, n_tensors = g->n_tensors;
    ck_assert_int_eq(ge2_backward(g, loss), GE2_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "softmax_backward (node 0) has no backward rule"));
    ck_assert_int_eq(g->n_nodes, n_nodes);
    ck_assert_int_eq(g->n_tensors, n_tensors);
    ck_assert_int_eq(g->loss, -1);
    ck_assert(!loss->is_output);
    ck_assert_ptr_null(ge2_grad(p));
    OK(ge2_backward(g, ok_loss));
    ck_assert_ptr_nonnull(ge2_grad(p));
    OK(ge2_graph_verify(g));
}
END_TEST

/* The checker itself must be able to fail: a NaN gradient compares false
 * with everything, so a test written as "error > tolerance" would pass it. */
START_TEST(grad_check_rejects_nan)
{
    double err;
    ck_assert(ge2_grad_check_close(1.0, 1.0 + 1e-9, 1e-6, 1e-5, &err));
    ck_assert(!ge2_grad_check_close(1.0, 1.1, 1e-6, 1e-5, &err));
    ck_assert(!ge2_grad_check_close(NAN, 1.0, 1e-6, 1e-5, &err));
    ck_assert(isnan(err));
    ck_assert(!ge2_grad_check_close(1.0, NAN, 1e-6, 1e-5, &err));
    ck_assert(!ge2_grad_check_close(NAN, NAN, 1e-6, 1e-5, &err));

    /* end to end: d sum(w * x) / dw = x, and x holds a NaN (so does the loss,
     * hence every finite difference: w[0] already fails) */
    ge2_tensor *w = param("w", ge2_shape1(3)), *x, *y, *loss;
    OK(ge2_input(g, "x", GE2_F64, ge2_shape1(3), &x));
    OK(ge2_mul(g, w, x, &y));
    OK(ge2_sum_all(g, y, &loss));
    OK(ge2_backward(g, loss));
    double xv[3] = {0.5, NAN, -0.25};
    ge2_feed f = {x, xv, x->shape};
    ge2_check_result r = ge2_grad_check(g, loss, &f, 1, &w, 1, 1e-6, 1e-5);
    ck_assert(!r.ok);
    ck_assert(isnan(r.worst_error));
    ck_assert_msg(strstr(r.message, "w[0]") && strstr(r.message, "nan"), "%s", r.message);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("autograd");
    TCase *tc = tcase_create("autograd");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, reuse_accumulates);
    tcase_add_test(tc, scaled_cross_entropy_and_log_softmax);
    tcase_add_test(tc, concat_slice_reshape_transpose_of_one_tensor);
    tcase_add_test(tc, windows_that_tile_become_one_concat);
    tcase_add_test(tc, mse_with_a_differentiated_target);
    tcase_add_test(tc, each_parameter_owns_its_gradient_tensor);
    tcase_add_test(tc, a_parameter_used_as_logits_gets_a_copy_of_dlogits);
    tcase_add_test(tc, failed_backward_rolls_back);
    tcase_add_test(tc, grad_check_rejects_nan);
    suite_add_tcase(s, tc);
    return ge2_check_run(s);
}
