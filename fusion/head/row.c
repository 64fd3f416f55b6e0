/* The classifier head pattern's row: two consecutive launches of a head
 * (pattern.h) as one kernel (head.h), side by side in one phase. */
#include "fusion/fusion.h"
#include "fusion/head/head.h"
#include "fusion/head/pattern.h"

static bool match(const ge2_fusion_key *key, int at, ge2_fusion_group *group, char *why, size_t why_size)
{
    if (at + 1 >= key->n || ge2_head_pair_of(key->nodes[at], key->nodes[at + 1]) == GE2_HEAD_NONE)
        return ge2_fusion_no(why, why_size, "no LINEAR + CROSS_ENTROPY or pair of one dz's backward GEMMs in a row");
    return ge2_fusion_one_phase(group, 2);
}

/* The state is the pair's kind, as a pointer into this table. */
static const ge2_head_kind kinds[] = {GE2_HEAD_NONE, GE2_HEAD_LOSS, GE2_HEAD_GRADIENTS};

static ge2_status prepare(const ge2_launch *launches, int n, void **state, char *why, size_t why_size)
{
    ge2_head_kind kind = n == 2 ? ge2_head_match(launches, why, why_size) : GE2_HEAD_NONE;
    *state = kind == GE2_HEAD_NONE ? NULL : (void *)&kinds[kind];
    return GE2_OK;
}

static ge2_status launch(const void *state, const ge2_fusion_run *run)
{
    return ge2_head_launch(*(const ge2_head_kind *)state, run->launches);
}

static const char *describe(const void *state) { return ge2_head_describe(*(const ge2_head_kind *)state); }

static const ge2_fusion_impl cuda = {
    .does = 0,
    .prepare = prepare,
    .launch = launch,
    .release = NULL,
    .describe = describe,
};

/* tanh hidden layers: the whole-step kernel (relu or none) declines. */
static ge2_status example(ge2_graph **graph)
{
    static const int64_t widths[] = {48, 64, 10};
    return ge2_fusion_example_mlp(widths, 3, 32, GE2_ACT_TANH, graph);
}

const ge2_fusion_pattern ge2_fusion_head = {
    .name = "head",
    .what = "a small classifier head's LINEAR + cross-entropy, and its two backward GEMMs, one kernel per pair",
    .switch_env = "GE2_HEAD_KERNEL",
    .match = match,
    .cuda = &cuda,
    .example = example,
};
