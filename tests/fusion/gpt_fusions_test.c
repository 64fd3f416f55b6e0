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
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gpt_fusions");
    TCase *tc = tcase_create("gpt_fusions");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_dropout_zero_fuses_every_residual_norm);
    tcase_add_test(tc, test_dropout_keeps_the_adds_in_the_dropouts);
    suite_add_tcase(s, tc);
    return ge2_check_run(s);
}
