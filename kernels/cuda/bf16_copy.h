/* bf16 (and fp16) copies of f32 tensors on CUDA, for the kernels that take
 * 16-bit operands under precision BF16 or FP16 (cuBLASLt's GEMMs, cuDNN's
 * convolutions and attention) and for the cast op: round f32 to bf16 or
 * fp16 (nearest even, as graph/bf16.h, graph/f16.h and the CPU backend
 * round) or widen back to f32 (exact), several spans in one launch on the
 * launch's stream. Capturable. */
#ifndef GE2_KERNELS_CUDA_BF16_COPY_H
#define GE2_KERNELS_CUDA_BF16_COPY_H

#ifdef __cplusplus
extern "C" {
#endif

#include <stdint.h>

#include "ge2/extension.h"

#define GE2_BF16_MAX_SPANS 6

/* span i: count[i] elements from src[i] to dst[i] */
typedef struct ge2_bf16_spans {
    int n;
    const void *src[GE2_BF16_MAX_SPANS];
    void *dst[GE2_BF16_MAX_SPANS];
    int64_t count[GE2_BF16_MAX_SPANS];
} ge2_bf16_spans;

/* Appends a span (no-op past GE2_BF16_MAX_SPANS: the launchers then fail) */
static inline void ge2_bf16_span_add(ge2_bf16_spans *s, const void *src, void *dst, int64_t count)
{
    if (s->n < GE2_BF16_MAX_SPANS) {
        s->src[s->n] = src;
        s->dst[s->n] = dst;
        s->count[s->n] = count;
    }
    s->n++;
}

/* f32 src -> bf16 dst; errors name launch's op and node */
ge2_status ge2_cuda_bf16_round(const ge2_launch *launch, const ge2_bf16_spans *spans);
/* The same outside a step: dst[i] = bf16 bits of src[i], i < n, on stream
 * (a cudaStream_t); the parameter copies after a host write of the
 * parameters (capture/backends/backend_cuda.c) */
ge2_status ge2_cuda_bf16_round_on(void *stream, uint16_t *dst, const float *src, int64_t n);
/* bf16 src -> f32 dst */
ge2_status ge2_cuda_bf16_widen(const ge2_launch *launch, const ge2_bf16_spans *spans);
/* The launch's 16-bit operand type (fp16 with launch->f16_operands, else
 * bf16): f32 src rounded to it (nearest even, as graph/f16.h and
 * graph/bf16.h round), or widened from it */
ge2_status ge2_cuda_half_round(const ge2_launch *launch, const ge2_bf16_spans *spans);
ge2_status ge2_cuda_half_widen(const ge2_launch *launch, const ge2_bf16_spans *spans);

#ifdef __cplusplus
}
#endif

#endif /* GE2_KERNELS_CUDA_BF16_COPY_H */
