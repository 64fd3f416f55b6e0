/* DOT and summary output of a small trained graph. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ir.h"
#include "tests/support/check_main.h"

static char *capture(ge2_status (*fn)(const ge2_graph *, FILE *), const ge2_graph *g)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_int_eq(fn(g, f), GE2_OK);
    fclose(f);
    return buf;
}

static ge2_graph *mlp(void)
{
    ge2_graph *g;
    ge2_tensor *x, *l, *w1, *w2, *b2, *h, *y, *loss, *acc;
    ge2_init lin = {GE2_INIT_LINEAR_DEFAULT, 0, 0, 0}, bias = {GE2_INIT_LINEAR_DEFAULT, 0, 0, 16};
    ck_assert_int_eq(ge2_graph_new(&g), GE2_OK);
    ck_assert_int_eq(ge2_input(g, "x", GE2_F32, ge2_shape2(8, 12), &x), GE2_OK);
    ck_assert_int_eq(ge2_label(g, "y", GE2_I32, ge2_shape1(8), &l), GE2_OK);
    ck_assert_int_eq(ge2_parameter(g, "fc1.weight", GE2_F32, ge2_shape2(16, 12), lin, &w1), GE2_OK);
    ck_assert_int_eq(ge2_parameter(g, "fc2.weight", GE2_F32, ge2_shape2(10, 16), lin, &w2), GE2_OK);
    ck_assert_int_eq(ge2_parameter(g, "fc2.bias", GE2_F32, ge2_shape1(10), bias, &b2), GE2_OK);
    ck_assert_int_eq(ge2_linear(g, x, w1, NULL, GE2_ACT_GELU_TANH, 0, &h), GE2_OK);
    ck_assert_int_eq(ge2_linear(g, h, w2, b2, GE2_ACT_NONE, 0, &y), GE2_OK);
    ck_assert_int_eq(ge2_cross_entropy(g, y, l, 0.0f, &loss), GE2_OK);
    ck_assert_int_eq(ge2_accuracy(g, y, l, &acc), GE2_OK);
    ck_assert_int_eq(ge2_backward(g, loss), GE2_OK);
    return g;
}

START_TEST(dot_shows_ops_shapes_phases_and_parameters)
{
    ge2_graph *g = mlp();
    char *dot = capture(ge2_graph_dump_dot, g);
    ck_assert_ptr_nonnull(strstr(dot, "digraph ge2 {"));
    ck_assert_ptr_nonnull(strstr(dot, "label=\"linear\""));
    ck_assert_ptr_nonnull(strstr(dot, "fillcolor=lightblue, label=\"cross_entropy\""));
    ck_assert_ptr_nonnull(strstr(dot, "fillcolor=lightsalmon, label=\"activation_backward\""));
    ck_assert_ptr_nonnull(strstr(dot, "fc1.weight\\nf32 [16,12]\", style=filled, fillcolor=gold"));
    ck_assert_ptr_nonnull(strstr(dot, "grad/fc1.weight\\nf32 [16,12]"));
    ck_assert_ptr_nonnull(strstr(dot, "label=\"grad\""));
    ck_assert_ptr_nonnull(strstr(dot, "}\n"));
    free(dot);
    ge2_graph_free(g);
}
END_TEST

START_TEST(summary_counts_ops_and_parameters)
{
    ge2_graph *g = mlp();
    char *text = capture(ge2_graph_summary, g);
    ck_assert_ptr_nonnull(strstr(text, "linear                    2  (forward 2, backward 0, optimizer 0)"));
    /* the backward as autograd gives it (the fuse pass fuses it when compiling):
     * fc2's dx, dW and db, fc1's gelu' and dW */
    ck_assert_ptr_nonnull(strstr(text, "matmul                    3  (forward 0, backward 3, optimizer 0)"));
    ck_assert_ptr_nonnull(strstr(text, "sum                       1  (forward 0, backward 1, optimizer 0)"));
    ck_assert_ptr_nonnull(strstr(text, "activation_backward       1  (forward 0, backward 1, optimizer 0)"));
    ck_assert_ptr_nonnull(strstr(text, "fc2.bias"));
    ck_assert_ptr_nonnull(strstr(text, "[10,16]"));
    /* 16*12 + 10*16 + 10 */
    ck_assert_ptr_nonnull(strstr(text, "parameter count: 362\n"));
    free(text);
    ge2_graph_free(g);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("view");
    TCase *tc = tcase_create("view");
    tcase_add_test(tc, dot_shows_ops_shapes_phases_and_parameters);
    tcase_add_test(tc, summary_counts_ops_and_parameters);
    suite_add_tcase(s, tc);
    return ge2_check_run(s);
}
