/* The definitions of the shape family's ops: one struct per op. */
#include "ops/shape/shape.h"

/* x[, like] */
const ge2_op_def ge2_op_def_reshape = {
    .name = "reshape",
    .min_inputs = 1,
    .max_inputs = 2,
    .max_outputs = 1,
    .flags = GE2_OPF_LIKE1 | GE2_OPF_VIEW,
    .infer = ge2_infer_RESHAPE,
    .backward = ge2_backward_reshape,
    .cpu = ge2_cpu_reshape,
    .cuda = {NULL, ge2_cuda_reshape_launch, NULL, ge2_cuda_reshape_describe},
};

const ge2_op_def ge2_op_def_transpose = {
    .name = "transpose",
    .min_inputs = 1,
    .max_inputs = 1,
    .max_outputs = 1,
    .flags = 0,
    .infer = ge2_infer_TRANSPOSE,
    .backward = ge2_backward_transpose,
    .cpu = ge2_cpu_transpose,
    .cuda = {NULL, ge2_cuda_transpose_launch, NULL, NULL},
};

/* x -> y, dims reordered by ge2_permute_attrs.perm */
const ge2_op_def ge2_op_def_permute = {
    .name = "permute",
    .min_inputs = 1,
    .max_inputs = 1,
    .max_outputs = 1,
    .flags = 0,
    .infer = ge2_infer_PERMUTE,
    .backward = ge2_backward_permute,
    .cpu = ge2_cpu_permute,
    .cuda = {NULL, ge2_cuda_permute_launch, NULL, NULL},
};

const ge2_op_def ge2_op_def_concat = {
    .name = "concat",
    .min_inputs = 1,
    .max_inputs = 8,
    .max_outputs = 1,
    .flags = 0,
    .infer = ge2_infer_CONCAT,
    .backward = ge2_backward_concat,
    .cpu = ge2_cpu_concat,
    .cuda = {NULL, ge2_cuda_concat_launch, NULL, NULL},
    .stores_bf16 = ge2_stores_bf16_output0,
};

/* SLICE may read a bf16 x: the storage pass stores a projection in bf16
 * where only slices (and GEMMs) read it, as attention's q, k, v do */
static bool slice_reads_bf16(const ge2_node *node, int input)
{
    (void)node;
    return input == 0;
}

const ge2_op_def ge2_op_def_slice = {
    .name = "slice",
    .min_inputs = 1,
    .max_inputs = 1,
    .max_outputs = 1,
    .flags = 0,
    .infer = ge2_infer_SLICE,
    .backward = ge2_backward_slice,
    .cpu = ge2_cpu_slice,
    .cuda = {NULL, ge2_cuda_slice_launch, NULL, NULL},
    .stores_bf16 = ge2_stores_bf16_output0,
    .reads_bf16 = slice_reads_bf16,
};

/* dy, like -> zeros with dy in the window */
const ge2_op_def ge2_op_def_slice_backward = {
    .name = "slice_backward",
    .min_inputs = 2,
    .max_inputs = 2,
    .max_outputs = 1,
    .flags = GE2_OPF_LIKE1,
    .infer = ge2_infer_SLICE_BACKWARD,
    .backward = ge2_backward_slice_backward,
    .cpu = ge2_cpu_slice_backward,
    .cuda = {NULL, ge2_cuda_slice_backward_launch, NULL, NULL},
};
