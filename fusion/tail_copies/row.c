/* The tail copies pattern's row: when a step ends with the optimizer's
 * update, that kernel also copies the step's loss and metrics to the host
 * staging (ops/optimizer: ge2_cuda_optimizer_update_launch_copying), one
 * kernel fewer than a copy kernel after it. */
#include "fusion/fusion.h"
#include "graph/error.h"
#include "kernels/cuda/step_copy.h"
#include "ops/optimizer/optimizer.h"

static bool is_update(const ge2_node *node) { return node->op == GE2_OP_OPTIMIZER_UPDATE; }

static bool match(const ge2_fusion_key *key, int at, ge2_fusion_group *group, char *why, size_t why_size)
{
    if (at != key->n - 1 || !is_update(key->nodes[at]))
        return ge2_fusion_no(why, why_size, "the step does not end with an optimizer update");
    return ge2_fusion_one_phase(group, 1);
}

static ge2_status prepare(const ge2_launch *launches, int n, void **state, char *why, size_t why_size)
{
    static const bool taken = true;
    /* the launch must run the update's own kernel, which this one extends */
    const bool own = n == 1 && is_update(launches[0].node) &&
                     (!launches[0].kernel || launches[0].kernel == &ge2_op_def_of(launches[0].node->op)->cuda);
    *state = own ? (void *)&taken : NULL;
    if (!*state && why && why_size)
        snprintf(why, why_size, "not an optimizer update running its own kernel");
    return GE2_OK;
}

static ge2_status launch(const void *state, const ge2_fusion_run *run)
{
    (void)state;
    const int own = run->results ? (run->n_results < GE2_CUDA_MAX_COPIES ? run->n_results : GE2_CUDA_MAX_COPIES) : 0;
    GE2_TRY(ge2_cuda_optimizer_update_launch_copying(&run->launches[0], run->results, own));
    /* more results than one kernel copies: a copy kernel after it */
    return own < run->n_results ? ge2_cuda_copy_launch(run->results + own, run->n_results - own, run->stream)
                                : GE2_OK;
}

static const ge2_fusion_impl cuda = {
    .does = GE2_FUSION_DOES_RESULTS,
    .prepare = prepare,
    .launch = launch,
    .release = NULL,
    .describe = NULL, /* the report names the update's own kernel */
};

/* Any training step the whole-step kernel declines ends with the update. */
static ge2_status example(ge2_graph **graph)
{
    static const int64_t widths[] = {48, 64, 10};
    return ge2_fusion_example_mlp(widths, 3, 32, GE2_ACT_TANH, graph);
}

const ge2_fusion_pattern ge2_fusion_tail_copies = {
    .name = "tail_copies",
    .what = "the step's last optimizer update also copies the loss and metrics back",
    .switch_env = "GE2_TAIL_COPIES",
    .match = match,
    .cuda = &cuda,
    .example = example,
};
