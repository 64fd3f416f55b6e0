/* ADD_LAYER_NORM, the residual-add + layer norm pattern's fused op: its
 * definition, inference and CPU kernel, registered when the library loads
 * through the extension API's ge2_op_register, as a user's op would be. */
#include "fusion/add_layer_norm/add_layer_norm.h"
#include "fusion/residual_norm.h"
#include "graph/error.h"

/* a, b [..., C] of one shape and dtype, weight [C][, bias [C]] -> s, y [..., C], saved [2, rows] */
static ge2_status infer(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    GE2_TRY(ge2_infer_need_outputs(node, 3, 3));
    GE2_TRY(ge2_norm_check_rows_x(node, &in[0]));
    GE2_TRY(ge2_infer_need_same_dtype(node, &in[0], &in[1]));
    GE2_TRY(ge2_infer_need_same_shape(node, &in[0], &in[1]));
    GE2_TRY(ge2_norm_check_row_vector(node, &in[0], &in[2], "weight"));
    if (node->n_inputs > 3)
        GE2_TRY(ge2_norm_check_row_vector(node, &in[0], &in[3], "bias"));
    const ge2_ln_geom g = ge2_ln_geom_of(in[0].shape);
    if (!ge2_ln_row4_takes(g.c))
        return ge2_error(GE2_ERR_SHAPE, "ge2_add_layer_norm: %s %s has rows of %lld values; the fused op takes a "
                         "multiple of 4 up to %d",
                         in[0].name, GE2_SHAPE_STR(in[0].shape), (long long)g.c, GE2_LN_ROW4_MAX_C);
    const double eps = GE2_ATTRS(ge2_layer_norm_attrs, node->attrs)->eps;
    if (!(eps > 0))
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_add_layer_norm: eps %g must be > 0", eps);
    out[0] = out[1] = (ge2_desc){in[0].dtype, in[0].shape, NULL};
    out[2] = (ge2_desc){in[0].dtype, ge2_shape2(2, g.rows), NULL};
    return GE2_OK;
}

/* s = a + b, then LAYER_NORM's own CPU kernel on it (fusion/residual_norm.h) */
static ge2_status cpu(const ge2_launch *l) { return ge2_residual_norm_cpu(l, ge2_cpu_layer_norm); }

/* y (output 1), as LAYER_NORM's y: only GEMMs read it, the backward reads s
 * and the statistics */
static bool stores_bf16(const ge2_node *node, int output)
{
    (void)node;
    return output == 1;
}

static const ge2_op_def add_layer_norm_def = {
    .name = "add_layer_norm",
    .min_inputs = 3,
    .max_inputs = 4,
    .max_outputs = 3,
    .flags = 0,
    .infer = infer,
    .backward = NULL, /* made by the fuse pass, after autograd */
    .cpu = cpu,
    .cuda = {NULL, ge2_cuda_add_layer_norm_launch, NULL, NULL},
    .stores_bf16 = stores_bf16,
};

static ge2_op add_layer_norm_op = -1;

ge2_op ge2_op_add_layer_norm(void) { return add_layer_norm_op; }

/* After the built-in ops (their ids come first); a failure leaves the id -1
 * and the rewrite fails with the registry's message */
__attribute__((constructor(GE2_OP_CANDIDATES_PRIORITY))) static void register_add_layer_norm(void)
{
    if (ge2_op_register(&add_layer_norm_def, &add_layer_norm_op) != GE2_OK)
        add_layer_norm_op = -1;
}
