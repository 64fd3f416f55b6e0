/* The key-value cache family: ATTENTION_CACHED, one decoding step of causal
 * self-attention that keeps the keys and values of the tokens before it:
 * qkv [B, 3C] (each sequence's newest token through c_attn, q's heads, k's,
 * v's), k_cache and v_cache [B, T, C] persistent buffers, positions [B] i32
 * -> y [B, C]. It writes the token's k and v into row positions[b] of the
 * caches, then attends its q over rows [0, positions[b]]: a generation step
 * costs one token's work, not the whole block's. Inference only: no backward.
 *
 * ops.c holds the definition (registered by ops/builtin.def's line); the
 * rest of the folder is its parts: infer.c, api.c (the public builder),
 * cpu.c, cuda.cu and test.c (test cases and the float64 reference). */
#ifndef GE2_OPS_KV_CACHE_KV_CACHE_H
#define GE2_OPS_KV_CACHE_KV_CACHE_H

/* nvcc compiles the CUDA launchers as C++: these are C declarations */
#ifdef __cplusplus
extern "C" {
#endif

#include <stdint.h>

#include "autograd/autograd.h"
#include "graph/op_support.h"
#include "ops/ops.h"

/* The node's own attributes (its GE2_OP_ATTRS_BYTES) */
typedef struct ge2_attention_cached_attrs {
    int64_t n_head;
} ge2_attention_cached_attrs;

static inline int64_t ge2_attention_cached_heads(const ge2_node *node)
{
    return ((const ge2_attention_cached_attrs *)ge2_node_attrs(node))->n_head;
}

/* infer.c */
ge2_status ge2_infer_ATTENTION_CACHED(const ge2_node *node, const ge2_desc *in, ge2_desc *out);

/* cpu.c: f32, or f64 for the float64 suites */
ge2_status ge2_cpu_attention_cached(const ge2_launch *l);

/* cuda.cu (f32): enqueue on launch->stream, capturable */
ge2_status ge2_cuda_attention_cached_launch(const ge2_launch *launch);

/* ops.c */
extern const ge2_op_def ge2_op_def_attention_cached;

#ifdef __cplusplus
}
#endif

#endif /* GE2_OPS_KV_CACHE_KV_CACHE_H */
