/* The bn_relu fusion's ops' test cases: the batch norm's (ops/norm/
 * test_cases.h) for the fused ops, with the relu, registered for the
 * table-driven suites (tests/support/op_cases.h) as an op family's are. */
#include "fusion/bn_relu/bn_relu.h"
#include "ops/norm/test_cases.h"

static ge2_status case_forward(ge2_case_ctx *c) { return ge2_batch_norm_case(c, ge2_op_batch_norm_relu()); }

static ge2_status case_grad_params(ge2_case_ctx *c)
{
    return ge2_batch_norm_grad_params_case(c, ge2_op_batch_norm_relu_grad_params(), true);
}

static ge2_status case_grad_input(ge2_case_ctx *c)
{
    return ge2_batch_norm_grad_input_case(c, ge2_op_batch_norm_relu_grad_input(), true);
}

static void ref_forward(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    ge2_batch_norm_ref(node, in, out, true);
}

static void ref_grad_params(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    (void)node;
    ge2_batch_norm_grad_params_ref(in, out, 3);
}

static void ref_grad_input(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    (void)node;
    ge2_batch_norm_grad_input_ref(in, out, 6);
}

GE2_OP_TEST(batch_norm_relu, GE2_CASE_GRADIENT, case_forward, ref_forward)
GE2_OP_TEST(batch_norm_relu_grad_params, GE2_CASE_FORWARD, case_grad_params, ref_grad_params)
GE2_OP_TEST(batch_norm_relu_grad_input, GE2_CASE_FORWARD, case_grad_input, ref_grad_input)
