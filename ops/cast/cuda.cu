// CAST on the GPU, f32 <-> bf16: CUDA's own rounding (__float2bfloat16_rn),
// which op_agreement_test holds to graph/bf16.h's bit for bit, and the
// exact widening.
#include <cuda_bf16.h>

#include "kernels/cuda/check.h"
#include "ops/cast/cast.h"

// ------------------------------------------------------------------- kernels

__global__ void ge2_cast_to_bf16_kernel(long long n, const float *x, __nv_bfloat16 *y)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        y[i] = __float2bfloat16_rn(x[i]);
}

__global__ void ge2_cast_from_bf16_kernel(long long n, const __nv_bfloat16 *x, float *y)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        y[i] = __bfloat162float(x[i]);
}

// ----------------------------------------------------------------- launchers

extern "C" ge2_status ge2_cuda_cast_launch(const ge2_launch *l)
{
    const ge2_dtype from = l->in[0].dtype, to = l->out[0].dtype;
    if (!((from == GE2_F32 && to == GE2_BF16) || (from == GE2_BF16 && to == GE2_F32)))
        return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_%s: %s to %s; the CUDA kernel casts f32 to bf16 and back",
                         ge2_cuda_op_name(l), ge2_dtype_name(from), ge2_dtype_name(to));
    const long long n = ge2_shape_numel(l->in[0].shape);
    if (n == 0)
        return GE2_OK;
    const unsigned blocks = ge2_cuda_blocks(n, GE2_CUDA_THREADS);
    if (to == GE2_BF16) {
        ge2_cast_to_bf16_kernel<<<blocks, GE2_CUDA_THREADS, 0, ge2_cuda_stream(l)>>>(
            n, (const float *)l->in[0].data, (__nv_bfloat16 *)l->out[0].data);
        return ge2_cuda_check_launch(l, "ge2_cast_to_bf16_kernel");
    }
    ge2_cast_from_bf16_kernel<<<blocks, GE2_CUDA_THREADS, 0, ge2_cuda_stream(l)>>>(
        n, (const __nv_bfloat16 *)l->in[0].data, (float *)l->out[0].data);
    return ge2_cuda_check_launch(l, "ge2_cast_from_bf16_kernel");
}
