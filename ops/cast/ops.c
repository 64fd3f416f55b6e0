/* The definition of the cast family's op (cast.h). */
#include "ops/cast/cast.h"

/* x -> y, another float dtype */
const ge2_op_def ge2_op_def_cast = {
    .name = "cast",
    .min_inputs = 1,
    .max_inputs = 1,
    .max_outputs = 1,
    .flags = 0,
    .infer = ge2_infer_CAST,
    .backward = ge2_backward_cast,
    .cpu = ge2_cpu_cast,
    .cuda = {NULL, ge2_cuda_cast_launch, NULL, NULL},
};
