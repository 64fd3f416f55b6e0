/* One small random valid instance of every op, for tests that iterate the op
 * table (gradient checks, CPU/CUDA agreement). Backend-neutral: a case builds
 * a graph and its feeds and runs nothing. */
#ifndef GE2_TESTS_SUPPORT_OP_CASES_H
#define GE2_TESTS_SUPPORT_OP_CASES_H

#include "graph/ir.h"
#include "ops/ops.h"

typedef enum ge2_op_case_kind {
    GE2_CASE_GRADIENT,  /* differentiable: forward values and a gradient check */
    GE2_CASE_FORWARD,   /* forward values only: metrics, and ops only the backward emits (no second derivatives) */
    GE2_CASE_ELSEWHERE, /* the optimizer ops: tested in tests/optim on the flat pools */
    GE2_CASE_KIND_COUNT
} ge2_op_case_kind;

#define GE2_OP_CASE_MAX_FEEDS 8

typedef struct ge2_op_instance {
    ge2_graph *graph;
    int node;                  /* id of the node under test; its output 0 is what to compare */
    ge2_feed feeds[GE2_OP_CASE_MAX_FEEDS];
    int n_feeds;
    /* Tensors a gradient check differentiates: every float operand is either a
     * PARAMETER (values from ge2_init_fill) or an INPUT with ge2_require_grad. */
    ge2_tensor *wrt[GE2_MAX_INPUTS];
    int n_wrt;
} ge2_op_instance;

typedef struct ge2_op_case {
    ge2_op_case_kind kind;
    /* Builds a fresh instance from seed: random shapes, attrs and data, in
     * dtype (GE2_F32 or GE2_F64). NULL for GE2_CASE_ELSEWHERE. */
    ge2_status (*build)(uint64_t seed, ge2_dtype dtype, ge2_op_instance *out);
} ge2_op_case;

/* Indexed by ge2_op; a row without kind/build is a new op nobody wrote a case for (the table test fails). */
extern const ge2_op_case ge2_op_cases[GE2_OP_BUILTIN_COUNT];

/* The case of op: its row of ge2_op_cases for ge2's own ops, a row with no
 * build (the table test fails on it) for any other. */
const ge2_op_case *ge2_op_case_of(ge2_op op);

/* Frees the graph and the feed data. */
void ge2_op_instance_free(ge2_op_instance *inst);

#endif /* GE2_TESTS_SUPPORT_OP_CASES_H */
