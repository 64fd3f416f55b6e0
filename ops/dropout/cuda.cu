// DROPOUT and DROPOUT_BACKWARD: one elementwise kernel drawing each
// element's Philox word (ops/dropout/dropout.h); the seed and the step's
// offset are read from the control block on the device, so a replayed step
// draws a fresh mask with no host value in the graph.
#include "kernels/cuda/bf16_store.h"
#include "kernels/cuda/check.h"
#include "ops/dropout/dropout.h"

// ------------------------------------------------------------------- kernels

// y: f32, or bf16 (the storage pass's: only GEMMs read it) rounded at the store
template <typename Y>
__global__ void ge2_dropout_kernel(long long n, float p, float scale, unsigned stream, const ge2_control *ctl,
                                   const float *x, Y *y)
{
    const uint64_t seed = ctl->rng_seed, offset = ctl->rng_offset;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        ge2_store(&y[i], ge2_dropout_keeps(seed, offset, stream, p, (uint64_t)i) ? x[i] * scale : 0.0f);
}

// ----------------------------------------------------------------- launchers

extern "C" ge2_status ge2_cuda_dropout_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    if (!l->out[0].data)
        return GE2_OK;
    GE2_TRY(ge2_cuda_require_control(l));
    const ge2_dropout_attrs *a = &l->node->attrs.dropout;
    const long long n = ge2_shape_numel(l->in[0].shape);
    if (l->out[0].data == l->in[0].data && (!l->training || a->p == 0))
        return GE2_OK;
    /* an eval step copies: p 0 keeps every element, scale 1 leaves it be
     * (a kernel, not a memcpy node: switching engines costs replay time) */
    const double p = l->training ? a->p : 0.0;
    const unsigned blocks = ge2_cuda_blocks(n, GE2_CUDA_THREADS);
    const float *x = (const float *)l->in[0].data;
    if (l->out[0].dtype == GE2_BF16)
        ge2_dropout_kernel<<<blocks, GE2_CUDA_THREADS, 0, ge2_cuda_stream(l)>>>(
            n, (float)p, ge2_dropout_scale(p), a->stream, l->control, x, (__nv_bfloat16 *)l->out[0].data);
    else
        ge2_dropout_kernel<<<blocks, GE2_CUDA_THREADS, 0, ge2_cuda_stream(l)>>>(
            n, (float)p, ge2_dropout_scale(p), a->stream, l->control, x, (float *)l->out[0].data);
    return ge2_cuda_check_launch(l, "ge2_dropout_kernel");
}
