/* Parameter groups for weight decay (ge2_no_weight_decay, the config's
 * decay_matrices_only) on the CPU backend, against a float64 computation of
 * one step by hand: y = x·wᵀ + b, mse loss, so dW = dyᵀx and db = Σ dy with
 * dy = 2(y - t)/numel; AdamW's first step moves p to p·(1 - lr·wd) - lr·g /
 * (|g| + eps) for a decayed parameter and drops the factor for the others;
 * SGD's coupled decay adds wd·p to the gradient of decayed ones only. The
 * groups also reorder the parameter pool (decayed first), which flat and
 * per-parameter updates must both follow. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "ge2/ge2.h"
#include "tests/support/check_main.h"

#define API(call) ck_assert_msg((call) == GE2_OK, "%s: %s", #call, ge2_last_error())

enum { B = 4, IN = 3, OUT = 2 };
static const float xv[B * IN] = {0.5f, -1.0f, 0.25f, 1.5f, 0.75f, -0.5f, -0.25f, 1.0f, 2.0f, 0.1f, -0.3f, 0.7f};
static const float tv[B * OUT] = {0.2f, -0.4f, 1.0f, 0.0f, -0.6f, 0.3f, 0.5f, 0.9f};

typedef enum grouping { DECAY_ALL, MATRICES_ONLY, WEIGHT_EXEMPT } grouping;

/* one step; the parameters after it in w[OUT*IN], b[OUT] (and before it in w0, b0) */
static void one_step(ge2_optimizer_kind kind, grouping grp, ge2_update_mode mode, float *w0, float *b0, float *w,
                     float *b)
{
    ge2_context *ctx;
    ge2_graph *g;
    ge2_program *p;
    ge2_tensor *x, *t, *tw, *tb, *y, *loss;
    API(ge2_context_new(GE2_DEVICE_CPU, &ctx));
    API(ge2_graph_new(&g));
    API(ge2_graph_set_seed(g, 21));
    API(ge2_input(g, "x", GE2_F32, ge2_shape2(B, IN), &x));
    API(ge2_label(g, "t", GE2_F32, ge2_shape2(B, OUT), &t));
    /* the bias made first, so the pool order must change for WEIGHT_EXEMPT's groups */
    API(ge2_parameter(g, "b", GE2_F32, ge2_shape1(OUT), (ge2_init){GE2_INIT_UNIFORM, -1, 1, 0}, &tb));
    API(ge2_parameter(g, "w", GE2_F32, ge2_shape2(OUT, IN), (ge2_init){GE2_INIT_UNIFORM, -1, 1, 0}, &tw));
    API(ge2_linear(g, x, tw, tb, GE2_ACT_NONE, 0, &y));
    API(ge2_mse_loss(g, y, t, &loss));
    API(ge2_backward(g, loss));
    if (grp == WEIGHT_EXEMPT)
        API(ge2_no_weight_decay(g, tw));
    ge2_optimizer_config c = ge2_optimizer_defaults(kind);
    c.lr = 0.1;
    c.weight_decay = 0.5;
    c.decay_matrices_only = grp == MATRICES_ONLY;
    c.update_mode = mode;
    API(ge2_optimizer(g, &c));
    API(ge2_compile(ctx, g, NULL, &p));
    API(ge2_program_get_parameter(p, tw, w0, sizeof(float) * OUT * IN));
    API(ge2_program_get_parameter(p, tb, b0, sizeof(float) * OUT));
    ge2_feed f[2] = {{x, xv, ge2_shape2(B, IN)}, {t, tv, ge2_shape2(B, OUT)}};
    API(ge2_program_step(p, GE2_MODE_TRAIN, f, 2));
    API(ge2_program_get_parameter(p, tw, w, sizeof(float) * OUT * IN));
    API(ge2_program_get_parameter(p, tb, b, sizeof(float) * OUT));
    ge2_program_free(p);
    ge2_graph_free(g);
    ge2_context_free(ctx);
}

/* the gradients at w0, b0, in float64 */
static void gradients(const float *w0, const float *b0, double *gw, double *gb)
{
    double dy[B * OUT];
    for (int r = 0; r < B; r++)
        for (int o = 0; o < OUT; o++) {
            double yv = b0[o];
            for (int i = 0; i < IN; i++)
                yv += (double)xv[r * IN + i] * w0[o * IN + i];
            dy[r * OUT + o] = 2.0 * (yv - tv[r * OUT + o]) / (B * OUT);
        }
    for (int o = 0; o < OUT; o++) {
        gb[o] = 0;
        for (int r = 0; r < B; r++)
            gb[o] += dy[r * OUT + o];
        for (int i = 0; i < IN; i++) {
            gw[o * IN + i] = 0;
            for (int r = 0; r < B; r++)
                gw[o * IN + i] += dy[r * OUT + o] * xv[r * IN + i];
        }
    }
}

/* p after one step of kind from p0 with gradient g; decays: whether its group takes weight decay */
static double stepped(ge2_optimizer_kind kind, double p0, double g, bool decays)
{
    const double lr = 0.1, wd = 0.5, eps = 1e-8;
    if (kind == GE2_OPT_SGD)
        return p0 - lr * (g + (decays ? wd * p0 : 0));
    return p0 * (decays ? 1 - lr * wd : 1) - lr * g / (fabs(g) + eps); /* AdamW, t = 1 */
}

static void check_group(ge2_optimizer_kind kind, grouping grp, ge2_update_mode mode)
{
    float w0[OUT * IN], b0[OUT], w[OUT * IN], b[OUT];
    double gw[OUT * IN], gb[OUT];
    one_step(kind, grp, mode, w0, b0, w, b);
    gradients(w0, b0, gw, gb);
    const bool w_decays = grp != WEIGHT_EXEMPT, b_decays = grp != MATRICES_ONLY;
    for (int k = 0; k < OUT * IN; k++) {
        double want = stepped(kind, w0[k], gw[k], w_decays);
        ck_assert_msg(fabs(w[k] - want) <= 1e-5 * (1 + fabs(want)), "kind %d group %d mode %d: w[%d] %.8g, want %.8g",
                      kind, grp, mode, k, (double)w[k], want);
    }
    for (int k = 0; k < OUT; k++) {
        double want = stepped(kind, b0[k], gb[k], b_decays);
        ck_assert_msg(fabs(b[k] - want) <= 1e-5 * (1 + fabs(want)), "kind %d group %d mode %d: b[%d] %.8g, want %.8g",
                      kind, grp, mode, k, (double)b[k], want);
    }
}

START_TEST(groups_decay_only_their_parameters)
{
    static const ge2_optimizer_kind kinds[] = {GE2_OPT_SGD, GE2_OPT_ADAMW};
    static const ge2_update_mode modes[] = {GE2_UPDATE_FLAT, GE2_UPDATE_PER_PARAMETER};
    for (int k = 0; k < 2; k++)
        for (int grp = DECAY_ALL; grp <= WEIGHT_EXEMPT; grp++)
            for (int m = 0; m < 2; m++)
                check_group(kinds[k], (grouping)grp, modes[m]);
}
END_TEST

START_TEST(only_parameters_leave_weight_decay)
{
    ge2_graph *g;
    ge2_tensor *x, *w;
    API(ge2_graph_new(&g));
    API(ge2_input(g, "x", GE2_F32, ge2_shape1(3), &x));
    API(ge2_parameter(g, "w", GE2_F32, ge2_shape1(3), (ge2_init){GE2_INIT_ZEROS, 0, 0, 0}, &w));
    ck_assert_int_eq(ge2_no_weight_decay(g, x), GE2_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "'x' is not a parameter"));
    API(ge2_no_weight_decay(g, w));
    ge2_graph_free(g);
}
END_TEST

/* A parameter leaving weight decay after ge2_compile changes the pool's
 * order: the program compiled before refuses to step. */
START_TEST(a_group_changed_after_compile_is_refused)
{
    ge2_context *ctx;
    ge2_graph *g;
    ge2_program *p;
    ge2_tensor *x, *t, *w, *y, *loss;
    API(ge2_context_new(GE2_DEVICE_CPU, &ctx));
    API(ge2_graph_new(&g));
    API(ge2_input(g, "x", GE2_F32, ge2_shape2(B, IN), &x));
    API(ge2_label(g, "t", GE2_F32, ge2_shape2(B, OUT), &t));
    API(ge2_parameter(g, "w", GE2_F32, ge2_shape2(OUT, IN), (ge2_init){GE2_INIT_UNIFORM, -1, 1, 0}, &w));
    API(ge2_linear(g, x, w, NULL, GE2_ACT_NONE, 0, &y));
    API(ge2_mse_loss(g, y, t, &loss));
    API(ge2_backward(g, loss));
    ge2_optimizer_config c = ge2_optimizer_defaults(GE2_OPT_ADAMW);
    API(ge2_optimizer(g, &c));
    API(ge2_compile(ctx, g, NULL, &p));
    API(ge2_no_weight_decay(g, w));
    ge2_feed f[2] = {{x, xv, ge2_shape2(B, IN)}, {t, tv, ge2_shape2(B, OUT)}};
    ck_assert_int_eq(ge2_program_step(p, GE2_MODE_TRAIN, f, 2), GE2_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(ge2_last_error(), "weight decay"));
    ge2_program_free(p);
    ge2_graph_free(g);
    ge2_context_free(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("decay_groups");
    TCase *tc = tcase_create("decay_groups");
    tcase_add_test(tc, groups_decay_only_their_parameters);
    tcase_add_test(tc, only_parameters_leave_weight_decay);
    tcase_add_test(tc, a_group_changed_after_compile_is_refused);
    suite_add_tcase(s, tc);
    return ge2_check_run(s);
}
