/* A node's attributes are bytes each op family writes and reads as its own
 * struct (graph/ir.h: GE2_ATTRS). Written field by field through that
 * struct and then copied with the whole node, every field must arrive: with
 * C's type-based aliasing GCC -O2 copies the node before the int and bool
 * stores land (the optimizer's accumulation, schedule and loss scaling came
 * out zero), which ge2's -fno-strict-aliasing (tools/build_defs.bzl) rules
 * out. The optimizer's config is the largest family struct, with fields of
 * every kind. */
#include <check.h>
#include <string.h>

#include "graph/ir.h"
#include "optim/optimizer_math.h"
#include "tests/support/check_main.h"

/* Out of line, so the compiler cannot see which config the caller gets. */
__attribute__((noinline)) static ge2_optimizer_config config_of(int accumulation)
{
    ge2_optimizer_config c;
    memset(&c, 0, sizeof c);
    c.kind = GE2_OPT_ADAM;
    c.lr = 2e-3;
    c.accumulation_steps = accumulation;
    c.schedule.kind = GE2_SCHEDULE_STEP;
    c.schedule.step_size = 5;
    c.loss_scaling.dynamic = true;
    return c;
}

__attribute__((noinline)) static void expect_config(const char *what, const ge2_node *node, int accumulation)
{
    const ge2_optimizer_config *c = &GE2_ATTRS(ge2_optim_attrs, node->attrs)->config;
    ck_assert_msg(c->kind == GE2_OPT_ADAM && c->lr == 2e-3, "%s: kind %d, lr %g", what, (int)c->kind, c->lr);
    ck_assert_msg(c->accumulation_steps == accumulation && c->schedule.kind == GE2_SCHEDULE_STEP &&
                      c->schedule.step_size == 5 && c->loss_scaling.dynamic,
                  "%s: accumulation %d (want %d), schedule %d step %lld, loss scaling %d", what, c->accumulation_steps,
                  accumulation, (int)c->schedule.kind, (long long)c->schedule.step_size, (int)c->loss_scaling.dynamic);
    ck_assert_msg(GE2_ATTRS(ge2_optim_attrs, node->attrs)->update_nodes == 2, "%s: update_nodes %d", what,
                  GE2_ATTRS(ge2_optim_attrs, node->attrs)->update_nodes);
}

START_TEST(node_copy_carries_every_field)
{
    const int accumulation = 3 + _i; /* not a constant the compiler could fold in */
    const ge2_optimizer_config cfg = config_of(accumulation);
    ge2_node first, copy;
    memset(&first, 0, sizeof first);
    first.op = 1;
    GE2_ATTRS(ge2_optim_attrs, first.attrs)->config = cfg;
    GE2_ATTRS(ge2_optim_attrs, first.attrs)->update_nodes = 2;
    copy = first; /* as a test makes a second node of the same attrs */
    copy.op = 2;
    expect_config("the node written", &first, accumulation);
    expect_config("its copy", &copy, accumulation);
    ge2_attrs a = copy.attrs; /* and the attrs alone, as ge2_graph_add_node takes them */
    ge2_node again;
    memset(&again, 0, sizeof again);
    again.attrs = a;
    expect_config("the attrs' copy", &again, accumulation);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("node_attrs");
    TCase *tc = tcase_create("node_attrs");
    tcase_add_loop_test(tc, node_copy_carries_every_field, 0, 2);
    suite_add_tcase(s, tc);
    return ge2_check_run(s);
}
