/* The guards on what backward rules hand in, through the public extension
 * API as a user's op would meet them: a gradient of the wrong shape or
 * dtype, a tensor id that does not exist, and parameters the loss never
 * reaches. Each was accepted before: a [3,5] gradient of a [3,4] weight
 * wrote past its slot of the gradient pool into the next parameter's. */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ge2/extension.h"
#include "graph/ir.h" /* the node count, to see a refused backward leave none */
#include "tests/support/check_main.h"

#define OK(call) ck_assert_msg((call) == GE2_OK, "%s: %s", #call, ge2_last_error())

/* What the user's op "weighted"'s backward rule does wrong this time. */
typedef struct rule_plan {
    ge2_shape grad_shape; /* the shape of the gradient it makes for w */
    ge2_dtype grad_dtype;
    int target; /* -1: w, else the tensor id it hands the gradient to */
} rule_plan;
static rule_plan plan;

static ge2_op weighted_op = -1, make_grad_op = -1;

/* x, w -> x * w, one shape */
static ge2_status infer_weighted(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    (void)node;
    out[0] = (ge2_desc){in[0].dtype, in[0].shape, NULL};
    return GE2_OK;
}

/* dy -> a tensor of the shape and dtype in the attrs */
typedef struct make_grad_attrs {
    ge2_shape shape;
    ge2_dtype dtype;
} make_grad_attrs;

static ge2_status infer_make_grad(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    (void)in;
    const make_grad_attrs *a = ge2_node_attrs(node);
    out[0] = (ge2_desc){a->dtype, a->shape, NULL};
    return GE2_OK;
}

static ge2_status weighted_backward(ge2_autograd *ag, const ge2_node *node, const int *dy)
{
    int d, grad;
    ge2_status st = ge2_ag_dy_tensor(ag, dy[0], &d);
    make_grad_attrs a = {plan.grad_shape, plan.grad_dtype};
    if (st == GE2_OK)
        st = ge2_ag_emit_op(ag, make_grad_op, &d, 1, &a, sizeof a, 1, &grad);
    if (st == GE2_OK)
        st = ge2_ag_accumulate(ag, plan.target >= 0 ? plan.target : ge2_node_input(node, 1), grad);
    return st;
}

static ge2_status cpu_nothing(const ge2_launch *l)
{
    (void)l;
    return GE2_OK;
}

static const ge2_op_def weighted_def = {
    .name = "weighted",
    .min_inputs = 2,
    .max_inputs = 2,
    .max_outputs = 1,
    .infer = infer_weighted,
    .backward = weighted_backward,
    .cpu = cpu_nothing,
};

static const ge2_op_def make_grad_def = {
    .name = "make_grad",
    .min_inputs = 1,
    .max_inputs = 1,
    .max_outputs = 1,
    .infer = infer_make_grad,
    .cpu = cpu_nothing,
};

static ge2_graph *g;
static ge2_tensor *w, *other, *loss;

/* loss = sum(x * w) + sum(other): w [3,4] reaches the loss through the
 * user's op, other [3,24] through a built-in one. */
static void setup(void)
{
    OK(ge2_graph_new(&g));
    ge2_tensor *x, *y, *s1, *s2;
    const ge2_init uniform = {GE2_INIT_UNIFORM, -1, 1, 0};
    OK(ge2_input(g, "x", GE2_F32, ge2_shape2(3, 4), &x));
    OK(ge2_parameter(g, "w", GE2_F32, ge2_shape2(3, 4), uniform, &w));
    OK(ge2_parameter(g, "other", GE2_F32, ge2_shape2(3, 24), uniform, &other));
    ge2_tensor *in[2] = {x, w};
    OK(ge2_apply(g, weighted_op, in, 2, NULL, 0, 1, &y));
    OK(ge2_sum_all(g, y, &s1));
    OK(ge2_sum_all(g, other, &s2));
    OK(ge2_add(g, s1, s2, &loss));
    plan = (rule_plan){ge2_shape2(3, 4), GE2_F32, -1};
}

static void teardown(void) { ge2_graph_free(g); }

/* ge2_backward fails with status and a message holding each of want[]; the
 * graph is left without a backward. */
static void expect_refused(ge2_status status, const char *const *want, int n_want)
{
    int n_nodes = g->n_nodes;
    ck_assert_int_eq(ge2_backward(g, loss), status);
    for (int i = 0; i < n_want; i++)
        ck_assert_msg(strstr(ge2_last_error(), want[i]), "'%s' not in: %s", want[i], ge2_last_error());
    ck_assert_int_eq(g->n_nodes, n_nodes);
    ck_assert_ptr_null(ge2_grad(w));
}

START_TEST(the_right_gradient_is_taken)
{
    OK(ge2_backward(g, loss));
    ck_assert_ptr_nonnull(ge2_grad(w));
    ck_assert_ptr_nonnull(ge2_grad(other));
}
END_TEST

START_TEST(a_larger_gradient_is_refused)
{
    plan.grad_shape = ge2_shape2(3, 5);
    const char *want[] = {"ge2_ag_accumulate", "'w'", "[3,4]", "[3,5]"};
    expect_refused(GE2_ERR_SHAPE, want, 4);
}
END_TEST

START_TEST(a_smaller_gradient_is_refused)
{
    plan.grad_shape = ge2_shape2(3, 3);
    const char *want[] = {"'w'", "[3,4]", "[3,3]"};
    expect_refused(GE2_ERR_SHAPE, want, 3);
}
END_TEST

/* [3,24] would have spilled furthest: as many elements as 'other' has */
START_TEST(a_gradient_of_the_next_parameters_size_is_refused)
{
    plan.grad_shape = ge2_shape2(3, 24);
    const char *want[] = {"'w'", "[3,4]", "[3,24]"};
    expect_refused(GE2_ERR_SHAPE, want, 3);
}
END_TEST

START_TEST(a_gradient_of_another_dtype_is_refused)
{
    plan.grad_dtype = GE2_F64;
    const char *want[] = {"'w'", "f32", "f64"};
    expect_refused(GE2_ERR_DTYPE, want, 3);
}
END_TEST

START_TEST(a_tensor_id_that_does_not_exist_is_refused)
{
    plan.target = 12345;
    const char *want[] = {"ge2_ag_accumulate", "tensor 12345"};
    expect_refused(GE2_ERR_INVALID_ARGUMENT, want, 2);
}
END_TEST

/* A graph with a parameter the loss never reads: 'unused' [7]. */
static ge2_tensor *add_unused(void)
{
    ge2_tensor *u;
    OK(ge2_parameter(g, "unused", GE2_F32, ge2_shape1(7), (ge2_init){GE2_INIT_ZEROS, 0, 0, 0}, &u));
    return u;
}

/* Runs ge2_backward_with(o) with stderr in a file; what it wrote in out. */
static ge2_status backward_capturing_stderr(const ge2_backward_options *o, char *out, size_t size)
{
    FILE *f = tmpfile();
    ck_assert_ptr_nonnull(f);
    fflush(stderr);
    int saved = dup(fileno(stderr));
    dup2(fileno(f), fileno(stderr));
    ge2_status st = ge2_backward_with(g, loss, o);
    fflush(stderr);
    dup2(saved, fileno(stderr));
    close(saved);
    rewind(f);
    size_t n = fread(out, 1, size - 1, f);
    out[n] = '\0';
    fclose(f);
    return st;
}

START_TEST(an_unused_parameter_is_named_in_a_warning)
{
    ge2_tensor *u = add_unused();
    char err[1024];
    OK(backward_capturing_stderr(NULL, err, sizeof err));
    ck_assert_msg(strstr(err, "ge2: warning:") && strstr(err, "'unused'") && strstr(err, "1 parameter"), "%s", err);
    ck_assert_msg(!strstr(err, "'w'"), "%s", err);
    ck_assert_ptr_null(ge2_grad(u));
    ck_assert_ptr_nonnull(ge2_grad(w));
}
END_TEST

START_TEST(strictness_makes_an_unused_parameter_an_error)
{
    add_unused();
    ge2_backward_options o = {.unused_parameters = GE2_UNUSED_PARAMETERS_ERROR};
    int n_nodes = g->n_nodes;
    ck_assert_int_eq(ge2_backward_with(g, loss, &o), GE2_ERR_GRAPH);
    ck_assert_msg(strstr(ge2_last_error(), "'unused'"), "%s", ge2_last_error());
    ck_assert_int_eq(g->n_nodes, n_nodes);
}
END_TEST

START_TEST(allowing_unused_parameters_is_silent)
{
    add_unused();
    ge2_backward_options o = {.unused_parameters = GE2_UNUSED_PARAMETERS_ALLOW};
    char err[1024];
    OK(backward_capturing_stderr(&o, err, sizeof err));
    ck_assert_str_eq(err, "");
    o.unused_parameters = GE2_UNUSED_PARAMETERS_COUNT;
    ck_assert_int_eq(ge2_backward_with(g, loss, &o), GE2_ERR_INVALID_ARGUMENT);
}
END_TEST

int main(void)
{
    if (ge2_op_register(&weighted_def, &weighted_op) != GE2_OK ||
        ge2_op_register(&make_grad_def, &make_grad_op) != GE2_OK) {
        fprintf(stderr, "registering the test ops: %s\n", ge2_last_error());
        return 1;
    }
    Suite *s = suite_create("gradient_guard");
    TCase *tc = tcase_create("gradient_guard");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, the_right_gradient_is_taken);
    tcase_add_test(tc, a_larger_gradient_is_refused);
    tcase_add_test(tc, a_smaller_gradient_is_refused);
    tcase_add_test(tc, a_gradient_of_the_next_parameters_size_is_refused);
    tcase_add_test(tc, a_gradient_of_another_dtype_is_refused);
    tcase_add_test(tc, a_tensor_id_that_does_not_exist_is_refused);
    tcase_add_test(tc, an_unused_parameter_is_named_in_a_warning);
    tcase_add_test(tc, strictness_makes_an_unused_parameter_an_error);
    tcase_add_test(tc, allowing_unused_parameters_is_silent);
    suite_add_tcase(s, tc);
    return ge2_check_run(s);
}
