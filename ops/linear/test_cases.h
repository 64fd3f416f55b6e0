/* LINEAR_GRAD_INPUT's test case and float64 reference (ops/linear/test.c),
 * by op and with act(z) made again, for the recompute pattern's op, which
 * fusion/recompute_act/test.c registers them for. Test code only. */
#ifndef GE2_OPS_LINEAR_TEST_CASES_H
#define GE2_OPS_LINEAR_TEST_CASES_H

#include <stdbool.h>

#include "ops/linear/linear.h"
#include "tests/support/op_cases.h"

/* dz, w[, saved] -> a node of op (LINEAR_GRAD_INPUT's inputs and attrs):
 * dx[, db], and with again a saved z and act(z) last */
ge2_status ge2_linear_grad_input_case(ge2_case_ctx *c, ge2_op op, bool again);
/* The reference, act(z) into output again (-1: none) */
void ge2_linear_grad_input_ref(const ge2_node *node, const ref_tensor *in, ref_tensor *out, int again);

#endif /* GE2_OPS_LINEAR_TEST_CASES_H */
