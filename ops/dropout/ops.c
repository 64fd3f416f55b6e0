/* The definitions of the dropout family's ops: one struct per op. Both run
 * one kernel: a dropout's backward is the same masking of dy. */
#include "ops/dropout/dropout.h"

/* x -> y */
const ge2_op_def ge2_op_def_dropout = {
    .name = "dropout",
    .min_inputs = 1,
    .max_inputs = 1,
    .max_outputs = 1,
    .flags = GE2_OPF_ELEMENTWISE | GE2_OPF_RANDOM,
    .infer = ge2_infer_DROPOUT,
    .backward = ge2_backward_dropout,
    .cpu = ge2_cpu_dropout,
    .cuda = {NULL, ge2_cuda_dropout_launch, NULL, NULL},
    .stores_bf16 = ge2_stores_bf16_output0,
};

/* dy -> dx */
const ge2_op_def ge2_op_def_dropout_backward = {
    .name = "dropout_backward",
    .min_inputs = 1,
    .max_inputs = 1,
    .max_outputs = 1,
    .flags = GE2_OPF_ELEMENTWISE | GE2_OPF_RANDOM,
    .infer = ge2_infer_DROPOUT,
    .backward = NULL,
    .cpu = ge2_cpu_dropout,
    .cuda = {NULL, ge2_cuda_dropout_launch, NULL, NULL},
    .stores_bf16 = ge2_stores_bf16_output0,
};
