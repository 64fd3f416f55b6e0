// Rounding f32 to bf16 or fp16 and widening back to f32, a span after another in one
// grid-stride launch. Four elements a thread where the span's source and
// destination are aligned for it (a view may start anywhere), one at a time
// otherwise and for the tail.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/bf16_copy.h"
#include "kernels/cuda/check.h"

// One 16-bit type's element conversions: bf16 or fp16 (nearest even both)
template <typename H> struct ge2_half_ops;
template <> struct ge2_half_ops<__nv_bfloat16> {
    static __device__ __forceinline__ __nv_bfloat16 from(float x) { return __float2bfloat16_rn(x); }
    static __device__ __forceinline__ float to(__nv_bfloat16 x) { return __bfloat162float(x); }
};
template <> struct ge2_half_ops<__half> {
    static __device__ __forceinline__ __half from(float x) { return __float2half_rn(x); }
    static __device__ __forceinline__ float to(__half x) { return __half2float(x); }
};

template <typename H>
__device__ void ge2_half_round_span(int64_t n, const float *x, H *y, int64_t first, int64_t stride)
{
    using ops = ge2_half_ops<H>;
    int64_t done = 0;
    if ((uintptr_t)x % 16 == 0 && (uintptr_t)y % 8 == 0) {
        done = n / 4 * 4;
        for (int64_t i = first; i < n / 4; i += stride) { // four in, one 8-byte store out
            const float4 v = reinterpret_cast<const float4 *>(x)[i];
            const H h[4] = {ops::from(v.x), ops::from(v.y), ops::from(v.z), ops::from(v.w)};
            uint2 packed;
            memcpy(&packed, h, sizeof packed);
            reinterpret_cast<uint2 *>(y)[i] = packed;
        }
    }
    for (int64_t i = done + first; i < n; i += stride)
        y[i] = ops::from(x[i]);
}

template <typename H>
__device__ void ge2_half_widen_span(int64_t n, const H *x, float *y, int64_t first, int64_t stride)
{
    using ops = ge2_half_ops<H>;
    int64_t done = 0;
    if ((uintptr_t)x % 8 == 0 && (uintptr_t)y % 16 == 0) {
        done = n / 4 * 4;
        for (int64_t i = first; i < n / 4; i += stride) { // one 8-byte load in, four out
            const uint2 packed = reinterpret_cast<const uint2 *>(x)[i];
            H h[4];
            memcpy(h, &packed, sizeof packed);
            reinterpret_cast<float4 *>(y)[i] = make_float4(ops::to(h[0]), ops::to(h[1]), ops::to(h[2]), ops::to(h[3]));
        }
    }
    for (int64_t i = done + first; i < n; i += stride)
        y[i] = ops::to(x[i]);
}

template <typename H> __global__ void ge2_half_copy_kernel(ge2_bf16_spans s, bool round)
{
    const int64_t first = blockIdx.x * (int64_t)blockDim.x + threadIdx.x, stride = (int64_t)gridDim.x * blockDim.x;
    for (int i = 0; i < s.n; i++)
        if (round)
            ge2_half_round_span<H>(s.count[i], (const float *)s.src[i], (H *)s.dst[i], first, stride);
        else
            ge2_half_widen_span<H>(s.count[i], (const H *)s.src[i], (float *)s.dst[i], first, stride);
}

// The spans' one launch on stream (none when every span is empty)
template <typename H> static void enqueue(const ge2_bf16_spans *s, bool round, cudaStream_t stream)
{
    int64_t longest = 0;
    for (int i = 0; i < s->n; i++)
        longest = s->count[i] > longest ? s->count[i] : longest;
    if (longest > 0)
        ge2_half_copy_kernel<H><<<ge2_cuda_blocks((longest + 3) / 4, GE2_CUDA_THREADS), GE2_CUDA_THREADS, 0, stream>>>(
            *s, round);
}

template <typename H> static ge2_status copy(const ge2_launch *l, const ge2_bf16_spans *s, bool round)
{
    if (s->n > GE2_BF16_MAX_SPANS)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_%s (node %d): %d 16-bit copies in one launch, at most %d",
                         ge2_cuda_op_name(l), l->node ? l->node->id : -1, s->n, GE2_BF16_MAX_SPANS);
    enqueue<H>(s, round, ge2_cuda_stream(l));
    return ge2_cuda_check_launch(l, "ge2_half_copy_kernel");
}

extern "C" ge2_status ge2_cuda_bf16_round_on(void *stream, uint16_t *dst, const float *src, int64_t n)
{
    ge2_bf16_spans s = {};
    ge2_bf16_span_add(&s, src, dst, n);
    enqueue<__nv_bfloat16>(&s, true, (cudaStream_t)stream);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return ge2_error(GE2_ERR_CUDA, "ge2: rounding %lld parameters into their bf16 copies: %s", (long long)n,
                         cudaGetErrorString(e));
    return GE2_OK;
}

extern "C" ge2_status ge2_cuda_bf16_round(const ge2_launch *l, const ge2_bf16_spans *s)
{
    return copy<__nv_bfloat16>(l, s, true);
}
extern "C" ge2_status ge2_cuda_bf16_widen(const ge2_launch *l, const ge2_bf16_spans *s)
{
    return copy<__nv_bfloat16>(l, s, false);
}

extern "C" ge2_status ge2_cuda_half_round(const ge2_launch *l, const ge2_bf16_spans *s)
{
    return l->f16_operands ? copy<__half>(l, s, true) : copy<__nv_bfloat16>(l, s, true);
}

extern "C" ge2_status ge2_cuda_half_widen(const ge2_launch *l, const ge2_bf16_spans *s)
{
    return l->f16_operands ? copy<__half>(l, s, false) : copy<__nv_bfloat16>(l, s, false);
}
