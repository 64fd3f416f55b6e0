/* planner/groups.c: a key that is one whole-step MLP training step
 * (fusion/mlp_step/pattern.h) gets an arena where no two tensors used in a
 * common kernel phase share bytes, checked here from the plan alone: each
 * arena tensor's phases are re-derived from the schedule and its bytes
 * compared with every other's. Without the widening the bench's small MLP
 * fails this (tensors 8 and 18, phases 1-4 and 3-4, share bytes). Keys the
 * kernel does not run keep their schedule lifetimes: the large MLP's arena
 * is checked in plan_mlp_test.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "capture/program_inspect.h"
#include "fusion/mlp_step/pattern.h"
#include "tests/gpu/mlp_spec.h"
#include "tests/support/check_main.h"

static ge2_shape shape_in_plan(const void *ctx, int id) { return ((const ge2_plan *)ctx)->tensors[id].shape; }

/* Compiles spec on the CPU, runs one step and checks its train key's arena;
 * returns the number of tensor pairs whose phases meet (all checked). */
static int check_arena(const mlp_spec *spec)
{
    spec_model m;
    spec_open(&m, spec, GE2_DEVICE_CPU, 3);
    spec_step(&m, 7, 0);
    const ge2_plan *plan = ge2_program_key_view(m.program, ge2_program_last_key(m.program, GE2_MODE_TRAIN)).plan;
    const ge2_graph *graph = ge2_program_graph(m.program);
    const ge2_node *nodes[64];
    ck_assert_int_le(plan->n_steps, 64);
    for (int p = 0; p < plan->n_steps; p++)
        nodes[p] = &graph->nodes[plan->schedule[p]];
    ge2_mlp_step_pattern pat;
    char why[160];
    ck_assert_msg(ge2_mlp_step_pattern_find(nodes, plan->n_steps, shape_in_plan, plan, &pat, why, sizeof why),
                  "%s: not a whole-step MLP key: %s", spec->name, why);

    int first[256], last[256];
    ck_assert_int_le(plan->n_tensors, 256);
    for (int t = 0; t < plan->n_tensors; t++) {
        first[t] = pat.n_phases;
        last[t] = -1;
    }
    for (int p = 0; p < plan->n_steps; p++) {
        const int q = ge2_mlp_step_phase_of(&pat, p);
        for (int k = 0; k < nodes[p]->n_inputs + nodes[p]->n_outputs; k++) {
            const int t = k < nodes[p]->n_inputs ? nodes[p]->inputs[k] : nodes[p]->outputs[k - nodes[p]->n_inputs];
            first[t] = q < first[t] ? q : first[t];
            last[t] = q > last[t] ? q : last[t];
        }
    }
    int meeting = 0;
    for (int a = 0; a < plan->n_tensors; a++)
        for (int b = a + 1; b < plan->n_tensors; b++) {
            const ge2_plan_tensor *ta = &plan->tensors[a], *tb = &plan->tensors[b];
            if (ta->pool != GE2_POOL_ARENA || tb->pool != GE2_POOL_ARENA || last[a] < 0 || last[b] < 0)
                continue;
            if (first[a] > last[b] || first[b] > last[a])
                continue;
            meeting++;
            const bool share = ta->offset < tb->offset + tb->bytes && tb->offset < ta->offset + ta->bytes;
            ck_assert_msg(!share, "%s: tensors %d and %d (phases %d-%d and %d-%d) share arena bytes", spec->name, a, b,
                          first[a], last[a], first[b], last[b]);
        }
    spec_close(&m);
    return meeting;
}

START_TEST(test_no_shared_bytes_within_a_phase)
{
    const int64_t small[] = {784, 256, 128, 10}, narrow[] = {64, 48, 40, 36, 24}, odd[] = {33, 70, 5};
    mlp_spec specs[] = {mlp_spec_of("small", 3, small, 64, GE2_OPT_ADAM), mlp_spec_of("narrow", 4, narrow, 16, GE2_OPT_ADAM),
                        mlp_spec_of("odd", 2, odd, 37, GE2_OPT_ADAM)};
    specs[2].accuracy = true;
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++)
        ck_assert_int_gt(check_arena(&specs[i]), 0); /* the check compared something */
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("fusion_lifetimes");
    TCase *tc = tcase_create("arena");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_no_shared_bytes_within_a_phase);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ge2_check_run(suite()); }
