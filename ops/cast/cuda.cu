// CAST on the GPU, f32 <-> bf16: CUDA's own rounding (__float2bfloat16_rn),
// which op_agreement_test holds to graph/bf16.h's bit for bit, and the
// exact widening (kernels/cuda/bf16_copy.h).
#include "kernels/cuda/bf16_copy.h"
#include "kernels/cuda/check.h"
#include "ops/cast/cast.h"

extern "C" ge2_status ge2_cuda_cast_launch(const ge2_launch *l)
{
    const ge2_dtype from = l->in[0].dtype, to = l->out[0].dtype;
    if (!((from == GE2_F32 && to == GE2_BF16) || (from == GE2_BF16 && to == GE2_F32)))
        return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_%s: %s to %s; the CUDA kernel casts f32 to bf16 and back",
                         ge2_cuda_op_name(l), ge2_dtype_name(from), ge2_dtype_name(to));
    ge2_bf16_spans spans = {0};
    ge2_bf16_span_add(&spans, l->in[0].data, l->out[0].data, ge2_shape_numel(l->in[0].shape));
    return to == GE2_BF16 ? ge2_cuda_bf16_round(l, &spans) : ge2_cuda_bf16_widen(l, &spans);
}
