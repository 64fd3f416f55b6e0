/* The head kernels' matcher (fusion/head/head.h) where there is no GPU
 * (CI): which launch pairs it takes, and why it refuses the others — more
 * than 32 classes, rows that are no aligned float4s, shapes that disagree,
 * one launch writing what the other reads. The launches' views point into a
 * host array that nothing dereferences. (What the kernels compute is
 * head_test's job, on a GPU.)
 */
#include <check.h>
#include <string.h>

#include "fusion/head/head.h"
#include "tests/support/check_main.h"
#include "ops/ops.h"

enum { B = 8, K = 16, H = 24 };

/* Fake device memory: views are addresses in it, 16-byte aligned at float 0. */
static float memory[1 << 14] __attribute__((aligned(16)));
static ge2_control control;

static ge2_view f32(size_t at, ge2_shape s) { return (ge2_view){&memory[at], GE2_F32, s}; }

typedef struct pair {
    ge2_node nodes[2];
    ge2_launch l[2];
} pair;

static void set_node(pair *p, int k, ge2_op op, int in0, int out0)
{
    ge2_node *n = &p->nodes[k];
    memset(n, 0, sizeof *n);
    n->op = op;
    n->n_inputs = 2;
    n->n_outputs = 1;
    n->inputs[0] = in0;
    n->outputs[0] = out0;
    memset(&p->l[k], 0, sizeof p->l[k]);
    p->l[k].node = n;
    p->l[k].control = &control;
}

/* LINEAR x [B, K] · w [C, K]ᵀ + b -> logits [B, C], then CROSS_ENTROPY. */
static void loss_pair(pair *p, int classes)
{
    set_node(p, 0, GE2_OP_LINEAR, 1, 4);
    set_node(p, 1, GE2_OP_CROSS_ENTROPY, 4, 5);
    GE2_ATTRS(ge2_linear_attrs, p->nodes[0].attrs)->act = GE2_ACT_NONE;
    ge2_launch *lin = &p->l[0], *ce = &p->l[1];
    lin->n_in = 3, lin->n_out = 1;
    lin->in[0] = f32(0, ge2_shape2(B, K));
    lin->in[1] = f32(1024, ge2_shape2(classes, K));
    lin->in[2] = f32(2048, ge2_shape1(classes));
    lin->out[0] = f32(3072, ge2_shape2(B, classes));
    ce->n_in = 2, ce->n_out = 2;
    ce->in[0] = lin->out[0];
    ce->in[1] = (ge2_view){&memory[4096], GE2_I32, ge2_shape1(B)};
    ce->out[0] = f32(5120, ge2_shape0());
    ce->out[1] = f32(6144, ge2_shape2(B, classes));
}

/* LINEAR_GRAD_INPUT dz [B, C] · w [C, H] ⊙ relu'(mask) -> dx [B, H] and
 * LINEAR_GRAD_WEIGHT dzᵀ · x [B, H] -> dW [C, H], db [C]. */
static void gradient_pair(pair *p, int classes, bool weight_first)
{
    const int gi = weight_first ? 1 : 0, gw = 1 - gi;
    set_node(p, gi, GE2_OP_LINEAR_GRAD_INPUT, 9, 10);
    set_node(p, gw, GE2_OP_LINEAR_GRAD_WEIGHT, 9, 11);
    ge2_launch *i = &p->l[gi], *w = &p->l[gw];
    i->n_in = 3, i->n_out = 1;
    i->in[0] = f32(0, ge2_shape2(B, classes));
    i->in[1] = f32(1024, ge2_shape2(classes, H));
    i->in[2] = (ge2_view){&memory[2048], GE2_U8, ge2_shape2(B, 16)}; /* relu's bit-mask: 128-bit rows */
    i->out[0] = f32(3072, ge2_shape2(B, H));
    w->n_in = 2, w->n_out = 2;
    w->in[0] = i->in[0];
    w->in[1] = f32(4096, ge2_shape2(B, H));
    w->out[0] = f32(5120, ge2_shape2(classes, H));
    w->out[1] = f32(8192, ge2_shape1(classes));
}

static void expect_refused(const pair *p, const char *reason)
{
    char why[160] = "";
    ck_assert_int_eq(ge2_head_match(p->l, why, sizeof why), GE2_HEAD_NONE);
    ck_assert_msg(strstr(why, reason), "refused for '%s', expected '%s'", why, reason);
}

START_TEST(test_loss_pair)
{
    pair p;
    char why[160] = "";
    loss_pair(&p, 10);
    ck_assert_msg(ge2_head_match(p.l, why, sizeof why) == GE2_HEAD_LOSS, "refused: %s", why);
    loss_pair(&p, 32);
    ck_assert_int_eq(ge2_head_match(p.l, NULL, 0), GE2_HEAD_LOSS);
    ck_assert_ptr_nonnull(strstr(ge2_head_describe(GE2_HEAD_LOSS), "cross-entropy"));

    loss_pair(&p, 33);
    expect_refused(&p, "32 classes");
    loss_pair(&p, 10);
    p.l[0].in[0].shape = ge2_shape2(B, K - 2), p.l[0].in[1].shape = ge2_shape2(10, K - 2);
    expect_refused(&p, "float4");
    loss_pair(&p, 10);
    p.l[0].in[0].data = &memory[1]; /* 4 bytes past alignment */
    expect_refused(&p, "float4");
    loss_pair(&p, 10);
    p.l[1].out[1].data = &memory[8]; /* dlogits over x's second row */
    expect_refused(&p, "writes what");
    loss_pair(&p, 10);
    p.l[1].in[1].shape = ge2_shape1(B + 1);
    expect_refused(&p, "shapes disagree");
    loss_pair(&p, 10);
    p.l[1].in[0].data = &memory[7168]; /* the cross-entropy reads other logits */
    expect_refused(&p, "logits");
    loss_pair(&p, 10);
    GE2_ATTRS(ge2_linear_attrs, p.nodes[0].attrs)->act = GE2_ACT_RELU;
    expect_refused(&p, "no head pair");
}
END_TEST

START_TEST(test_gradient_pair)
{
    pair p;
    char why[160] = "";
    for (int weight_first = 0; weight_first < 2; weight_first++) {
        gradient_pair(&p, 10, weight_first);
        ck_assert_msg(ge2_head_match(p.l, why, sizeof why) == GE2_HEAD_GRADIENTS, "order %d refused: %s",
                      weight_first, why);
    }
    gradient_pair(&p, 10, false);
    p.l[0].n_in = 2; /* no activation: no saved input */
    ck_assert_int_eq(ge2_head_match(p.l, NULL, 0), GE2_HEAD_GRADIENTS);
    ck_assert_ptr_nonnull(strstr(ge2_head_describe(GE2_HEAD_GRADIENTS), "weight gradients"));

    gradient_pair(&p, 33, false);
    expect_refused(&p, "32 classes");
    gradient_pair(&p, 10, false);
    p.l[0].out[0].data = &memory[4096 + 24]; /* dx over x's second row */
    expect_refused(&p, "writes what");
    gradient_pair(&p, 10, false);
    p.l[1].out[0].data = &memory[1024]; /* dW over W */
    expect_refused(&p, "writes what");
    gradient_pair(&p, 10, false);
    p.l[0].in[2].shape = ge2_shape2(B, 4); /* a mask of another width than 128-bit rows */
    expect_refused(&p, "saved activation");
    gradient_pair(&p, 10, false);
    p.l[1].in[1].shape = ge2_shape2(B, H - 1);
    expect_refused(&p, "shapes disagree");
    gradient_pair(&p, 10, false);
    p.l[1].in[0].data = &memory[512]; /* another dz at the same node input id: the views decide */
    expect_refused(&p, "dz");
    gradient_pair(&p, 10, false);
    p.nodes[1].inputs[0] = 12; /* the weight gradient of another dz */
    expect_refused(&p, "no head pair");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("head_match_test");
    TCase *tc = tcase_create("head_match_test");
    tcase_add_test(tc, test_loss_pair);
    tcase_add_test(tc, test_gradient_pair);
    suite_add_tcase(s, tc);
    return ge2_check_run(s);
}
