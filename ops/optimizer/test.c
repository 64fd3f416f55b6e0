/* The optimizer ops' place in the table-driven suites: they work on the
 * flat pools, so tests/optim and op_agreement_test's optimizer cases test
 * them there. */
#include "ops/optimizer/optimizer.h"
#include "tests/support/op_cases.h"

GE2_OP_TEST(grad_norm, GE2_CASE_ELSEWHERE, NULL, NULL)
GE2_OP_TEST(optimizer_update, GE2_CASE_ELSEWHERE, NULL, NULL)
