/* The activation recompute pattern (fusion/recompute_act): its fused op,
 * which the pattern's rewrite puts in place of a layer's LINEAR_GRAD_INPUT
 * whose act' reads a saved z, where the next layer's weight gradient reads
 * that layer's activation h = act(z):
 *   LINEAR_GRAD_INPUT_RECOMPUTE (dz [B,out], w [out,in], z [B,in])
 *     -> dx [B,in][, db [in]], act(z) [B,in]
 * LINEAR_GRAD_INPUT's results, and act(z) written again from the z its
 * act' loads anyway, for the weight gradient to read instead of h. It runs
 * the linear family's kernels (ops/linear/linear.h: the *_with functions)
 * with act(z) as the last output. The op is defined and registered here
 * (recompute_act.c); nothing in ops/ knows it. */
#ifndef GE2_FUSION_RECOMPUTE_ACT_RECOMPUTE_ACT_H
#define GE2_FUSION_RECOMPUTE_ACT_RECOMPUTE_ACT_H

#include "ops/linear/linear.h"

/* The fused op's id (registered when the library loads; -1 if that
 * failed); its attrs are LINEAR_GRAD_INPUT's (ge2_act_attrs, from z). */
ge2_op ge2_op_linear_grad_input_recompute(void);

#endif /* GE2_FUSION_RECOMPUTE_ACT_RECOMPUTE_ACT_H */
