// DROPOUT and DROPOUT_BACKWARD: one elementwise kernel drawing each
// element's Philox word (ops/dropout/dropout.h); the seed and the step's
// offset are read from the control block on the device, so a replayed step
// draws a fresh mask with no host value in the graph.
#include "kernels/cuda/bf16_store.h"
#include "kernels/cuda/check.h"
#include "ops/dropout/cuda_dropout.h"

// ------------------------------------------------------------------- kernels

// y: f32, or bf16 (the storage pass's: only GEMMs read it) rounded at the
// store; plus (the forward's addend, fusion/add_into) or NULL. A thread
// takes the four elements of a draw (a group): VEC, x, plus and y aligned
// for four, moves them as one load and one store each.
template <bool VEC, typename Y>
__global__ void ge2_dropout_kernel(long long n, float p, float scale, unsigned stream, const ge2_control *ctl,
                                   const float *x, const float *plus, Y *y)
{
    const uint64_t seed = ctl->rng_seed, offset = ctl->rng_offset;
    const long long groups = (n + 3) / 4;
    for (long long g = blockIdx.x * (long long)blockDim.x + threadIdx.x; g < groups;
         g += (long long)gridDim.x * blockDim.x) {
        const ge2_philox4 r = ge2_philox_step_draw(seed, offset, stream, (uint64_t)g);
        const long long i = 4 * g;
        if (VEC && i + 4 <= n) {
            const float4 v = *reinterpret_cast<const float4 *>(x + i);
            const float4 a = plus ? *reinterpret_cast<const float4 *>(plus + i) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            ge2_store4(y + i, ge2_dropout_four(r, p, scale, v, plus ? &a : NULL));
            continue;
        }
        for (int k = 0; k < 4 && i + k < n; k++)
            ge2_store(&y[i + k], ge2_dropout_one(r.v[k], p, scale, x[i + k], plus ? plus + i + k : NULL));
    }
}

// One launch of the kernel for y's type, vectorised where x and y allow
template <typename Y>
static void dropout_enqueue(const ge2_launch *l, long long n, double p, const float *x, const float *plus, Y *y)
{
    const unsigned blocks = ge2_cuda_blocks((n + 3) / 4, GE2_CUDA_THREADS);
    const unsigned stream = GE2_ATTRS(ge2_dropout_attrs, l->node->attrs)->stream;
    if ((uintptr_t)x % 16 == 0 && (uintptr_t)plus % 16 == 0 && ge2_store4_aligned(y))
        ge2_dropout_kernel<true><<<blocks, GE2_CUDA_THREADS, 0, ge2_cuda_stream(l)>>>(
            n, (float)p, ge2_dropout_scale(p), stream, l->control, x, plus, y);
    else
        ge2_dropout_kernel<false><<<blocks, GE2_CUDA_THREADS, 0, ge2_cuda_stream(l)>>>(
            n, (float)p, ge2_dropout_scale(p), stream, l->control, x, plus, y);
}

// ----------------------------------------------------------------- launchers

extern "C" ge2_status ge2_cuda_dropout_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    if (!l->out[0].data)
        return GE2_OK;
    GE2_TRY(ge2_cuda_require_control(l));
    const long long n = ge2_shape_numel(l->in[0].shape);
    const float *plus = l->n_in > 1 ? (const float *)l->in[1].data : NULL;
    const double p = ge2_dropout_step_p(l);
    if (!plus && l->out[0].data == l->in[0].data && p == 0)
        return GE2_OK;
    /* an eval step copies: p 0 keeps every element, scale 1 leaves it be
     * (a kernel, not a memcpy node: switching engines costs replay time) */
    const float *x = (const float *)l->in[0].data;
    if (l->out[0].dtype == GE2_BF16)
        dropout_enqueue(l, n, p, x, plus, (__nv_bfloat16 *)l->out[0].data);
    else
        dropout_enqueue(l, n, p, x, plus, (float *)l->out[0].data);
    return ge2_cuda_check_launch(l, "ge2_dropout_kernel");
}
