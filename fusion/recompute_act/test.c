/* The recompute pattern's op's test case: LINEAR_GRAD_INPUT's (ops/linear/
 * test_cases.h) with act(z) made again, registered for the table-driven
 * suites (tests/support/op_cases.h) as an op family's are. */
#include "fusion/recompute_act/recompute_act.h"
#include "ops/linear/test_cases.h"

static ge2_status case_recompute(ge2_case_ctx *c)
{
    return ge2_linear_grad_input_case(c, ge2_op_linear_grad_input_recompute(), true);
}

static void ref_recompute(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    ge2_linear_grad_input_ref(node, in, out, node->n_outputs - 1);
}

GE2_OP_TEST(linear_grad_input_recompute, GE2_CASE_FORWARD, case_recompute, ref_recompute)
