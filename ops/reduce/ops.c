/* The definitions of the reduce family's ops: one struct per op. */
#include "ops/reduce/reduce.h"
#include "ops/elementwise/elementwise.h" /* EXPAND runs on the broadcasting elementwise kernel */

const ge2_op_def ge2_op_def_sum = {
    .name = "sum",
    .min_inputs = 1,
    .max_inputs = 1,
    .max_outputs = 1,
    .flags = 0,
    .infer = ge2_infer_SUM,
    .backward = ge2_backward_reduce,
    .cpu = ge2_cpu_reduce,
    .cuda = {NULL, ge2_cuda_reduce_launch, NULL, ge2_cuda_reduce_describe},
};

const ge2_op_def ge2_op_def_mean = {
    .name = "mean",
    .min_inputs = 1,
    .max_inputs = 1,
    .max_outputs = 1,
    .flags = 0,
    .infer = ge2_infer_MEAN,
    .backward = ge2_backward_reduce,
    .cpu = ge2_cpu_reduce,
    .cuda = {NULL, ge2_cuda_reduce_launch, NULL, ge2_cuda_reduce_describe},
};

/* x, like -> broadcast x to like's shape, times scale */
const ge2_op_def ge2_op_def_expand = {
    .name = "expand",
    .min_inputs = 2,
    .max_inputs = 2,
    .max_outputs = 1,
    .flags = GE2_OPF_LIKE1,
    .infer = ge2_infer_EXPAND,
    .backward = ge2_backward_expand,
    .cpu = ge2_cpu_expand,
    .cuda = {NULL, ge2_cuda_expand_launch, NULL, ge2_cuda_elementwise_describe},
};

/* x, like -> sum x over broadcast dims down to like's shape */
const ge2_op_def ge2_op_def_reduce_to = {
    .name = "reduce_to",
    .min_inputs = 2,
    .max_inputs = 2,
    .max_outputs = 1,
    .flags = GE2_OPF_LIKE1,
    .infer = ge2_infer_REDUCE_TO,
    .backward = ge2_backward_reduce_to,
    .cpu = ge2_cpu_reduce_to,
    .cuda = {NULL, ge2_cuda_reduce_launch, NULL, ge2_cuda_reduce_describe},
};
