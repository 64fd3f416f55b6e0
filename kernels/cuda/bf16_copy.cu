// Rounding f32 to bf16 and widening bf16 to f32, a span after another in one
// grid-stride launch. Four elements a thread where the span's source and
// destination are aligned for it (a view may start anywhere), one at a time
// otherwise and for the tail.
#include <cuda_bf16.h>

#include "kernels/cuda/bf16_copy.h"
#include "kernels/cuda/bf16_store.h"
#include "kernels/cuda/check.h"

__device__ void ge2_bf16_round_span(int64_t n, const float *x, __nv_bfloat16 *y, int64_t first, int64_t stride)
{
    int64_t done = 0;
    if ((uintptr_t)x % 16 == 0 && (uintptr_t)y % 8 == 0) {
        done = n / 4 * 4;
        for (int64_t i = first; i < n / 4; i += stride)
            ge2_store4(y + 4 * i, reinterpret_cast<const float4 *>(x)[i]);
    }
    for (int64_t i = done + first; i < n; i += stride)
        ge2_store(&y[i], x[i]);
}

__device__ void ge2_bf16_widen_span(int64_t n, const __nv_bfloat16 *x, float *y, int64_t first, int64_t stride)
{
    int64_t done = 0;
    if ((uintptr_t)x % 8 == 0 && (uintptr_t)y % 16 == 0) {
        done = n / 4 * 4;
        for (int64_t i = first; i < n / 4; i += stride) {
            const __nv_bfloat162 *in = reinterpret_cast<const __nv_bfloat162 *>(x) + 2 * i;
            const float2 a = __bfloat1622float2(in[0]), b = __bfloat1622float2(in[1]);
            reinterpret_cast<float4 *>(y)[i] = make_float4(a.x, a.y, b.x, b.y);
        }
    }
    for (int64_t i = done + first; i < n; i += stride)
        y[i] = __bfloat162float(x[i]);
}

__global__ void ge2_bf16_copy_kernel(ge2_bf16_spans s, bool round)
{
    const int64_t first = blockIdx.x * (int64_t)blockDim.x + threadIdx.x, stride = (int64_t)gridDim.x * blockDim.x;
    for (int i = 0; i < s.n; i++)
        if (round)
            ge2_bf16_round_span(s.count[i], (const float *)s.src[i], (__nv_bfloat16 *)s.dst[i], first, stride);
        else
            ge2_bf16_widen_span(s.count[i], (const __nv_bfloat16 *)s.src[i], (float *)s.dst[i], first, stride);
}

// The spans' one launch on stream (none when every span is empty)
static void enqueue(const ge2_bf16_spans *s, bool round, cudaStream_t stream)
{
    int64_t longest = 0;
    for (int i = 0; i < s->n; i++)
        longest = s->count[i] > longest ? s->count[i] : longest;
    if (longest > 0)
        ge2_bf16_copy_kernel<<<ge2_cuda_blocks((longest + 3) / 4, GE2_CUDA_THREADS), GE2_CUDA_THREADS, 0, stream>>>(
            *s, round);
}

static ge2_status copy(const ge2_launch *l, const ge2_bf16_spans *s, bool round)
{
    if (s->n > GE2_BF16_MAX_SPANS)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_%s (node %d): %d bf16 copies in one launch, at most %d",
                         ge2_cuda_op_name(l), l->node ? l->node->id : -1, s->n, GE2_BF16_MAX_SPANS);
    enqueue(s, round, ge2_cuda_stream(l));
    return ge2_cuda_check_launch(l, "ge2_bf16_copy_kernel");
}

extern "C" ge2_status ge2_cuda_bf16_round_on(void *stream, uint16_t *dst, const float *src, int64_t n)
{
    ge2_bf16_spans s = {};
    ge2_bf16_span_add(&s, src, dst, n);
    enqueue(&s, true, (cudaStream_t)stream);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return ge2_error(GE2_ERR_CUDA, "ge2: rounding %lld parameters into their bf16 copies: %s", (long long)n,
                         cudaGetErrorString(e));
    return GE2_OK;
}

extern "C" ge2_status ge2_cuda_bf16_round(const ge2_launch *l, const ge2_bf16_spans *s) { return copy(l, s, true); }
extern "C" ge2_status ge2_cuda_bf16_widen(const ge2_launch *l, const ge2_bf16_spans *s) { return copy(l, s, false); }
