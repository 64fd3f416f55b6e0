/* The definitions of the RMS norm family's ops: one struct per op. */
#include "ops/rms_norm/rms_norm.h"

/* x, weight -> y, saved [rows] */
const ge2_op_def ge2_op_def_rms_norm = {
    .name = "rms_norm",
    .min_inputs = 2,
    .max_inputs = 2,
    .max_outputs = 2,
    .flags = 0,
    .infer = ge2_infer_RMS_NORM,
    .backward = ge2_backward_rms_norm,
    .cpu = ge2_cpu_rms_norm,
    .cuda = {NULL, ge2_cuda_rms_norm_launch, NULL, NULL},
};

/* dy, x, weight, saved -> dx, dweight */
const ge2_op_def ge2_op_def_rms_norm_grad = {
    .name = "rms_norm_grad",
    .min_inputs = 4,
    .max_inputs = 4,
    .max_outputs = 2,
    .flags = 0,
    .infer = ge2_infer_RMS_NORM_GRAD,
    .backward = NULL,
    .cpu = ge2_cpu_rms_norm_grad,
    .cuda = {NULL, ge2_cuda_rms_norm_grad_launch, NULL, NULL, ge2_cuda_rms_norm_grad_scratch_bytes},
};
