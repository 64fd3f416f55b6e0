/* The add-into pattern's ops' test cases: the op families' (ops/dropout/
 * test_cases.h, ops/norm/test_cases.h) with the addend, registered for the
 * table-driven suites (tests/support/op_cases.h) as an op family's are. */
#include "fusion/add_into/add_into.h"
#include "ops/dropout/test_cases.h"
#include "ops/norm/test_cases.h"

static ge2_status case_dropout_add(ge2_case_ctx *c) { return ge2_dropout_case(c, ge2_op_dropout_add(), true); }

static ge2_status case_layer_norm_grad_input_add(ge2_case_ctx *c)
{
    return ge2_layer_norm_grad_input_case(c, ge2_op_layer_norm_grad_input_add(), true);
}

GE2_OP_TEST(dropout_add, GE2_CASE_GRADIENT, case_dropout_add, ge2_dropout_ref)
GE2_OP_TEST(layer_norm_grad_input_add, GE2_CASE_FORWARD, case_layer_norm_grad_input_add, ge2_layer_norm_grad_input_ref)
