/* CAST on the CPU: graph/bf16.h's rounding (f64 through f32 first) and its
 * exact widening. */
#include "graph/bf16.h"
#include "kernels/cpu/cpu_util.h"
#include "ops/cast/cast.h"

ge2_status ge2_cpu_cast(const ge2_launch *l)
{
    const ge2_dtype from = l->in[0].dtype, to = l->out[0].dtype;
    const int64_t n = ge2_shape_numel(l->in[0].shape);
    const void *x = l->in[0].data;
    void *y = l->out[0].data;
    if (from == GE2_F32 && to == GE2_BF16) {
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)y)[i] = ge2_bf16_from_f32(((const float *)x)[i]);
    } else if (from == GE2_F64 && to == GE2_BF16) {
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)y)[i] = ge2_bf16_from_f32((float)((const double *)x)[i]);
    } else if (from == GE2_BF16 && to == GE2_F32) {
        for (int64_t i = 0; i < n; i++)
            ((float *)y)[i] = ge2_f32_from_bf16(((const uint16_t *)x)[i]);
    } else if (from == GE2_BF16 && to == GE2_F64) {
        for (int64_t i = 0; i < n; i++)
            ((double *)y)[i] = (double)ge2_f32_from_bf16(((const uint16_t *)x)[i]);
    } else {
        return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_cast (node %d): %s to %s", l->node->id, ge2_dtype_name(from),
                         ge2_dtype_name(to));
    }
    return GE2_OK;
}
