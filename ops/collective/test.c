/* The all-reduce's place in the table-driven suites: it needs a process
 * group, so tests/dist runs it under mpirun (several ranks against one
 * process at their combined batch). */
#include "ops/collective/collective.h"
#include "tests/support/op_cases.h"

GE2_OP_TEST(all_reduce, GE2_CASE_ELSEWHERE, NULL, NULL)
