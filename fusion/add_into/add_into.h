/* The add-into pattern (fusion/add_into): its two fused ops, which the
 * pattern's rewrite puts in place of an ADD of x and an op's output that
 * only the ADD reads:
 *   DROPOUT_ADD (x, plus) -> y = plus + dropout(x)   (attrs: DROPOUT's)
 *   LAYER_NORM_GRAD_INPUT_ADD (dy, x, weight, saved, plus) -> dx + plus
 * The op rounds its own value before the sum, as it did apart, so the bits
 * are the plain ops'. They run the op families' own functions, which take
 * the addend as their last input (ops/dropout/dropout.h, ops/norm/norm.h);
 * the ops are defined and registered here (add_into.c). */
#ifndef GE2_FUSION_ADD_INTO_ADD_INTO_H
#define GE2_FUSION_ADD_INTO_ADD_INTO_H

#ifdef __cplusplus
extern "C" {
#endif

#include "ops/ops.h"

/* The fused ops' ids (registered when the library loads; -1 if that failed) */
ge2_op ge2_op_dropout_add(void);
ge2_op ge2_op_layer_norm_grad_input_add(void);

#ifdef __cplusplus
}
#endif

#endif /* GE2_FUSION_ADD_INTO_ADD_INTO_H */
