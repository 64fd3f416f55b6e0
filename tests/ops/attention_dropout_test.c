/* Dropout on attention weights (ge2_attention_dropout) through a compiled
 * program on the CPU backend, read through the probe of
 * tests/support/attention_probe.h: each weight is kept (scaled by
 * 1/(1-p)) or zeroed, at the rate 1 - p within 4 standard deviations per
 * head; every train step draws fresh masks, the two layers and the heads
 * draw different ones, one seed draws the same ones again and an eval step
 * keeps every weight; such graphs take the flat update. The masks' bits against the documented draw are
 * op_table_test's (ops/attention/test.c); CUDA's against the CPU's are
 * op_agreement_test's. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ge2/ge2.h"
#include "tests/support/attention_probe.h"
#include "tests/support/check_main.h"

#define API(call) ck_assert_msg((call) == GE2_OK, "%s: %s", #call, ge2_last_error())

enum { STEPS = 3, N = GE2_PROBE_WEIGHTS, PER_HEAD = GE2_PROBE_T * GE2_PROBE_T };

static unsigned char masks[STEPS][N], again[STEPS][N];

static void draw(uint64_t seed, unsigned char out[STEPS][N])
{
    ge2_attn_probe p;
    int64_t unclear;
    API(ge2_attn_probe_open(&p, GE2_DEVICE_CPU, GE2_PRECISION_FP32, false, seed));
    API(ge2_attn_probe_train(&p, STEPS, &out[0][0], &unclear));
    ck_assert_msg(unclear == 0, "%lld outputs neither kept nor dropped", (long long)unclear);
    ge2_attn_probe_close(&p);
}

START_TEST(masks_keep_at_the_rate_and_differ)
{
    draw(11, masks);
    draw(11, again);
    const double p = GE2_PROBE_P, sd = sqrt(PER_HEAD * p * (1 - p));
    for (int s = 0; s < STEPS; s++) {
        ck_assert_msg(memcmp(masks[s], again[s], N) == 0, "step %d: one seed drew two masks", s);
        for (int m = 0; m < N / PER_HEAD; m++) { /* each layer's heads */
            int kept = 0;
            for (int i = 0; i < PER_HEAD; i++)
                kept += masks[s][m * PER_HEAD + i];
            ck_assert_msg(fabs(kept - PER_HEAD * (1 - p)) < 4 * sd, "step %d mask %d kept %d of %d (p %g)", s, m,
                          kept, PER_HEAD, p);
        }
    }
    /* independent masks agree on a fraction p² + (1-p)² = 0.68 of the weights */
    const int limit = (int)(PER_HEAD * 0.75);
    for (int s = 1; s < STEPS; s++)
        ck_assert_msg(ge2_attn_probe_agree(masks[s], masks[0]) < limit, "step %d repeats step 0's mask", s);
    for (int m = 1; m < N / PER_HEAD; m++) /* head 1 of layer 0, head 0 and 1 of layer 1 against head 0 of layer 0 */
        ck_assert_msg(ge2_attn_probe_agree(masks[0] + m * PER_HEAD, masks[0]) < limit, "mask %d repeats mask 0", m);
}
END_TEST

START_TEST(eval_steps_keep_every_weight)
{
    ge2_attn_probe p;
    static unsigned char kept[N];
    int64_t unclear;
    API(ge2_attn_probe_open(&p, GE2_DEVICE_CPU, GE2_PRECISION_FP32, false, 5));
    API(ge2_attn_probe_step(&p, GE2_MODE_EVAL, kept, &unclear));
    /* every weight 1/T unscaled, so every output 3/T: no sum of weights
     * scaled by 1/(1-p), which the probe looks for */
    ck_assert_int_eq(unclear, N / 2);
    ge2_attn_probe_close(&p);
}
END_TEST

START_TEST(bad_calls_say_why)
{
    ge2_graph *g;
    ge2_tensor *q, *y, *z, *loss;
    API(ge2_graph_new(&g));
    API(ge2_parameter(g, "q", GE2_F32, ge2_shape3(2, 4, 8), (ge2_init){GE2_INIT_UNIFORM, -1, 1, 0}, &q));
    API(ge2_attention(g, q, q, q, true, &y));
    API(ge2_scale(g, y, 2.0, &z));
    ck_assert_int_eq(ge2_attention_dropout(g, z, 0.1), GE2_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "is not the output of ge2_attention"));
    ck_assert_int_eq(ge2_attention_dropout(g, y, 1.0), GE2_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "[0, 1)"));
    ck_assert_int_eq(ge2_attention_dropout(g, NULL, 0.1), GE2_ERR_INVALID_ARGUMENT);
    API(ge2_sum_all(g, z, &loss));
    API(ge2_backward(g, loss));
    ck_assert_int_eq(ge2_attention_dropout(g, y, 0.1), GE2_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "already has its backward"));
    ge2_graph_free(g);
}
END_TEST

/* Attention with dropout draws from the step's random stream, which the
 * last update moves on: its graphs refuse per-parameter updates (whose
 * backward could run after that) and say why; without dropout they take them */
START_TEST(dropout_graphs_take_the_flat_update)
{
    for (int with_dropout = 0; with_dropout < 2; with_dropout++) {
        ge2_graph *g;
        ge2_tensor *q, *y, *loss;
        API(ge2_graph_new(&g));
        API(ge2_parameter(g, "q", GE2_F32, ge2_shape3(2, 4, 8), (ge2_init){GE2_INIT_UNIFORM, -1, 1, 0}, &q));
        API(ge2_attention(g, q, q, q, true, &y));
        if (with_dropout)
            API(ge2_attention_dropout(g, y, 0.1));
        API(ge2_sum_all(g, y, &loss));
        API(ge2_backward(g, loss));
        ge2_optimizer_config c = ge2_optimizer_defaults(GE2_OPT_SGD);
        c.update_mode = GE2_UPDATE_PER_PARAMETER;
        if (with_dropout) {
            ck_assert_int_eq(ge2_optimizer(g, &c), GE2_ERR_INVALID_ARGUMENT);
            ck_assert_ptr_nonnull(strstr(ge2_last_error(), "random stream"));
        } else {
            API(ge2_optimizer(g, &c));
        }
        ge2_graph_free(g);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("attention_dropout");
    TCase *tc = tcase_create("attention_dropout");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, masks_keep_at_the_rate_and_differ);
    tcase_add_test(tc, eval_steps_keep_every_weight);
    tcase_add_test(tc, bad_calls_say_why);
    tcase_add_test(tc, dropout_graphs_take_the_flat_update);
    suite_add_tcase(s, tc);
    return ge2_check_run(s);
}
