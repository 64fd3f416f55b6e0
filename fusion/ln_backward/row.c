/* The layer-norm backward pattern's row: a layer norm's GRAD_PARAMS and
 * GRAD_INPUT, consecutive in the schedule, as one kernel
 * (ln_backward.h), side by side in one phase. */
#include "fusion/fusion.h"
#include "fusion/ln_backward/ln_backward.h"
#include "graph/error.h"

static bool match(const ge2_fusion_key *key, int at, ge2_fusion_group *group, char *why, size_t why_size)
{
    if (at + 1 >= key->n || !ge2_ln_backward_pair(key->nodes[at], key->nodes[at + 1])) {
        if (why && why_size)
            snprintf(why, why_size, "no LAYER_NORM_GRAD_PARAMS then LAYER_NORM_GRAD_INPUT of one dy and x in a row");
        return false;
    }
    return ge2_fusion_pair_group(group);
}

/* The state only says the kernel takes the pair: its launches carry the rest. */
static const char taken = 1;

static ge2_status prepare(const ge2_launch *launches, int n, void **state, char *why, size_t why_size)
{
    *state = n == 2 && ge2_ln_backward_takes(launches, why, why_size) ? (void *)&taken : NULL;
    return GE2_OK;
}

static ge2_status launch(const void *state, const ge2_fusion_run *run)
{
    (void)state;
    return ge2_ln_backward_launch(run->launches);
}

static const char *describe(const void *state)
{
    (void)state;
    return "ge2 fused layer-norm backward (dx and the parameter gradients, dy and x read once)";
}

static const ge2_fusion_impl cuda = {
    .does = GE2_FUSION_ANY_PRECISION, /* no GEMM: f32 layer norms under bf16 fuse too */
    .prepare = prepare,
    .launch = launch,
    .release = NULL,
    .describe = describe,
};

/* x -> linear -> h + layer_norm(h) -> head: the layer norm's backward
 * makes dx for the first linear's weight gradient, with the residual's
 * gradient as its addend (fusion/add_into); rows of 300 (not a multiple of
 * a warp; 12 values a lane, as the GPT's 384) and 100 rows (the last
 * block's 8 not all there) */
static ge2_status example(ge2_graph **graph)
{
    ge2_graph *g;
    ge2_tensor *x, *labels, *w1, *h = NULL, *n = NULL;
    GE2_TRY(ge2_graph_new(&g));
    ge2_status st;
    st = ge2_input(g, "x", GE2_F32, ge2_shape2(100, 40), &x);
    if (st == GE2_OK)
        st = ge2_label(g, "labels", GE2_I32, ge2_shape1(100), &labels);
    if (st == GE2_OK)
        st = ge2_parameter(g, "fc.weight", GE2_F32, ge2_shape2(300, 40), (ge2_init){GE2_INIT_UNIFORM, -0.2, 0.2, 0},
                           &w1);
    if (st == GE2_OK)
        st = ge2_linear(g, x, w1, NULL, GE2_ACT_NONE, 0.0f, &h);
    if (st == GE2_OK)
        st = ge2_layer_norm_layer(g, "ln", h, true, 1e-5, &n);
    if (st == GE2_OK)
        st = ge2_add(g, h, n, &h);
    return ge2_fusion_example_head(g, st, h, 10, labels, graph);
}

const ge2_fusion_pattern ge2_fusion_ln_backward = {
    .name = "ln_backward",
    .what = "a layer norm's parameter and input gradients, one kernel reading dy and x once",
    .match = match,
    .cuda = &cuda,
    .example = example,
};
