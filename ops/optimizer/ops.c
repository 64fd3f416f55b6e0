/* The definitions of the optimizer family's ops: one struct per op. */
#include "ops/optimizer/optimizer.h"

/* global L2 norm -> control.grad_norm, clip_factor */
const ge2_op_def ge2_op_def_grad_norm = {
    .name = "grad_norm",
    .min_inputs = 0,
    .max_inputs = 0,
    .max_outputs = 0,
    .flags = GE2_OPF_OPTIMIZER,
    .infer = ge2_infer_GRAD_NORM,
    .backward = NULL,
    .cpu = ge2_cpu_grad_norm,
    .cuda = {NULL, ge2_cuda_grad_norm_launch, NULL, NULL},
};

/* SGD / Adam / AdamW: [p0, dp0[, p1, dp1]] */
const ge2_op_def ge2_op_def_optimizer_update = {
    .name = "optimizer_update",
    .min_inputs = 0,
    .max_inputs = 4,
    .max_outputs = 0,
    .flags = GE2_OPF_OPTIMIZER | GE2_OPF_UPDATE,
    .infer = ge2_infer_OPTIMIZER_UPDATE,
    .backward = NULL,
    .cpu = ge2_cpu_optimizer_update,
    .cuda = {NULL, ge2_cuda_optimizer_update_launch, NULL, ge2_cuda_optimizer_update_describe},
};
