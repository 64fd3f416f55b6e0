/* The definitions of the embedding family's ops: one struct per op. */
#include "ops/embedding/embedding.h"

/* table [V, C], ids [...] i32 -> y [..., C] */
const ge2_op_def ge2_op_def_embedding = {
    .name = "embedding",
    .min_inputs = 2,
    .max_inputs = 2,
    .max_outputs = 1,
    .flags = 0,
    .infer = ge2_infer_EMBEDDING,
    .backward = ge2_backward_embedding,
    .cpu = ge2_cpu_embedding,
    .cuda = {NULL, ge2_cuda_embedding_launch, NULL, NULL},
};

/* dy [..., C], ids [...] i32 -> dtable [rows, C] */
const ge2_op_def ge2_op_def_embedding_backward = {
    .name = "embedding_backward",
    .min_inputs = 2,
    .max_inputs = 2,
    .max_outputs = 1,
    .flags = 0,
    .infer = ge2_infer_EMBEDDING_BACKWARD,
    .backward = NULL,
    .cpu = ge2_cpu_embedding_backward,
    .cuda = {NULL, ge2_cuda_embedding_backward_launch, NULL, NULL},
};
