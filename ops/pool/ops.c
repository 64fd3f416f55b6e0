/* The definitions of the pooling family's ops: one struct per op. */
#include "ops/pool/pool.h"

const ge2_op_def ge2_op_def_max_pool2d = {
    .name = "max_pool2d",
    .min_inputs = 1,
    .max_inputs = 1,
    .max_outputs = 1,
    .flags = 0,
    .infer = ge2_infer_POOL2D,
    .backward = ge2_backward_pool2d,
    .cpu = ge2_cpu_pool2d,
    .cuda = {NULL, ge2_cuda_pool2d_launch, NULL, NULL},
};

const ge2_op_def ge2_op_def_avg_pool2d = {
    .name = "avg_pool2d",
    .min_inputs = 1,
    .max_inputs = 1,
    .max_outputs = 1,
    .flags = 0,
    .infer = ge2_infer_POOL2D,
    .backward = ge2_backward_pool2d,
    .cpu = ge2_cpu_pool2d,
    .cuda = {NULL, ge2_cuda_pool2d_launch, NULL, NULL},
};

/* dy, x: the maxima are found again in x */
const ge2_op_def ge2_op_def_max_pool2d_backward = {
    .name = "max_pool2d_backward",
    .min_inputs = 2,
    .max_inputs = 2,
    .max_outputs = 1,
    .flags = 0,
    .infer = ge2_infer_POOL2D_BACKWARD,
    .backward = NULL,
    .cpu = ge2_cpu_pool2d_backward,
    .cuda = {NULL, ge2_cuda_pool2d_backward_launch, NULL, NULL},
};

/* dy, x (shape only) */
const ge2_op_def ge2_op_def_avg_pool2d_backward = {
    .name = "avg_pool2d_backward",
    .min_inputs = 2,
    .max_inputs = 2,
    .max_outputs = 1,
    .flags = GE2_OPF_LIKE1,
    .infer = ge2_infer_POOL2D_BACKWARD,
    .backward = NULL,
    .cpu = ge2_cpu_pool2d_backward,
    .cuda = {NULL, ge2_cuda_pool2d_backward_launch, NULL, NULL},
};
