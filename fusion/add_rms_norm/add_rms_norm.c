/* ADD_RMS_NORM, the residual-add + RMS norm pattern's fused op: its
 * definition, inference and CPU kernel, registered when the library loads
 * through the extension API's ge2_op_register, as a user's op would be. */
#include <stdio.h>
#include <stdlib.h>

#include "fusion/add_rms_norm/add_rms_norm.h"
#include "fusion/residual_norm.h"
#include "graph/error.h"

/* a, b [..., C] of one shape and dtype, weight [C] -> s, y [..., C], saved [rows] */
static ge2_status infer(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    GE2_TRY(ge2_infer_need_outputs(node, 3, 3));
    GE2_TRY(ge2_norm_check_rows_x(node, &in[0]));
    GE2_TRY(ge2_infer_need_same_dtype(node, &in[0], &in[1]));
    GE2_TRY(ge2_infer_need_same_shape(node, &in[0], &in[1]));
    GE2_TRY(ge2_norm_check_row_vector(node, &in[0], &in[2], "weight"));
    const double eps = GE2_ATTRS(ge2_rms_norm_attrs, node->attrs)->eps;
    if (!(eps > 0))
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_add_rms_norm: eps %g must be > 0", eps);
    out[0] = out[1] = (ge2_desc){in[0].dtype, in[0].shape, NULL};
    out[2] = (ge2_desc){in[0].dtype, ge2_shape1(ge2_ln_geom_of(in[0].shape).rows), NULL};
    return GE2_OK;
}

/* s = a + b, then RMS_NORM's own CPU kernel on it (fusion/residual_norm.h) */
static ge2_status cpu(const ge2_launch *l) { return ge2_residual_norm_cpu(l, ge2_cpu_rms_norm); }

static const ge2_op_def add_rms_norm_def = {
    .name = "add_rms_norm",
    .min_inputs = 3,
    .max_inputs = 3,
    .max_outputs = 3,
    .flags = 0,
    .infer = infer,
    .backward = NULL, /* made by the fuse pass, after autograd */
    .cpu = cpu,
    .cuda = {NULL, ge2_cuda_add_rms_norm_launch, NULL, NULL},
};

static ge2_op add_rms_norm_op = -1;

ge2_op ge2_op_add_rms_norm(void) { return add_rms_norm_op; }

/* After the built-in ops (their ids come first); a failure leaves the id -1
 * and the rewrite fails with the registry's message */
__attribute__((constructor(GE2_OP_CANDIDATES_PRIORITY))) static void register_add_rms_norm(void)
{
    if (ge2_op_register(&add_rms_norm_def, &add_rms_norm_op) != GE2_OK)
        add_rms_norm_op = -1;
}
