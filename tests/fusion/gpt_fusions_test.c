/* What the fuse pass makes of train_gpt's model (examples/gpt_model.h), read
 * from the compile's dump: at dropout 0 every layer norm whose input is a
 * residual add takes the add (fusion/add_layer_norm): the second norm of
 * each block, the first norm of every block after the first, and the
 * final norm, 2 × layers; the first block's first norm reads the
 * embeddings' broadcast sum and stays apart. With dropout, the residual adds
 * go into the dropouts (add_into) and the norms keep theirs. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/gpt_model.h"
#include "ge2/ge2.h"
#include "tests/support/check_main.h"

enum { LAYERS = 3 };

/* Lines of the compile's dump containing what */
static int compile_count(double dropout, const char *what)
{
    gpt_config cfg = {.n_layer = LAYERS, .n_head = 2, .n_embd = 32, .block_size = 16, .vocab = 50, .batch = 2,
                      .dropout = dropout, .padded_vocab = 64};
    gpt_model m;
    ck_assert_msg(gpt_build(&cfg, 1, &m) == GE2_OK, "%s", ge2_last_error());
    ge2_optimizer_config adamw = ge2_optimizer_defaults(GE2_OPT_ADAMW);
    ck_assert_msg(ge2_backward(m.graph, m.loss) == GE2_OK, "%s", ge2_last_error());
    ck_assert_msg(ge2_optimizer(m.graph, &adamw) == GE2_OK, "%s", ge2_last_error());
    char *text = NULL;
    size_t size = 0;
    FILE *dump = open_memstream(&text, &size);
    ck_assert(dump);
    ge2_context *ctx;
    ge2_program *prog;
    ck_assert_int_eq(ge2_context_new(GE2_DEVICE_CPU, &ctx), GE2_OK);
    ge2_compile_options o = ge2_compile_defaults();
    o.dump = dump;
    ck_assert_msg(ge2_compile(ctx, m.graph, &o, &prog) == GE2_OK, "%s", ge2_last_error());
    fclose(dump);
    int n = 0;
    for (const char *p = text; (p = strstr(p, what)); p += strlen(what))
        n++;
    free(text);
    ge2_program_free(prog);
    ge2_context_free(ctx);
    ge2_graph_free(m.graph);
    return n;
}

START_TEST(test_dropout_zero_fuses_every_residual_norm)
{
    ck_assert_int_eq(compile_count(0.0, "-> add_layer_norm"), 2 * LAYERS);
}
END_TEST

START_TEST(test_dropout_keeps_the_adds_in_the_dropouts)
{
    ck_assert_int_eq(compile_count(0.1, "-> add_layer_norm"), 0);
    /* both residual adds of every block, as add_into's op */
    ck_assert_int_eq(compile_count(0.1, "-> dropout_add adding"), 2 * LAYERS);
}
END_TEST

/* An eval step where nothing but the norm reads the residual sum (no
 * backward runs), so the fused op makes the sum in its y's place: its loss
 * equals the unfused graph's bit for bit, for both residual norms. */
static float eval_loss(bool rms, const char *disabled)
{
    enum { B = 12, IN = 8, C = 24 };
    ge2_graph *g;
    ge2_tensor *x, *labels, *w, *h, *act, *sum, *y, *loss;
    ck_assert_int_eq(ge2_graph_new(&g), GE2_OK);
    ck_assert_int_eq(ge2_input(g, "x", GE2_F32, ge2_shape2(B, IN), &x), GE2_OK);
    ck_assert_int_eq(ge2_label(g, "labels", GE2_I32, ge2_shape1(B), &labels), GE2_OK);
    ck_assert_int_eq(ge2_parameter(g, "w", GE2_F32, ge2_shape2(C, IN), (ge2_init){GE2_INIT_UNIFORM, -1, 1, 0}, &w),
                     GE2_OK);
    ck_assert_int_eq(ge2_linear(g, x, w, NULL, GE2_ACT_NONE, 0, &h), GE2_OK);
    ck_assert_int_eq(ge2_activate(g, h, GE2_ACT_GELU_TANH, 0.0f, &act), GE2_OK);
    ck_assert_int_eq(ge2_add(g, h, act, &sum), GE2_OK);
    ck_assert_int_eq(rms ? ge2_rms_norm_layer(g, "norm", sum, 1e-5, &y)
                         : ge2_layer_norm_layer(g, "norm", sum, true, 1e-5, &y),
                     GE2_OK);
    ck_assert_int_eq(ge2_cross_entropy(g, y, labels, 0.0f, &loss), GE2_OK);
    ck_assert_int_eq(ge2_mark_output(g, loss), GE2_OK);
    ge2_context *ctx;
    ge2_program *prog;
    ck_assert_int_eq(ge2_context_new(GE2_DEVICE_CPU, &ctx), GE2_OK);
    ge2_compile_options o = ge2_compile_defaults();
    o.disable_fusions = disabled;
    ck_assert_msg(ge2_compile(ctx, g, &o, &prog) == GE2_OK, "%s", ge2_last_error());
    float xd[B * IN];
    int32_t yd[B];
    for (int i = 0; i < B * IN; i++)
        xd[i] = (float)((i * 37) % 19) / 9.0f - 1.0f;
    for (int i = 0; i < B; i++)
        yd[i] = (i * 7) % C;
    ge2_feed f[2] = {{x, xd, ge2_shape2(B, IN)}, {labels, yd, ge2_shape1(B)}};
    float l = 0;
    ck_assert_msg(ge2_program_step(prog, GE2_MODE_EVAL, f, 2) == GE2_OK, "%s", ge2_last_error());
    ck_assert_int_eq(ge2_program_read_output(prog, GE2_MODE_EVAL, loss, &l, sizeof l), GE2_OK);
    ge2_program_free(prog);
    ge2_context_free(ctx);
    ge2_graph_free(g);
    return l;
}

START_TEST(test_sum_nobody_keeps)
{
    for (int rms = 0; rms < 2; rms++) {
        const float fused = eval_loss(rms, NULL), plain = eval_loss(rms, "add_layer_norm,add_rms_norm");
        ck_assert_msg(fused == plain, "%s: eval loss %.9g fused, %.9g unfused", rms ? "rms" : "layer norm", fused,
                      plain);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gpt_fusions");
    TCase *tc = tcase_create("gpt_fusions");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_dropout_zero_fuses_every_residual_norm);
    tcase_add_test(tc, test_dropout_keeps_the_adds_in_the_dropouts);
    tcase_add_test(tc, test_sum_nobody_keeps);
    suite_add_tcase(s, tc);
    return ge2_check_run(s);
}
