/* The definitions of the elementwise family's ops: one struct per op. */
#include "ops/elementwise/elementwise.h"

const ge2_op_def ge2_op_def_add = {
    .name = "add",
    .min_inputs = 2,
    .max_inputs = 2,
    .max_outputs = 1,
    .flags = GE2_OPF_ELEMENTWISE,
    .infer = ge2_infer_ADD,
    .backward = ge2_backward_add_sub,
    .cpu = ge2_cpu_binary,
    .cuda = {NULL, ge2_cuda_binary_launch, NULL, ge2_cuda_elementwise_describe},
};

const ge2_op_def ge2_op_def_sub = {
    .name = "sub",
    .min_inputs = 2,
    .max_inputs = 2,
    .max_outputs = 1,
    .flags = GE2_OPF_ELEMENTWISE,
    .infer = ge2_infer_SUB,
    .backward = ge2_backward_add_sub,
    .cpu = ge2_cpu_binary,
    .cuda = {NULL, ge2_cuda_binary_launch, NULL, ge2_cuda_elementwise_describe},
};

const ge2_op_def ge2_op_def_mul = {
    .name = "mul",
    .min_inputs = 2,
    .max_inputs = 2,
    .max_outputs = 1,
    .flags = GE2_OPF_ELEMENTWISE,
    .infer = ge2_infer_MUL,
    .backward = ge2_backward_mul,
    .cpu = ge2_cpu_binary,
    .cuda = {NULL, ge2_cuda_binary_launch, NULL, ge2_cuda_elementwise_describe},
};

const ge2_op_def ge2_op_def_scale = {
    .name = "scale",
    .min_inputs = 1,
    .max_inputs = 1,
    .max_outputs = 1,
    .flags = GE2_OPF_ELEMENTWISE,
    .infer = ge2_infer_SCALE,
    .backward = ge2_backward_scale,
    .cpu = ge2_cpu_scale,
    .cuda = {NULL, ge2_cuda_scale_launch, NULL, ge2_cuda_elementwise_describe},
};

const ge2_op_def ge2_op_def_activation = {
    .name = "activation",
    .min_inputs = 1,
    .max_inputs = 1,
    .max_outputs = 1,
    .flags = GE2_OPF_ELEMENTWISE,
    .infer = ge2_infer_ACTIVATION,
    .backward = ge2_backward_activation,
    .cpu = ge2_cpu_activation,
    .cuda = {NULL, ge2_cuda_activation_launch, NULL, ge2_cuda_elementwise_describe},
};

/* dy, saved (z, or y when ge2_act_attrs.from_output) */
const ge2_op_def ge2_op_def_activation_backward = {
    .name = "activation_backward",
    .min_inputs = 2,
    .max_inputs = 2,
    .max_outputs = 1,
    .flags = GE2_OPF_ELEMENTWISE,
    .infer = ge2_infer_ACTIVATION_BACKWARD,
    .backward = NULL,
    .cpu = ge2_cpu_activation_backward,
    .cuda = {NULL, ge2_cuda_activation_backward_launch, NULL, ge2_cuda_elementwise_describe},
};
