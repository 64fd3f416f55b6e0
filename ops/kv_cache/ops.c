/* The definition of the key-value cache family's op. */
#include "ops/kv_cache/kv_cache.h"

/* qkv [B, 3C], k_cache [B, T, C], v_cache [B, T, C], positions [B] i32 -> y [B, C] */
const ge2_op_def ge2_op_def_attention_cached = {
    .name = "attention_cached",
    .min_inputs = 4,
    .max_inputs = 4,
    .max_outputs = 1,
    .flags = GE2_OPF_NO_GRAD,
    .infer = ge2_infer_ATTENTION_CACHED,
    .backward = NULL,
    .cpu = ge2_cpu_attention_cached,
    .cuda = {NULL, ge2_cuda_attention_cached_launch, NULL, NULL},
};
