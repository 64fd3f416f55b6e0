/* ge2_attention_bthd (q, k, v [B, T, H, D]) and ge2_attention_qkv (the
 * three packed in one [B, T, 3H, D]) against the [B, H, T, D] op between
 * permutes, through compiled programs on the CPU backend: the same outputs
 * and, after one SGD step on an MSE loss, the same parameters (their
 * gradients), causal or not. The op table's references for the
 * [B, T, H, D] layout share the kernels' index formula (attention.h); this
 * test reaches the same numbers through permutes instead, so it fails when
 * that formula reads the heads from the wrong place. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ge2/ge2.h"
#include "tests/support/check_main.h"

#define API(call) ck_assert_msg((call) == GE2_OK, "%s: %s", #call, ge2_last_error())

enum { B = 2, T = 5, H = 3, D = 4, N = B * T * H * D };

typedef enum layout { PERMUTED, BTHD, PACKED } layout;

typedef struct net {
    layout form;
    ge2_context *ctx;
    ge2_graph *g;
    ge2_program *prog;
    ge2_tensor *qkv[3], *y, *target; /* PACKED: qkv[0] is [B, T, 3H, D] */
} net;

/* y [B, T, H, D] = attention over the heads of q, k, v [B, T, H, D]: the
 * op itself (bthd, or packed over one [B, T, 3H, D]), or permutes to
 * [B, H, T, D] and back around ge2_attention */
static void net_open(net *n, layout form, bool causal)
{
    static const char *const names[3] = {"q", "k", "v"};
    static const int to_bhtd[4] = {0, 2, 1, 3}; /* its own inverse */
    const ge2_shape s = ge2_shape4(B, T, H, D);
    n->form = form;
    API(ge2_context_new(GE2_DEVICE_CPU, &n->ctx));
    API(ge2_graph_new(&n->g));
    API(ge2_label(n->g, "target", GE2_F32, s, &n->target));
    if (form == PACKED) {
        API(ge2_parameter(n->g, "qkv", GE2_F32, ge2_shape4(B, T, 3 * H, D), (ge2_init){GE2_INIT_ZEROS, 0, 0, 0},
                          &n->qkv[0]));
        API(ge2_attention_qkv(n->g, n->qkv[0], causal, &n->y));
        goto loss;
    }
    ge2_tensor *heads[3];
    for (int i = 0; i < 3; i++) {
        API(ge2_parameter(n->g, names[i], GE2_F32, s, (ge2_init){GE2_INIT_ZEROS, 0, 0, 0}, &n->qkv[i]));
        heads[i] = n->qkv[i];
        if (form == PERMUTED)
            API(ge2_permute(n->g, n->qkv[i], to_bhtd, 4, &heads[i]));
    }
    if (form == BTHD) {
        API(ge2_attention_bthd(n->g, heads[0], heads[1], heads[2], causal, &n->y));
    } else {
        ge2_tensor *y;
        API(ge2_attention(n->g, heads[0], heads[1], heads[2], causal, &y));
        API(ge2_permute(n->g, y, to_bhtd, 4, &n->y));
    }
loss:
    API(ge2_mark_output(n->g, n->y));
    ge2_tensor *loss;
    API(ge2_mse_loss(n->g, n->y, n->target, &loss));
    API(ge2_backward(n->g, loss));
    ge2_optimizer_config sgd = ge2_optimizer_defaults(GE2_OPT_SGD);
    sgd.lr = 10; /* the step moves the parameters by their gradients' scale */
    API(ge2_optimizer(n->g, &sgd));
    API(ge2_compile(n->ctx, n->g, NULL, &n->prog));
}

static void net_close(net *n)
{
    ge2_program_free(n->prog);
    ge2_graph_free(n->g);
    ge2_context_free(n->ctx);
}

/* packed [B, T, 3H, D] <-> q, k, v [B, T, H, D]: position p's 3H rows are q's heads, k's, v's */
static void pack(float three[3][N], float *packed, bool into_packed)
{
    for (int p = 0; p < B * T; p++)
        for (int w = 0; w < 3; w++)
            for (int e = 0; e < H * D; e++) {
                float *a = &packed[(p * 3 + w) * H * D + e], *b = &three[w][p * H * D + e];
                if (into_packed)
                    *a = *b;
                else
                    *b = *a;
            }
}

/* One train step from q, k, v = init[0..2]: y into y, then q, k, v after the step into after[0..2] */
static void one_step(net *n, float init[3][N], const float *target, float *y, float after[3][N])
{
    static float packed[3 * N];
    if (n->form == PACKED) {
        pack(init, packed, true);
        API(ge2_program_set_parameter(n->prog, n->qkv[0], packed, sizeof packed));
    }
    for (int i = 0; n->form != PACKED && i < 3; i++)
        API(ge2_program_set_parameter(n->prog, n->qkv[i], init[i], sizeof(float) * N));
    ge2_feed f = {n->target, target, ge2_shape4(B, T, H, D)};
    API(ge2_program_step(n->prog, GE2_MODE_TRAIN, &f, 1));
    API(ge2_program_read_output(n->prog, GE2_MODE_TRAIN, n->y, y, sizeof(float) * N));
    if (n->form == PACKED) {
        API(ge2_program_get_parameter(n->prog, n->qkv[0], packed, sizeof packed));
        pack(after, packed, false);
    }
    for (int i = 0; n->form != PACKED && i < 3; i++)
        API(ge2_program_get_parameter(n->prog, n->qkv[i], after[i], sizeof(float) * N));
}

/* the largest |a - b| over n values, relative to max(1, the largest |b|) */
static double rel_diff(const float *a, const float *b, int n)
{
    double worst = 0, scale = 1;
    for (int i = 0; i < n; i++) {
        worst = fmax(worst, fabs((double)a[i] - (double)b[i]));
        scale = fmax(scale, fabs((double)b[i]));
    }
    return worst / scale;
}

/* _i: causal (bit 0), packed instead of bthd (bit 1) */
START_TEST(bthd_equals_permuted_bhtd)
{
    const bool causal = _i & 1;
    const layout form = _i & 2 ? PACKED : BTHD;
    static float init[3][N], target[N], y_bthd[N], y_perm[N], p_bthd[3][N], p_perm[3][N];
    srand(11);
    for (int i = 0; i < 3; i++)
        for (int e = 0; e < N; e++)
            init[i][e] = (float)rand() / (float)RAND_MAX * 2 - 1;
    for (int e = 0; e < N; e++)
        target[e] = (float)rand() / (float)RAND_MAX * 2 - 1;
    net a, b;
    net_open(&a, form, causal);
    net_open(&b, PERMUTED, causal);
    one_step(&a, init, target, y_bthd, p_bthd);
    one_step(&b, init, target, y_perm, p_perm);
    const double dy = rel_diff(y_bthd, y_perm, N);
    ck_assert_msg(dy < 1e-6, "layout %d, causal %d: y differs by %.3g", form, causal, dy);
    for (int i = 0; i < 3; i++) {
        /* the step moved each parameter, so equal parameters mean equal gradients */
        ck_assert_msg(rel_diff(p_bthd[i], init[i], N) > 1e-3, "layout %d, causal %d: parameter %d did not move", form,
                      causal, i);
        const double dp = rel_diff(p_bthd[i], p_perm[i], N);
        ck_assert_msg(dp < 1e-6, "layout %d, causal %d: parameter %d after the step differs by %.3g", form, causal, i,
                      dp);
    }
    net_close(&a);
    net_close(&b);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("attention_layout");
    TCase *tc = tcase_create("layout");
    tcase_add_loop_test(tc, bthd_equals_permuted_bhtd, 0, 4);
    suite_add_tcase(s, tc);
    return ge2_check_run(s);
}
