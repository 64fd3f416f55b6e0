/* The whole-step MLP pattern's row: a key that is exactly one training step
 * of a small MLP (pattern.h) runs as one cooperative kernel (mlp_step.h),
 * in the kernel's phases, feed upload and result copies included. */
#include "fusion/fusion.h"
#include "graph/error.h"
#include "fusion/mlp_step/mlp_step.h"
#include "fusion/mlp_step/pattern.h"

static bool match(const ge2_fusion_key *key, int at, ge2_fusion_group *group, char *why, size_t why_size)
{
    if (at != 0)
        return false; /* the pattern takes a key whole */
    ge2_mlp_step_pattern pat;
    if (!ge2_mlp_step_pattern_find(key->nodes, key->n, key->shape_of, key->ctx, &pat, why, why_size))
        return false;
    group->count = key->n;
    group->n_phases = pat.n_phases;
    for (int i = 0; i < key->n; i++)
        group->phase_of[i] = ge2_mlp_step_phase_of(&pat, i);
    return true;
}

static ge2_status prepare(const ge2_launch *launches, int n, void **state, char *why, size_t why_size)
{
    ge2_mlp_step_desc desc;
    *state = NULL;
    if (!ge2_mlp_step_match(launches, n, &desc, why, why_size))
        return GE2_OK;
    ge2_mlp_step *step;
    GE2_TRY(ge2_mlp_step_prepare(&desc, &step));
    *state = step;
    return GE2_OK;
}

static ge2_status launch(const void *state, const ge2_fusion_run *run)
{
    return ge2_mlp_step_launch(state, run->stream, run->upload, run->results, run->n_results);
}

static void release(void *state) { ge2_mlp_step_free(state); }

static const char *describe(const void *state) { return ge2_mlp_step_describe(state); }

static const ge2_fusion_impl cuda = {
    .does = GE2_FUSION_DOES_UPLOAD | GE2_FUSION_DOES_RESULTS,
    .prepare = prepare,
    .launch = launch,
    .release = release,
    .describe = describe,
};

/* A small relu MLP: every GEMM well within the kernel's limits. */
static ge2_status example(ge2_graph **graph)
{
    static const int64_t widths[] = {48, 64, 32, 10};
    return ge2_fusion_example_mlp(widths, 4, 32, GE2_ACT_RELU, graph);
}

const ge2_fusion_pattern ge2_fusion_mlp_step = {
    .name = "mlp_step",
    .what = "a small MLP's whole training step (forward, cross-entropy, backward, optimizer) in one kernel",
    .switch_env = "GE2_MLP_STEP",
    .match = match,
    .cuda = &cuda,
    .example = example,
};
