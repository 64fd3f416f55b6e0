/* The definitions of the softmax family's ops: one struct per op. */
#include "ops/softmax/softmax.h"

const ge2_op_def ge2_op_def_softmax = {
    .name = "softmax",
    .min_inputs = 1,
    .max_inputs = 1,
    .max_outputs = 1,
    .flags = 0,
    .infer = ge2_infer_SOFTMAX,
    .backward = ge2_backward_softmax,
    .cpu = ge2_cpu_softmax,
    .cuda = {NULL, ge2_cuda_softmax_launch, NULL, NULL},
};

const ge2_op_def ge2_op_def_log_softmax = {
    .name = "log_softmax",
    .min_inputs = 1,
    .max_inputs = 1,
    .max_outputs = 1,
    .flags = 0,
    .infer = ge2_infer_LOG_SOFTMAX,
    .backward = ge2_backward_softmax,
    .cpu = ge2_cpu_softmax,
    .cuda = {NULL, ge2_cuda_softmax_launch, NULL, NULL},
};

/* dy, y */
const ge2_op_def ge2_op_def_softmax_backward = {
    .name = "softmax_backward",
    .min_inputs = 2,
    .max_inputs = 2,
    .max_outputs = 1,
    .flags = 0,
    .infer = ge2_infer_SOFTMAX_BACKWARD,
    .backward = NULL,
    .cpu = ge2_cpu_softmax_backward,
    .cuda = {NULL, ge2_cuda_softmax_backward_launch, NULL, NULL},
};

/* dy, y */
const ge2_op_def ge2_op_def_log_softmax_backward = {
    .name = "log_softmax_backward",
    .min_inputs = 2,
    .max_inputs = 2,
    .max_outputs = 1,
    .flags = 0,
    .infer = ge2_infer_LOG_SOFTMAX_BACKWARD,
    .backward = NULL,
    .cpu = ge2_cpu_softmax_backward,
    .cuda = {NULL, ge2_cuda_softmax_backward_launch, NULL, NULL},
};
