/* The definition of the data-parallel all-reduce (collective.h). */
#include "ops/collective/collective.h"

/* [dp0, dp1, ...] summed over the ranks in place; no outputs */
const ge2_op_def ge2_op_def_all_reduce = {
    .name = "all_reduce",
    .min_inputs = 1,
    .max_inputs = GE2_MAX_INPUTS,
    .max_outputs = 0,
    .flags = GE2_OPF_OPTIMIZER | GE2_OPF_IN_PLACE,
    .infer = ge2_infer_ALL_REDUCE,
    .backward = NULL,
    .cpu = ge2_cpu_all_reduce,
    .cuda = {ge2_cuda_all_reduce_prepare, ge2_cuda_all_reduce_launch, ge2_cuda_all_reduce_release,
             ge2_cuda_all_reduce_describe},
};
