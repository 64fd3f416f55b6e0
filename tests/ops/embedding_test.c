/* Embedding through a compiled program on the CPU backend: a step with an
 * id outside the table fails with the op, the position and the id; a tied
 * table (the GPT's token embedding and LM head) gets one summed gradient
 * that matches central differences in float64. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "check/gradients.h"
#include "ge2/ge2.h"
#include "tests/support/check_main.h"

#define API(call) ck_assert_msg((call) == GE2_OK, "%s: %s", #call, ge2_last_error())

enum { V = 5, C = 3, T = 4 };

START_TEST(an_id_outside_the_table_is_an_error)
{
    ge2_context *ctx;
    ge2_graph *g;
    ge2_program *p;
    ge2_tensor *ids, *table, *y, *target, *loss;
    API(ge2_context_new(GE2_DEVICE_CPU, &ctx));
    API(ge2_graph_new(&g));
    API(ge2_input(g, "ids", GE2_I32, ge2_shape1(T), &ids));
    API(ge2_label(g, "target", GE2_F32, ge2_shape2(T, C), &target));
    API(ge2_parameter(g, "wte", GE2_F32, ge2_shape2(V, C), (ge2_init){GE2_INIT_NORMAL, 0, 0.02, 0}, &table));
    API(ge2_embedding(g, ids, table, &y));
    API(ge2_mse_loss(g, y, target, &loss));
    API(ge2_backward(g, loss));
    ge2_optimizer_config sgd = ge2_optimizer_defaults(GE2_OPT_SGD);
    API(ge2_optimizer(g, &sgd));
    API(ge2_compile(ctx, g, NULL, &p));
    int32_t good[T] = {0, 4, 4, 1}, bad[T] = {0, 4, 5, 1};
    float tv[T * C] = {0};
    ge2_feed f[2] = {{ids, good, ids->shape}, {target, tv, target->shape}};
    API(ge2_program_step(p, GE2_MODE_TRAIN, f, 2));
    f[0].data = bad;
    ck_assert_int_eq(ge2_program_step(p, GE2_MODE_TRAIN, f, 2), GE2_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(ge2_last_error(), "embedding") && strstr(ge2_last_error(), "ids[2] is 5") &&
                      strstr(ge2_last_error(), "outside [0, 5)"),
                  "%s", ge2_last_error());
    ge2_program_free(p);
    ge2_graph_free(g);
    ge2_context_free(ctx);
}
END_TEST

/* logits = embed(ids) · wteᵀ, the same wte in both: its gradient is the sum
 * of the embedding's and the product's. */
START_TEST(a_tied_table_gets_one_summed_gradient)
{
    ge2_graph *g;
    ge2_tensor *ids, *labels, *wte, *h, *logits, *loss;
    API(ge2_graph_new(&g));
    API(ge2_graph_set_seed(g, 9));
    API(ge2_input(g, "ids", GE2_I32, ge2_shape1(T), &ids));
    API(ge2_label(g, "labels", GE2_I32, ge2_shape1(T), &labels));
    API(ge2_parameter(g, "wte", GE2_F64, ge2_shape2(V, C), (ge2_init){GE2_INIT_UNIFORM, -1, 1, 0}, &wte));
    API(ge2_embedding(g, ids, wte, &h));
    API(ge2_matmul(g, h, wte, false, true, &logits)); /* [T, C] · [V, C]ᵀ */
    API(ge2_cross_entropy(g, logits, labels, 0.0f, &loss));
    API(ge2_backward(g, loss));
    int32_t iv[T] = {3, 0, 3, 2}, lv[T] = {1, 3, 4, 0};
    ge2_feed f[2] = {{ids, iv, ids->shape}, {labels, lv, labels->shape}};
    ge2_check_result r = ge2_grad_check(g, loss, f, 2, &wte, 1, 1e-7, 1e-6);
    ck_assert_msg(r.ok, "%s", r.message);
    ge2_graph_free(g);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("embedding");
    TCase *tc = tcase_create("embedding");
    tcase_add_test(tc, an_id_outside_the_table_is_an_error);
    tcase_add_test(tc, a_tied_table_gets_one_summed_gradient);
    suite_add_tcase(s, tc);
    return ge2_check_run(s);
}
