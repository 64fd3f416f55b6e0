/* The cast family's test case for the table-driven suites: an operand of
 * the case's dtype cast to bf16 (the node under test), or, every other
 * instance, that bf16 cast back (the node under test then widens). Forward
 * values only: the gradient passes straight through by definition, which
 * central differences of a rounding cannot see (tests/ops/cast_test checks
 * it). The reference rounds on values (ge2_ref_bf16). */
#include "graph/error.h"
#include "ops/cast/cast.h"
#include "tests/support/op_cases.h"

static ge2_status case_cast(ge2_case_ctx *c)
{
    ge2_tensor *x, *y;
    GE2_TRY(ge2_case_operand(c, ge2_case_random_shape(c, 1, 3), &x));
    GE2_TRY(ge2_cast(c->inst->graph, x, GE2_BF16, &y));
    if (ge2_case_coin(c))
        GE2_TRY(ge2_cast(c->inst->graph, y, c->dtype, &y));
    return ge2_case_last_node(c);
}

static void ref_cast(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    const bool narrows = ge2_cast_to(node) == GE2_BF16;
    for (int64_t i = 0; i < ge2_ref_numel(in[0].shape); i++)
        out[0].v[i] = narrows ? ge2_ref_bf16(in[0].v[i]) : in[0].v[i];
}

GE2_OP_TEST(cast, GE2_CASE_FORWARD, case_cast, ref_cast)
