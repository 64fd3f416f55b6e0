/* Every op of the table, iterated: no row has a hole; forward values against
 * the float64 reference (f32 and f64); a central-difference gradient check in
 * float64 of every differentiable op through ge2_backward and naive_run. */
#include <check.h>
#include <math.h>
#include <stdlib.h>

#include "autograd/autograd.h"
#include "graph/alloc.h"
#include "graph/bf16.h"
#include "graph/ir.h"
#include "tests/support/reference.h"
#include "check/gradients.h"
#include "check/naive.h"
#include "tests/support/op_cases.h"
#include "tests/support/check_main.h"
#include "ops/ops.h"

/* random instances per op; more with --copt=-DGE2_OP_TEST_SEEDS=N for a soak */
#ifndef GE2_OP_TEST_SEEDS
#define GE2_OP_TEST_SEEDS 40
#endif

static double *to_f64(const ge2_naive *n, const ge2_tensor *t)
{
    int64_t count = ge2_shape_numel(n->shape[t->id]);
    double *v = malloc(sizeof(double) * (size_t)(count + 1));
    for (int64_t i = 0; i < count; i++) {
        const void *d = n->data[t->id];
        v[i] = t->dtype == GE2_F64 ? ((const double *)d)[i]
             : t->dtype == GE2_I32 ? ((const int32_t *)d)[i]
             : t->dtype == GE2_U8  ? ((const uint8_t *)d)[i]
             : t->dtype == GE2_I64 ? (double)((const int64_t *)d)[i]
             : t->dtype == GE2_BF16 ? (double)ge2_f32_from_bf16(((const uint16_t *)d)[i])
                                   : ((const float *)d)[i];
    }
    return v;
}

START_TEST(table_has_no_holes)
{
    for (int op = 0; op < ge2_op_count(); op++) {
        const ge2_op_def *info = ge2_op_def_of((ge2_op)op);
        ck_assert_msg(info->name && info->infer, "op %d has no name/infer", op);
        ck_assert_msg(ge2_op_def_of(op)->cpu, "op %s has no CPU kernel", info->name);
        const ge2_op_case *c = ge2_op_case_of(op);
        ck_assert_msg(c->kind == GE2_CASE_ELSEWHERE || (c->body && c->reference), "op %s has no op case", info->name);
        if (c->kind == GE2_CASE_GRADIENT)
            ck_assert_msg(ge2_op_def_of(op)->backward, "differentiable op %s has no backward rule", info->name);
        /* ops a user can differentiate through must have a rule; metrics and optimizer ops none */
        if (info->flags & (GE2_OPF_NO_GRAD | GE2_OPF_OPTIMIZER))
            ck_assert_msg(c->kind != GE2_CASE_GRADIENT, "op %s is marked differentiable", info->name);
    }
}
END_TEST

static void check_forward(int op, ge2_dtype dtype, uint64_t seed)
{
    ge2_op_instance inst;
    ck_assert_int_eq(ge2_op_case_build(ge2_op_case_of(op), seed, dtype, &inst), GE2_OK);
    ge2_naive *n;
    ck_assert_int_eq(ge2_naive_new(inst.graph, inst.feeds, inst.n_feeds, &n), GE2_OK);
    n->control.loss_scale = 4.0f; /* not 1: a kernel that ignores the control block's scale fails */
    ck_assert_int_eq(ge2_naive_exec(n, true), GE2_OK);
    const ge2_node *node = &inst.graph->nodes[inst.node];
    ref_tensor in[GE2_MAX_INPUTS], out[GE2_MAX_OUTPUTS];
    for (int i = 0; i < node->n_inputs; i++)
        in[i] = (ref_tensor){to_f64(n, inst.graph->tensors[node->inputs[i]]), n->shape[node->inputs[i]]};
    for (int i = 0; i < node->n_outputs; i++) {
        ge2_shape s = n->shape[node->outputs[i]];
        out[i] = (ref_tensor){calloc((size_t)ge2_shape_numel(s) + 1, sizeof(double)), s};
    }
    ge2_ref_rng_seed = inst.graph->seed; /* the naive run's control block */
    ge2_ref_rng_offset = 0;
    ge2_ref_loss_scale = n->control.loss_scale;
    ref_eval(node, in, out);
    double rtol = dtype == GE2_F64 ? 1e-9 : 2e-5, atol = dtype == GE2_F64 ? 1e-9 : 2e-6;
    for (int i = 0; i < node->n_outputs; i++) {
        const ge2_tensor *t = inst.graph->tensors[node->outputs[i]];
        double *got = to_f64(n, t);
        for (int64_t k = 0; k < ge2_shape_numel(out[i].shape); k++)
            ck_assert_msg(fabs(got[k] - out[i].v[k]) <= atol + rtol * fabs(out[i].v[k]),
                          "%s (%s, seed %llu) output %d [%lld]: got %.10g, reference %.10g",
                          ge2_op_name((ge2_op)op), ge2_dtype_name(dtype), (unsigned long long)seed, i,
                          (long long)k, got[k], out[i].v[k]);
        free(got);
        free(out[i].v);
    }
    for (int i = 0; i < node->n_inputs; i++)
        free(in[i].v);
    ge2_naive_free(n);
    ge2_op_instance_free(&inst);
}

START_TEST(forward_matches_reference)
{
    int op = _i;
    if (ge2_op_case_of(op)->kind == GE2_CASE_ELSEWHERE)
        return;
    for (uint64_t seed = 1; seed <= GE2_OP_TEST_SEEDS; seed++) {
        check_forward(op, GE2_F64, seed);
        check_forward(op, GE2_F32, seed);
    }
}
END_TEST

/* loss = sum(out0 * probe) with a random probe, so every output element gets
 * its own weight (and a scalar loss op gets a dy other than the seed). */
static void check_gradient(int op, uint64_t seed)
{
    ge2_op_instance inst;
    ck_assert_int_eq(ge2_op_case_build(ge2_op_case_of(op), seed, GE2_F64, &inst), GE2_OK);
    ge2_graph *g = inst.graph;
    ge2_tensor *out = g->tensors[g->nodes[inst.node].outputs[0]], *probe, *prod, *loss;
    ck_assert_int_eq(ge2_label(g, "probe", GE2_F64, out->shape, &probe), GE2_OK);
    ck_assert_int_eq(ge2_mul(g, out, probe, &prod), GE2_OK);
    ck_assert_int_eq(ge2_sum_all(g, prod, &loss), GE2_OK);
    ck_assert_int_eq(ge2_backward(g, loss), GE2_OK);

    int64_t np = ge2_shape_numel(out->shape);
    double *pv = ge2_malloc(sizeof(double) * (size_t)np); /* a feed: ge2_op_instance_free frees it */
    for (int64_t i = 0; i < np; i++)
        pv[i] = 0.5 + (double)((seed * 7 + (uint64_t)i * 13) % 17) / 17.0;
    inst.feeds[inst.n_feeds++] = (ge2_feed){probe, pv, probe->shape};
    ck_assert_int_gt(inst.n_wrt, 0);
    for (int w = 0; w < inst.n_wrt; w++)
        ck_assert_int_eq(ge2_grad(inst.wrt[w])->grad_of, inst.wrt[w]->id);
    ge2_check_result r = ge2_grad_check(g, loss, inst.feeds, inst.n_feeds, inst.wrt, inst.n_wrt, 1e-6, 1e-5);
    ck_assert_msg(r.ok, "%s (seed %llu): %s", ge2_op_name((ge2_op)op), (unsigned long long)seed, r.message);
    ge2_op_instance_free(&inst);
}

START_TEST(gradient_matches_finite_differences)
{
    int op = _i;
    if (ge2_op_case_of(op)->kind != GE2_CASE_GRADIENT)
        return;
    for (uint64_t seed = 1; seed <= GE2_OP_TEST_SEEDS; seed++)
        check_gradient(op, seed);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("op_table");
    TCase *tc = tcase_create("ops");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, table_has_no_holes);
    tcase_add_loop_test(tc, forward_matches_reference, 0, ge2_op_count());
    tcase_add_loop_test(tc, gradient_matches_finite_differences, 0, ge2_op_count());
    suite_add_tcase(s, tc);
    return ge2_check_run(s);
}
