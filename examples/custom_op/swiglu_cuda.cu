// The SwiGLU ops' CUDA kernels, then their launchers (see swiglu.h). Every
// launcher enqueues on the launch's stream and nothing else: capturable.
#include <cuda_runtime.h>
#include <stdint.h>

#include "swiglu.h"

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float sigmoid(float g) { return 1.0f / (1.0f + __expf(-g)); }

// y [n] = a [n] * silu(g [n])
__global__ void forward_kernel(int64_t n, const float *a, const float *g, float *y)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = a[i] * g[i] * sigmoid(g[i]);
}

// The same, a float4 per thread: n4 = n / 4.
__global__ void forward_vec4_kernel(int64_t n4, const float4 *a, const float4 *g, float4 *y)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
        const float4 av = a[i], gv = g[i];
        y[i] = make_float4(av.x * gv.x * sigmoid(gv.x), av.y * gv.y * sigmoid(gv.y), av.z * gv.z * sigmoid(gv.z),
                           av.w * gv.w * sigmoid(gv.w));
    }
}

// da [n], dg [n] from dy [n], a [n], g [n]; a NULL output is skipped.
__global__ void backward_kernel(int64_t n, const float *dy, const float *a, const float *g, float *da, float *dg)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const float s = sigmoid(g[i]);
        if (da)
            da[i] = dy[i] * g[i] * s;
        if (dg)
            dg[i] = dy[i] * a[i] * s * (1.0f + g[i] * (1.0f - s));
    }
}

unsigned blocks(int64_t n)
{
    const int64_t b = (n + kThreads - 1) / kThreads;
    return (unsigned)(b < 1 ? 1 : b > 4096 ? 4096 : b);
}

ge2_status checked(const ge2_launch *l, const char *kernel)
{
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess)
        return GE2_OK;
    return ge2_error(GE2_ERR_CUDA, "ge2_%s (node %d): %s: %s", ge2_node_op_name(l->node), ge2_node_id(l->node), kernel,
                     cudaGetErrorString(e));
}

ge2_status need_f32(const ge2_launch *l)
{
    if (l->in[0].dtype == GE2_F32)
        return GE2_OK;
    return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_%s (node %d): %s on CUDA; the CUDA kernels take f32",
                     ge2_node_op_name(l->node), ge2_node_id(l->node), ge2_dtype_name(l->in[0].dtype));
}

} // namespace

extern "C" ge2_status swiglu_cuda_forward(const ge2_launch *l)
{
    const ge2_status st = need_f32(l);
    if (st != GE2_OK)
        return st;
    const int64_t n = ge2_shape_numel(l->out[0].shape);
    if (!l->out[0].data || n == 0)
        return GE2_OK;
    forward_kernel<<<blocks(n), kThreads, 0, (cudaStream_t)l->stream>>>(
        n, (const float *)l->in[0].data, (const float *)l->in[1].data, (float *)l->out[0].data);
    return checked(l, "forward_kernel");
}

extern "C" ge2_status swiglu_cuda_forward_vec4(const ge2_launch *l)
{
    const ge2_status st = need_f32(l);
    if (st != GE2_OK)
        return st;
    const int64_t n4 = ge2_shape_numel(l->out[0].shape) / 4;
    if (!l->out[0].data || n4 == 0)
        return GE2_OK;
    forward_vec4_kernel<<<blocks(n4), kThreads, 0, (cudaStream_t)l->stream>>>(
        n4, (const float4 *)l->in[0].data, (const float4 *)l->in[1].data, (float4 *)l->out[0].data);
    return checked(l, "forward_vec4_kernel");
}

extern "C" ge2_status swiglu_cuda_backward(const ge2_launch *l)
{
    const ge2_status st = need_f32(l);
    if (st != GE2_OK)
        return st;
    const int64_t n = ge2_shape_numel(l->in[1].shape);
    if (n == 0)
        return GE2_OK;
    backward_kernel<<<blocks(n), kThreads, 0, (cudaStream_t)l->stream>>>(
        n, (const float *)l->in[0].data, (const float *)l->in[1].data, (const float *)l->in[2].data,
        (float *)l->out[0].data, (float *)l->out[1].data);
    return checked(l, "backward_kernel");
}
