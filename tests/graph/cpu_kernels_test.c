/* Properties of the CPU kernels the planner relies on: outputs with NULL data
 * are skipped, elementwise ops may run in place, out-of-range labels fail
 * the step before anything is written. Values are checked against hand-computed numbers. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "ops/elementwise/elementwise.h"
#include "ops/linear/linear.h"
#include "ops/loss/loss.h"
#include "tests/support/check_main.h"
#include "check/naive.h"
#include "ops/ops.h"

static ge2_launch launch_of(const ge2_node *node)
{
    ge2_launch l;
    memset(&l, 0, sizeof l);
    l.node = node;
    l.n_in = node->n_inputs;
    l.n_out = node->n_outputs;
    return l;
}

static ge2_view view(void *data, ge2_dtype dt, ge2_shape s) { return (ge2_view){data, dt, s}; }

/* A label outside [0, C) fails the step naming the op, the row and the
 * value; nothing is written (the loss kept its old value before, with the
 * row skipped and the mean still divided by B). */
START_TEST(cross_entropy_refuses_out_of_range_labels)
{
    ge2_node node = {.op = GE2_OP_CROSS_ENTROPY, .n_inputs = 2, .n_outputs = 2, .id = 4};
    float logits[3 * 2] = {0, 0, 1, 1, 2, 0};
    int32_t labels[3] = {1, -7, 2}; /* row 1 below 0, row 2 past C */
    float loss = -1, dlogits[6];
    ge2_launch l = launch_of(&node);
    l.in[0] = view(logits, GE2_F32, ge2_shape2(3, 2));
    l.in[1] = view(labels, GE2_I32, ge2_shape1(3));
    l.out[0] = view(&loss, GE2_F32, ge2_shape0());
    l.out[1] = view(dlogits, GE2_F32, ge2_shape2(3, 2));
    ck_assert_int_eq(ge2_cpu_cross_entropy(&l), GE2_ERR_INVALID_ARGUMENT);
    ck_assert_str_eq(ge2_last_error(), "ge2_cross_entropy (node 4): labels[1] is -7, outside [0, 2)");
    ck_assert(loss == -1);
    labels[1] = 0;
    ck_assert_int_eq(ge2_cpu_cross_entropy(&l), GE2_ERR_INVALID_ARGUMENT);
    ck_assert_str_eq(ge2_last_error(), "ge2_cross_entropy (node 4): labels[2] is 2, outside [0, 2)");

    ge2_node acc = {.op = GE2_OP_ACCURACY, .n_inputs = 2, .n_outputs = 1, .id = 5};
    float correct = -1;
    ge2_launch la = launch_of(&acc);
    la.in[0] = l.in[0], la.in[1] = l.in[1];
    la.out[0] = view(&correct, GE2_F32, ge2_shape0());
    ck_assert_int_eq(ge2_cpu_accuracy(&la), GE2_ERR_INVALID_ARGUMENT);
    ck_assert_str_eq(ge2_last_error(), "ge2_accuracy (node 5): labels[2] is 2, outside [0, 2)");
    ck_assert(correct == -1);

    /* in range: every row counts, the mean divides by B = 3 */
    labels[2] = 1;
    ck_assert_int_eq(ge2_cpu_cross_entropy(&l), GE2_OK);
    const double want = (log(2.0) + log(2.0) + log(1 + exp(2.0))) / 3; /* -log p_label of each row */
    ck_assert_float_eq_tol(loss, (float)want, 1e-6f);
    ck_assert_int_eq(ge2_cpu_accuracy(&la), GE2_OK);
    ck_assert(correct == 1.0f); /* argmaxes 0 (first of a tie), 0, 0 against labels 1, 0, 1: row 1 */
}
END_TEST

START_TEST(null_outputs_are_not_written)
{
    /* cross-entropy in eval: the planner gives dlogits no memory */
    ge2_node node = {.op = GE2_OP_CROSS_ENTROPY, .n_inputs = 2, .n_outputs = 2};
    float logits[2] = {3, 1}, loss = 0;
    int32_t label = 0;
    ge2_launch l = launch_of(&node);
    l.in[0] = view(logits, GE2_F32, ge2_shape2(1, 2));
    l.in[1] = view(&label, GE2_I32, ge2_shape1(1));
    l.out[0] = view(&loss, GE2_F32, ge2_shape0());
    l.out[1] = view(NULL, GE2_F32, ge2_shape2(1, 2));
    ck_assert_int_eq(ge2_cpu_cross_entropy(&l), GE2_OK);
    ck_assert_float_eq_tol(loss, (float)log(1 + exp(-2.0)), 1e-6f);

    /* linear with a z-stash: y unused, z still right; and the other way round */
    ge2_node lin = {.op = GE2_OP_LINEAR, .n_inputs = 3, .n_outputs = 2};
    GE2_ATTRS(ge2_linear_attrs, lin.attrs)->act = GE2_ACT_GELU_ERF;
    float x[2] = {1, 2}, w[2] = {3, -1}, b[1] = {0.5f}, y = 7, z = 7;
    ge2_launch ll = launch_of(&lin);
    ll.in[0] = view(x, GE2_F32, ge2_shape2(1, 2));
    ll.in[1] = view(w, GE2_F32, ge2_shape2(1, 2));
    ll.in[2] = view(b, GE2_F32, ge2_shape1(1));
    ll.out[0] = view(NULL, GE2_F32, ge2_shape2(1, 1));
    ll.out[1] = view(&z, GE2_F32, ge2_shape2(1, 1));
    ck_assert_int_eq(ge2_cpu_linear(&ll), GE2_OK);
    ck_assert_float_eq_tol(z, 1.5f, 1e-6f);
    ll.out[0] = view(&y, GE2_F32, ge2_shape2(1, 1));
    ll.out[1] = view(NULL, GE2_F32, ge2_shape2(1, 1));
    ck_assert_int_eq(ge2_cpu_linear(&ll), GE2_OK);
    ck_assert_float_eq_tol(y, (float)(0.75 * (1 + erf(1.5 / sqrt(2)))), 1e-6f);
}
END_TEST

START_TEST(elementwise_ops_run_in_place)
{
    /* out aliases input 0, as the planner arranges when input 0 dies at the op */
    float a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {10, 20, 30};
    ge2_node add = {.op = GE2_OP_SUB, .n_inputs = 2, .n_outputs = 1};
    ge2_launch l = launch_of(&add);
    l.in[0] = view(a, GE2_F32, ge2_shape2(2, 3));
    l.in[1] = view(b, GE2_F32, ge2_shape1(3));
    l.out[0] = view(a, GE2_F32, ge2_shape2(2, 3));
    ck_assert_int_eq(ge2_cpu_binary(&l), GE2_OK);
    const float want[6] = {-9, -18, -27, -6, -15, -24};
    for (int i = 0; i < 6; i++)
        ck_assert(a[i] == want[i]);

    float dy[3] = {1, 1, 1}, s[3] = {-1, 0.5f, 2};
    ge2_node ab = {.op = GE2_OP_ACTIVATION_BACKWARD, .n_inputs = 2, .n_outputs = 1};
    GE2_ATTRS(ge2_act_attrs, ab.attrs)->act = GE2_ACT_LEAKY_RELU;
    GE2_ATTRS(ge2_act_attrs, ab.attrs)->slope = 0.25f;
    ge2_launch lb = launch_of(&ab);
    lb.in[0] = view(dy, GE2_F32, ge2_shape1(3));
    lb.in[1] = view(s, GE2_F32, ge2_shape1(3));
    lb.out[0] = view(dy, GE2_F32, ge2_shape1(3));
    ck_assert_int_eq(ge2_cpu_activation_backward(&lb), GE2_OK);
    ck_assert(dy[0] == 0.25f && dy[1] == 1.0f && dy[2] == 1.0f);
}
END_TEST

START_TEST(unsupported_dtype_is_an_error_not_a_crash)
{
    ge2_node node = {.op = GE2_OP_SCALE, .n_inputs = 1, .n_outputs = 1};
    uint16_t h[2] = {0, 0};
    ge2_launch l = launch_of(&node);
    l.in[0] = view(h, GE2_BF16, ge2_shape1(2));
    l.out[0] = view(h, GE2_BF16, ge2_shape1(2));
    ck_assert_int_eq(ge2_cpu_scale(&l), GE2_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "ge2_scale: the CPU kernel has no bf16 version"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cpu_kernels");
    TCase *tc = tcase_create("cpu_kernels");
    tcase_add_test(tc, cross_entropy_refuses_out_of_range_labels);
    tcase_add_test(tc, null_outputs_are_not_written);
    tcase_add_test(tc, elementwise_ops_run_in_place);
    tcase_add_test(tc, unsupported_dtype_is_an_error_not_a_crash);
    suite_add_tcase(s, tc);
    return ge2_check_run(s);
}
