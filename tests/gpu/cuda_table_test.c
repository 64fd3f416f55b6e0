/* The CUDA column of the op table, checked where there is no GPU (CI): every
 * row is filled, and the launchers refuse what they cannot run — f64, a
 * missing control block, too few optimizer state slots — with a message
 * naming the op, before touching the device. (What the kernels compute is
 * op_agreement_test's job, on a GPU.)
 */
#include <check.h>
#include <string.h>

#include "graph/error.h"
#include "graph/ir.h"
#include "ops/attention/attention.h"
#include "ops/conv/conv.h"
#include "ops/reduce/reduce.h"
#include "optim/optimizer_math.h"
#include "tests/support/check_main.h"
#include "fusion/recompute_act/recompute_act.h"
#include "kernels/cuda/candidates.h"
#include "ops/ops.h"

static bool gemm_op(ge2_op op)
{
    return op == GE2_OP_LINEAR || op == GE2_OP_MATMUL || op == GE2_OP_LINEAR_GRAD_INPUT ||
           op == GE2_OP_LINEAR_GRAD_WEIGHT || op == ge2_op_linear_grad_input_recompute();
}

static bool optimizer_op(ge2_op op)
{
    return (ge2_op_flags(op) & GE2_OPF_OPTIMIZER) != 0;
}

/* A launch with the op's smallest arity over views of dtype dt and shape
 * [4, 3] (labels [4] i32); no memory behind them: nothing may be launched. */
static void make_launch(ge2_op op, ge2_dtype dt, ge2_node *node, ge2_launch *l)
{
    const ge2_op_def *info = ge2_op_def_of(op);
    memset(node, 0, sizeof *node);
    node->op = op;
    node->n_inputs = info->min_inputs;
    node->n_outputs = info->max_outputs;
    GE2_ATTRS(ge2_reduce_attrs, node->attrs)->axis = GE2_AXIS_ALL;
    memset(l, 0, sizeof *l);
    l->node = node;
    l->n_in = node->n_inputs;
    l->n_out = node->n_outputs;
    for (int i = 0; i < l->n_in; i++)
        l->in[i] = (ge2_view){NULL, dt, ge2_shape2(4, 3)};
    if (op == GE2_OP_CROSS_ENTROPY || op == GE2_OP_ACCURACY)
        l->in[1] = (ge2_view){NULL, GE2_I32, ge2_shape1(4)};
    for (int i = 0; i < l->n_out; i++)
        l->out[i] = (ge2_view){NULL, dt, ge2_shape2(4, 3)};
    if (info->flags & (GE2_OPF_LOSS | GE2_OPF_NO_GRAD))
        l->out[0].shape = ge2_shape0();
}

START_TEST(test_every_row_filled)
{
    for (int op = 0; op < ge2_op_count(); op++) {
        const ge2_cuda_kernel *k = &ge2_op_def_of(op)->cuda;
        ck_assert_msg(k->launch != NULL, "%s: no CUDA launch", ge2_op_name(op));
        /* prepare and release come in pairs: what one makes the other frees */
        ck_assert_msg((k->prepare == NULL) == (k->release == NULL), "%s: prepare without release or back",
                      ge2_op_name(op));
        if (gemm_op((ge2_op)op))
            ck_assert_msg(k->prepare && k->describe, "%s: cuBLASLt rows prepare and describe",
                          ge2_op_name(op));
    }
}
END_TEST

START_TEST(test_f64_refused)
{
    ge2_op op = (ge2_op)_i;
    if (gemm_op(op) || optimizer_op(op))
        return; /* GEMM: gemm_lt_test; optimizer: no tensors */
    ge2_node node;
    ge2_launch l;
    make_launch(op, GE2_F64, &node, &l);
    ge2_clear_error();
    ck_assert_int_eq(ge2_op_def_of(op)->cuda.launch(&l), GE2_ERR_UNSUPPORTED);
    const char *msg = ge2_last_error();
    ck_assert_msg(strstr(msg, ge2_op_name(op)) && strstr(msg, "f64"), "%s: message: %s",
                  ge2_op_name(op), msg);
}
END_TEST

/* The single-launch reductions keep their scratch in the control block. */
START_TEST(test_control_block_required)
{
    static const ge2_op ops[] = {GE2_OP_CROSS_ENTROPY, GE2_OP_MSE_LOSS, GE2_OP_ACCURACY, GE2_OP_GRAD_NORM,
                                 GE2_OP_OPTIMIZER_UPDATE};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        ge2_node node;
        ge2_launch l;
        make_launch(ops[i], GE2_F32, &node, &l);
        GE2_ATTRS(ge2_optim_attrs, node.attrs)->config.accumulation_steps = 1;
        ck_assert_int_eq(ge2_op_def_of(ops[i])->cuda.launch(&l), GE2_ERR_STATE);
        ck_assert_msg(strstr(ge2_last_error(), ge2_op_name(ops[i])) && strstr(ge2_last_error(), "control"),
                      "%s: message: %s", ge2_op_name(ops[i]), ge2_last_error());
    }
}
END_TEST

START_TEST(test_optimizer_slots_checked)
{
    ge2_node node;
    ge2_launch l;
    make_launch(GE2_OP_OPTIMIZER_UPDATE, GE2_F32, &node, &l);
    GE2_ATTRS(ge2_optim_attrs, node.attrs)->config.kind = GE2_OPT_ADAM;
    GE2_ATTRS(ge2_optim_attrs, node.attrs)->config.amsgrad = true;
    GE2_ATTRS(ge2_optim_attrs, node.attrs)->config.accumulation_steps = 1;
    ge2_control not_dereferenced;
    l.control = &not_dereferenced;
    l.pools.slots = 2; /* amsgrad needs m, v, v_max */
    l.pools.n = 64;
    ck_assert_int_eq(ge2_op_def_of(GE2_OP_OPTIMIZER_UPDATE)->cuda.launch(&l), GE2_ERR_STATE);
    ck_assert_msg(strstr(ge2_last_error(), "needs 3 state slots, the pool has 2"), "message: %s", ge2_last_error());
}
END_TEST

/* Attention's 3xTF32 candidate registers with both attention ops and
 * declines rows wider than its tiles and precision TF32 (whose own kernel
 * multiplies TF32 values), saying so. */
START_TEST(test_attention_candidate_registered)
{
    const ge2_op ops[] = {GE2_OP_ATTENTION, GE2_OP_ATTENTION_GRAD};
    for (int o = 0; o < 2; o++) {
        int n = 0;
        const ge2_kernel_candidate *const *cs = ge2_kernel_candidates_of(ops[o], &n);
        const ge2_kernel_candidate *tc = NULL;
        for (int i = 0; i < n; i++)
            if (strcmp(cs[i]->name, "ge2_attention_3xtf32") == 0)
                tc = cs[i];
        ck_assert_ptr_nonnull(tc);
        ge2_node node;
        memset(&node, 0, sizeof node);
        node.op = ops[o];
        (*GE2_ATTRS(ge2_attention_attrs, node.attrs)) = (ge2_attention_attrs){0};
        GE2_ATTRS(ge2_attention_attrs, node.attrs)->causal = true;
        ge2_launch l;
        memset(&l, 0, sizeof l);
        l.node = &node;
        const ge2_shape wide = ge2_shape4(2, 3, 50, 100); /* [B, H, T, D], D = 100 */
        l.n_in = o == 0 ? 3 : 6;
        l.n_out = o == 0 ? 2 : 3;
        for (int i = 0; i < l.n_in; i++)
            l.in[i] = (ge2_view){NULL, GE2_F32, wide};
        char why[160] = "";
        ck_assert(!tc->applies(&l, why, sizeof why));
        ck_assert_msg(strstr(why, "rows of 100 values; the tiles take up to 64"), "why: %s", why);
        l.tf32 = true;
        ck_assert(!tc->applies(&l, why, sizeof why));
        ck_assert_msg(strstr(why, "precision TF32: the op's own kernels multiply TF32 values already"), "why: %s",
                      why);
    }
}
END_TEST

/* ge2's own candidates register with the ops (ops/<family>/candidates.c),
 * and the small-filter weight gradient takes a first layer's 1x3x3 filter
 * but not a 32x3x3 one or a grouped convolution. */
START_TEST(test_builtin_candidates_registered)
{
    int n = 0;
    const ge2_kernel_candidate *const *cs = ge2_kernel_candidates_of(GE2_OP_CONV2D_GRAD_WEIGHT, &n);
    const ge2_kernel_candidate *small = NULL;
    for (int i = 0; i < n; i++)
        if (strcmp(cs[i]->name, "ge2_wgrad_small") == 0)
            small = cs[i];
    ck_assert_ptr_nonnull(small);
    ge2_node node;
    memset(&node, 0, sizeof node);
    node.op = GE2_OP_CONV2D_GRAD_WEIGHT;
    (*GE2_ATTRS(ge2_conv2d_attrs, node.attrs)) = (ge2_conv2d_attrs){{1, 1}, {1, 1}, {1, 1}, 1};
    ge2_launch l;
    memset(&l, 0, sizeof l);
    l.node = &node;
    l.n_in = 3;
    l.n_out = 1;
    l.in[0] = (ge2_view){NULL, GE2_F32, ge2_shape4(64, 32, 28, 28)}; /* dy */
    l.in[1] = (ge2_view){NULL, GE2_F32, ge2_shape4(32, 1, 3, 3)};    /* w */
    l.in[2] = (ge2_view){NULL, GE2_F32, ge2_shape4(64, 1, 28, 28)};  /* x */
    l.control = (struct ge2_control *)&node; /* any non-NULL: applies never reads it */
    l.workspace = &node;
    l.workspace_bytes = (size_t)32 << 20;
    char why[96] = "";
    ck_assert_msg(small->applies(&l, why, sizeof why), "1x3x3: %s", why);
    l.in[1].shape = ge2_shape4(64, 32, 3, 3);
    l.in[2].shape = ge2_shape4(64, 32, 14, 14);
    l.in[0].shape = ge2_shape4(64, 64, 14, 14);
    ck_assert(!small->applies(&l, why, sizeof why));
    ck_assert_ptr_nonnull(strstr(why, "registers"));
    GE2_ATTRS(ge2_conv2d_attrs, node.attrs)->groups = 2;
    l.in[1].shape = ge2_shape4(64, 1, 3, 3);
    l.in[2].shape = ge2_shape4(64, 2, 14, 14);
    ck_assert(!small->applies(&l, why, sizeof why));
    ck_assert_ptr_nonnull(strstr(why, "grouped"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_table");
    TCase *tc = tcase_create("rows");
    tcase_add_test(tc, test_every_row_filled);
    tcase_add_loop_test(tc, test_f64_refused, 0, ge2_op_count());
    tcase_add_test(tc, test_control_block_required);
    tcase_add_test(tc, test_optimizer_slots_checked);
    tcase_add_test(tc, test_builtin_candidates_registered);
    tcase_add_test(tc, test_attention_candidate_registered);
    suite_add_tcase(s, tc);
    return ge2_check_run(s);
}
