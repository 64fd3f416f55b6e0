/* The dropout's test case and float64 reference (ops/dropout/test.c), by
 * op and with the addend of add_into's op, which fusion/add_into/test.c
 * registers them for. Test code only. */
#ifndef GE2_OPS_DROPOUT_TEST_CASES_H
#define GE2_OPS_DROPOUT_TEST_CASES_H

#include <stdbool.h>

#include "ops/dropout/dropout.h"
#include "tests/support/op_cases.h"

/* x[, plus] -> a node of op (DROPOUT's input and attrs, p = 0.5, and with
 * plus its addend) */
ge2_status ge2_dropout_case(ge2_case_ctx *c, ge2_op op, bool plus);
/* The reference: x masked by the step's draws (plus the addend, if any) */
void ge2_dropout_ref(const ge2_node *node, const ref_tensor *in, ref_tensor *out);

#endif /* GE2_OPS_DROPOUT_TEST_CASES_H */
