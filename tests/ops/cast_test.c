/* Cast through a compiled program on the CPU backend: the planner places a
 * bf16 tensor (2-byte elements) in the arena, and a train step's gradient
 * passes straight through the casts, rounded to bf16 where it crosses the
 * bf16 tensor, as autocast's does. Casts the op does not take are refused
 * naming the dtypes. (Forward values: the op table, against ge2_ref_bf16.) */
#include <check.h>
#include <math.h>
#include <string.h>

#include "ge2/ge2.h"
#include "tests/support/check_main.h"
#include "tests/support/reference.h"

#define API(call) ck_assert_msg((call) == GE2_OK, "%s: %s", #call, ge2_last_error())

enum { ROWS = 4, COLS = 5, N = ROWS * COLS };

/* x (a parameter) -> bf16 -> f32 -> mean squared error against t; one SGD
 * step at lr 1: x1 = x0 - dx, dx = bf16(2 (y - t) / N), y = bf16(x0). */
START_TEST(the_gradient_passes_straight_through)
{
    ge2_context *ctx;
    ge2_graph *g;
    ge2_program *p;
    ge2_tensor *x, *h, *y, *t, *loss;
    API(ge2_context_new(GE2_DEVICE_CPU, &ctx));
    API(ge2_graph_new(&g));
    API(ge2_graph_set_seed(g, 3));
    API(ge2_parameter(g, "x", GE2_F32, ge2_shape2(ROWS, COLS), (ge2_init){GE2_INIT_UNIFORM, -3, 3, 0}, &x));
    API(ge2_label(g, "t", GE2_F32, ge2_shape2(ROWS, COLS), &t));
    API(ge2_cast(g, x, GE2_BF16, &h));
    ck_assert_int_eq(ge2_tensor_dtype(h), GE2_BF16);
    API(ge2_cast(g, h, GE2_F32, &y));
    API(ge2_mse_loss(g, y, t, &loss));
    API(ge2_backward(g, loss));
    ge2_optimizer_config sgd = ge2_optimizer_defaults(GE2_OPT_SGD);
    sgd.lr = 1.0;
    API(ge2_optimizer(g, &sgd));
    API(ge2_compile(ctx, g, NULL, &p));
    float x0[N], x1[N], tv[N];
    API(ge2_program_get_parameter(p, x, x0, sizeof x0));
    for (int i = 0; i < N; i++)
        tv[i] = (float)(0.37 * i - 2.9);
    ge2_feed f = {t, tv, t->shape};
    API(ge2_program_step(p, GE2_MODE_TRAIN, &f, 1));
    API(ge2_program_sync(p));
    API(ge2_program_get_parameter(p, x, x1, sizeof x1));
    for (int i = 0; i < N; i++) {
        const double dy = 2.0 * (ge2_ref_bf16(x0[i]) - tv[i]) / N, dx = ge2_ref_bf16(dy);
        /* within a bf16 unit of dx: the f32 arithmetic may land dy on the other side of a rounding tie */
        ck_assert_msg(fabs((x0[i] - x1[i]) - dx) <= fabs(dx) * 0x1p-7 + 1e-7,
                      "x[%d]: moved by %.9g, the straight-through gradient is %.9g (x0 %.9g, t %.9g)", i,
                      (double)(x0[i] - x1[i]), dx, (double)x0[i], (double)tv[i]);
        ck_assert_msg(dx != 0, "x[%d]: a zero gradient tests nothing", i);
    }
    ge2_program_free(p);
    ge2_graph_free(g);
    ge2_context_free(ctx);
}
END_TEST

START_TEST(casts_it_does_not_take_are_refused)
{
    ge2_graph *g;
    ge2_tensor *i32, *f32, *y;
    API(ge2_graph_new(&g));
    API(ge2_input(g, "ids", GE2_I32, ge2_shape1(3), &i32));
    API(ge2_input(g, "x", GE2_F32, ge2_shape1(3), &f32));
    ck_assert_int_eq(ge2_cast(g, i32, GE2_BF16, &y), GE2_ERR_DTYPE);
    ck_assert_msg(strstr(ge2_last_error(), "cast") && strstr(ge2_last_error(), "x is i32, to bf16"), "%s",
                  ge2_last_error());
    ck_assert_int_eq(ge2_cast(g, f32, GE2_F64, &y), GE2_ERR_DTYPE);
    ck_assert_msg(strstr(ge2_last_error(), "x is f32, to f64"), "%s", ge2_last_error());
    ge2_graph_free(g);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cast");
    TCase *tc = tcase_create("cast");
    tcase_add_test(tc, the_gradient_passes_straight_through);
    tcase_add_test(tc, casts_it_does_not_take_are_refused);
    suite_add_tcase(s, tc);
    return ge2_check_run(s);
}
