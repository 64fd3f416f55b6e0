/* The definitions of the attention family's ops: one struct per op. */
#include "ops/attention/attention.h"

/* q, k, v -> y, lse */
const ge2_op_def ge2_op_def_attention = {
    .name = "attention",
    .min_inputs = 3,
    .max_inputs = 3,
    .max_outputs = 2,
    .flags = 0,
    .infer = ge2_infer_ATTENTION,
    .backward = ge2_backward_attention,
    .cpu = ge2_cpu_attention,
    .cuda = {ge2_cuda_attention_prepare, ge2_cuda_attention_launch, ge2_cuda_attention_release,
             ge2_cuda_attention_describe},
};

/* dy, q, k, v, y, lse -> dq */
const ge2_op_def ge2_op_def_attention_grad_q = {
    .name = "attention_grad_q",
    .min_inputs = 6,
    .max_inputs = 6,
    .max_outputs = 1,
    .flags = 0,
    .infer = ge2_infer_ATTENTION_GRAD_Q,
    .backward = NULL,
    .cpu = ge2_cpu_attention_grad_q,
    .cuda = {ge2_cuda_attention_prepare, ge2_cuda_attention_grad_q_launch, ge2_cuda_attention_release,
             ge2_cuda_attention_describe},
};

/* dy, q, k, v, y, lse -> dk, dv */
const ge2_op_def ge2_op_def_attention_grad_kv = {
    .name = "attention_grad_kv",
    .min_inputs = 6,
    .max_inputs = 6,
    .max_outputs = 2,
    .flags = 0,
    .infer = ge2_infer_ATTENTION_GRAD_KV,
    .backward = NULL,
    .cpu = ge2_cpu_attention_grad_kv,
    .cuda = {ge2_cuda_attention_prepare, ge2_cuda_attention_grad_kv_launch, ge2_cuda_attention_release,
             ge2_cuda_attention_describe},
};
