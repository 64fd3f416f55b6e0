/* The residual-add + RMS norm pattern (fusion/add_rms_norm): its fused op,
 * ADD_RMS_NORM(a, b, weight) -> (s, y, saved), which the pattern's rewrite
 * puts where an ADD s = a + b stood when an RMS_NORM normalizes s:
 *   s = a + b, y = s · rstd · weight, saved [rows] = rstd,
 * the three values the two nodes made, bit for bit (the RMS norm's row math
 * is ops/rms_norm's), in one pass over a and b. The op is defined and
 * registered here (add_rms_norm.c); nothing in ops/ knows it. Its backward is
 * the RMS norm's and the add's as autograd emitted them before the rewrite:
 * they read s and saved as before. */
#ifndef GE2_FUSION_ADD_RMS_NORM_ADD_RMS_NORM_H
#define GE2_FUSION_ADD_RMS_NORM_ADD_RMS_NORM_H

#ifdef __cplusplus
extern "C" {
#endif

#include "ops/rms_norm/rms_norm.h"

/* The fused op's id (registered when the library loads); its attrs are
 * RMS_NORM's (ge2_rms_norm_attrs). */
ge2_op ge2_op_add_rms_norm(void);

/* add_rms_norm.cu: the CUDA kernel (f32) */
ge2_status ge2_cuda_add_rms_norm_launch(const ge2_launch *l);

#ifdef __cplusplus
}
#endif

#endif /* GE2_FUSION_ADD_RMS_NORM_ADD_RMS_NORM_H */
