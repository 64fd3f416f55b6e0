/* The residual-add + layer norm pattern (fusion/add_layer_norm): its fused
 * op, ADD_LAYER_NORM(a, b, weight[, bias]) -> (s, y, saved), which the
 * pattern's rewrite (fusion/residual_norm.h) puts where an ADD s = a + b
 * stood when a LAYER_NORM normalizes s:
 *   s = a + b, y = LAYER_NORM(s), saved [2, rows] = each row's mean, rstd,
 * the values the two nodes made, bit for bit (the layer norm's row math is
 * ops/norm's), in one pass over a and b. Rows of a multiple of 4 values up
 * to GE2_LN_ROW4_MAX_C (the layer norm's row4 form, ops/norm/norm.h); y may
 * be stored in bf16, as LAYER_NORM's may. The op is defined and registered
 * here (add_layer_norm.c); nothing in ops/ knows it. */
#ifndef GE2_FUSION_ADD_LAYER_NORM_ADD_LAYER_NORM_H
#define GE2_FUSION_ADD_LAYER_NORM_ADD_LAYER_NORM_H

#ifdef __cplusplus
extern "C" {
#endif

#include "ops/norm/norm.h"

/* The fused op's id (registered when the library loads); its attrs are
 * LAYER_NORM's (ge2_layer_norm_attrs). */
ge2_op ge2_op_add_layer_norm(void);

/* add_layer_norm.cu: the CUDA kernel (f32; y f32 or bf16) */
ge2_status ge2_cuda_add_layer_norm_launch(const ge2_launch *l);

#ifdef __cplusplus
}
#endif

#endif /* GE2_FUSION_ADD_LAYER_NORM_ADD_LAYER_NORM_H */
