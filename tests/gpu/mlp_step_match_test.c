/* Which graph keys the whole-step MLP kernel takes (fusion/mlp_step/mlp_step.h),
 * decided on the launch lists of programs compiled for the CPU backend: the
 * same plan the CUDA backend gets, so this runs in CI without a GPU.
 *
 * Taken: the bench's small MLP and the trainer's, odd sizes, one layer,
 * label smoothing, accuracy, Adam/AdamW/SGD, each checked to be phase-safe
 * on the plan (which the planner's widened lifetimes make it), with the row
 * chain where the weights fit. Refused, each with its reason:
 * the medium MLP (GEMMs too large), clipping, amsgrad, accumulation, GELU,
 * an eval key.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "capture/program_inspect.h"
#include "fusion/mlp_step/mlp_step.h"
#include "tests/gpu/mlp_spec.h"
#include "tests/support/check_main.h"

static mlp_spec spec_of(int n_layers, const int64_t *dims, int batch, ge2_optimizer_kind kind)
{
    return mlp_spec_of("case", n_layers, dims, batch, kind);
}

/* Compiles spec on the CPU, runs one training step, matches its key. */
static bool match(const mlp_spec *spec, ge2_mlp_step_desc *desc, char *why, size_t size)
{
    spec_model m;
    spec_open(&m, spec, GE2_DEVICE_CPU, 11);
    spec_step(&m, 5, 0);
    const ge2_exec *e = ge2_program_key_view(m.program, ge2_program_last_key(m.program, GE2_MODE_TRAIN)).exec;
    bool ok = ge2_mlp_step_match(e->launches, e->n_launches, desc, why, size);
    spec_close(&m);
    return ok;
}

/* Taken, with the row chain from layer chain_from (-1: any). */
static void assert_taken_chain(const mlp_spec *spec, int chain_from)
{
    ge2_mlp_step_desc d;
    char why[256];
    ck_assert_msg(match(spec, &d, why, sizeof why), "refused: %s", why);
    ck_assert_int_eq(d.n_layers, spec->n_layers);
    ck_assert_int_eq(d.batch, spec->batch);
    for (int l = 0; l < spec->n_layers; l++) {
        const ge2_mlp_step_layer *ly = &d.layer[l];
        ck_assert_int_eq(ly->in, spec->dims[l]);
        ck_assert_int_eq(ly->out, spec->dims[l + 1]);
        ck_assert_int_eq(ly->act, spec->act[l]);
        ck_assert(ly->x && ly->w && ly->b && ly->y && ly->dz && ly->dw && ly->db);
        ck_assert((ly->mask != NULL) == (spec->act[l] == GE2_ACT_RELU));
        if (l > 0)
            ck_assert_ptr_eq(ly->x, d.layer[l - 1].y);
    }
    ck_assert(d.loss && d.labels && d.control && d.pools.params);
    ck_assert((d.correct != NULL) == spec->accuracy);
    ck_assert_float_eq(d.label_smoothing, spec->label_smoothing);
    if (chain_from >= 0)
        ck_assert_int_eq(d.chain_from, chain_from);
}

static void assert_taken(const mlp_spec *spec) { assert_taken_chain(spec, -1); }

static void assert_refused(const mlp_spec *spec, const char *reason)
{
    ge2_mlp_step_desc d;
    char why[256];
    ck_assert_msg(!match(spec, &d, why, sizeof why), "taken, expected refusal for %s", reason);
    ck_assert_msg(strstr(why, reason), "refused for \"%s\", expected \"%s\"", why, reason);
}

START_TEST(test_takes_the_small_mlps)
{
    const int64_t small[] = {784, 256, 128, 10}, medium[] = {784, 1024, 1024, 10};
    mlp_spec s = spec_of(3, small, 64, GE2_OPT_ADAM);
    assert_taken(&s);
    s.accuracy = true; /* train_mlp marks its accuracy */
    assert_taken(&s);
    s = spec_of(3, medium, 256, GE2_OPT_ADAM); /* its GEMMs are cuBLASLt's */
    assert_refused(&s, "cuBLASLt is faster");
}
END_TEST

START_TEST(test_takes_odd_shapes_and_rules)
{
    const int64_t odd[] = {33, 70, 5}, one[] = {20, 17}, deep[] = {64, 48, 40, 36, 24};
    mlp_spec s = spec_of(2, odd, 37, GE2_OPT_ADAMW);
    s.label_smoothing = 0.1f;
    assert_taken(&s);
    s = spec_of(1, one, 3, GE2_OPT_SGD);
    s.optimizer.momentum = 0.9;
    assert_taken(&s);
    s = spec_of(4, deep, 130, GE2_OPT_SGD);
    s.act[1] = GE2_ACT_NONE;
    assert_taken(&s);
}
END_TEST

/* The chain starts after the first layer, or later where the weights it
 * re-reads per item pass GE2_MLP_STEP_CHAIN_BYTES; a lone layer is all chain. */
START_TEST(test_chain_starts_where_the_weights_fit)
{
    const int64_t small[] = {784, 256, 128, 10}, narrow[] = {64, 48, 40, 36, 24}, one[] = {20, 17};
    mlp_spec s = spec_of(3, small, 64, GE2_OPT_ADAM);
    assert_taken_chain(&s, 2); /* layer 1's 128 KB stays out, the last layer's 5 KB is in */
    s = spec_of(4, narrow, 16, GE2_OPT_ADAM);
    assert_taken_chain(&s, 1); /* 7.5 + 5.6 + 3.5 KB after the first layer */
    s = spec_of(1, one, 8, GE2_OPT_SGD);
    assert_taken_chain(&s, 0);
}
END_TEST

START_TEST(test_refuses_what_it_does_not_implement)
{
    const int64_t small[] = {40, 32, 10};
    mlp_spec s = spec_of(2, small, 16, GE2_OPT_ADAM);
    s.optimizer.clip_norm = 1.0;
    assert_refused(&s, "grad_norm"); /* clipping adds a GRAD_NORM node */
    s = spec_of(2, small, 16, GE2_OPT_ADAM);
    s.optimizer.amsgrad = true;
    assert_refused(&s, "amsgrad");
    s = spec_of(2, small, 16, GE2_OPT_ADAM);
    s.optimizer.accumulation_steps = 2;
    assert_refused(&s, "accumulation");
    s = spec_of(2, small, 16, GE2_OPT_ADAM);
    s.act[0] = GE2_ACT_GELU_TANH;
    assert_refused(&s, "activation");
    s = spec_of(2, small, 16, GE2_OPT_ADAM);
    s.optimizer.update_mode = GE2_UPDATE_PER_PARAMETER;
    assert_refused(&s, "per-layer optimizer updates");
}
END_TEST

START_TEST(test_refuses_an_eval_key)
{
    const int64_t small[] = {40, 32, 10};
    mlp_spec s = spec_of(2, small, 16, GE2_OPT_ADAM);
    spec_model m;
    spec_open(&m, &s, GE2_DEVICE_CPU, 11);
    static float x[16 * 40];
    static int32_t labels[16];
    ge2_feed feeds[2] = {{m.x, x, ge2_shape2(16, 40)}, {m.labels, labels, ge2_shape1(16)}};
    ck_assert_int_eq(ge2_program_step(m.program, GE2_MODE_EVAL, feeds, 2), GE2_OK);
    const ge2_exec *e = ge2_program_key_view(m.program, ge2_program_last_key(m.program, GE2_MODE_EVAL)).exec;
    ge2_mlp_step_desc d;
    char why[256];
    ck_assert(!ge2_mlp_step_match(e->launches, e->n_launches, &d, why, sizeof why));
    ck_assert_msg(strstr(why, "not a training step"), "%s", why);
    spec_close(&m);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("mlp_step_match");
    TCase *tc = tcase_create("match");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_takes_the_small_mlps);
    tcase_add_test(tc, test_takes_odd_shapes_and_rules);
    tcase_add_test(tc, test_chain_starts_where_the_weights_fit);
    tcase_add_test(tc, test_refuses_what_it_does_not_implement);
    tcase_add_test(tc, test_refuses_an_eval_key);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ge2_check_run(suite()); }
