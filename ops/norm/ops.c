/* The definitions of the normalization family's ops: one struct per op. */
#include "ops/norm/norm.h"

/* x, weight, bias, running_mean, running_var[, num_batches_tracked] -> y, saved */
const ge2_op_def ge2_op_def_batch_norm = {
    .name = "batch_norm",
    .min_inputs = 5,
    .max_inputs = 6,
    .max_outputs = 2,
    .flags = 0,
    .infer = ge2_infer_BATCH_NORM,
    .backward = ge2_backward_batch_norm,
    .cpu = ge2_cpu_batch_norm,
    .cuda = {NULL, ge2_cuda_batch_norm_launch, NULL, NULL},
    .reads_bf16 = ge2_reads_bf16_input0, /* x: a convolution's output stored in bf16 */
};

/* dy, x, saved -> dweight, dbias */
const ge2_op_def ge2_op_def_batch_norm_grad_params = {
    .name = "batch_norm_grad_params",
    .min_inputs = 3,
    .max_inputs = 3,
    .max_outputs = 2,
    .flags = 0,
    .infer = ge2_infer_BATCH_NORM_GRAD_PARAMS,
    .backward = NULL,
    .cpu = ge2_cpu_batch_norm_grad_params,
    .cuda = {NULL, ge2_cuda_batch_norm_grad_params_launch, NULL, NULL},
    .reads_bf16 = ge2_reads_bf16_input1, /* x */
};

/* dy, x, weight, saved, dweight, dbias -> dx */
const ge2_op_def ge2_op_def_batch_norm_grad_input = {
    .name = "batch_norm_grad_input",
    .min_inputs = 6,
    .max_inputs = 6,
    .max_outputs = 1,
    .flags = 0,
    .infer = ge2_infer_BATCH_NORM_GRAD_INPUT,
    .backward = NULL,
    .cpu = ge2_cpu_batch_norm_grad_input,
    .cuda = {NULL, ge2_cuda_batch_norm_grad_input_launch, NULL, NULL},
    .stores_bf16 = ge2_stores_bf16_output0, /* dx, when only the convolution's backward GEMMs read it */
    .reads_bf16 = ge2_reads_bf16_input1,    /* x */
};

/* x, weight[, bias] -> y, saved */
const ge2_op_def ge2_op_def_layer_norm = {
    .name = "layer_norm",
    .min_inputs = 2,
    .max_inputs = 3,
    .max_outputs = 2,
    .flags = 0,
    .infer = ge2_infer_LAYER_NORM,
    .backward = ge2_backward_layer_norm,
    .cpu = ge2_cpu_layer_norm,
    .cuda = {NULL, ge2_cuda_layer_norm_launch, NULL, NULL},
    .stores_bf16 = ge2_stores_bf16_output0, /* the backward reads x and the statistics, never y */
};

/* dy, x, saved -> dweight, dbias */
const ge2_op_def ge2_op_def_layer_norm_grad_params = {
    .name = "layer_norm_grad_params",
    .min_inputs = 3,
    .max_inputs = 3,
    .max_outputs = 2,
    .flags = 0,
    .infer = ge2_infer_LAYER_NORM_GRAD_PARAMS,
    .backward = NULL,
    .cpu = ge2_cpu_layer_norm_grad_params,
    .cuda = {NULL, ge2_cuda_layer_norm_grad_params_launch, NULL, NULL},
};

/* dy, x, weight, saved -> dx */
const ge2_op_def ge2_op_def_layer_norm_grad_input = {
    .name = "layer_norm_grad_input",
    .min_inputs = 4,
    .max_inputs = 4,
    .max_outputs = 1,
    .flags = 0,
    .infer = ge2_infer_LAYER_NORM_GRAD_INPUT,
    .backward = NULL,
    .cpu = ge2_cpu_layer_norm_grad_input,
    .cuda = {NULL, ge2_cuda_layer_norm_grad_input_launch, NULL, NULL},
};
