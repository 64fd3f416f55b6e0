/* One small random valid instance of every op, for the suites that iterate
 * the op registry (float64 forward references, gradient checks, CPU/CUDA
 * agreement). Each op's case lives in its folder (ops/<family>/test.c) and
 * registers itself with GE2_OP_TEST; this is the harness they use.
 * Backend-neutral: a case builds a graph and its feeds and runs nothing. */
#ifndef GE2_TESTS_SUPPORT_OP_CASES_H
#define GE2_TESTS_SUPPORT_OP_CASES_H

#include "graph/ir.h"
#include "tests/support/reference.h"
#include "ops/ops.h"

typedef enum ge2_op_case_kind {
    GE2_CASE_GRADIENT,  /* differentiable: forward values and a gradient check */
    GE2_CASE_FORWARD,   /* forward values only: metrics, and ops only the backward emits (no second derivatives) */
    GE2_CASE_ELSEWHERE, /* tested in a suite of their own: the optimizer ops in tests/optim, the all-reduce in tests/dist */
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

/* What a case body works with: the instance it fills, its dtype and a
 * counter-based RNG keyed by the op's name and the seed. */
typedef struct ge2_case_ctx {
    ge2_op_instance *inst;
    ge2_dtype dtype;
    uint64_t key, counter;
    int n_names;
} ge2_case_ctx;

/* Builds the instance's graph ending in the op's node (inst->node). */
typedef ge2_status (*ge2_case_body)(ge2_case_ctx *c);

typedef struct ref_tensor ref_tensor; /* tests/support/reference.h */
/* The op's forward in float64, written from its definition, sharing no
 * code with its kernels: fills out[0..n_outputs) (shapes given). */
typedef void (*ge2_reference_fn)(const ge2_node *node, const ref_tensor *in, ref_tensor *out);

typedef struct ge2_op_case {
    const char *op; /* the op's registered name */
    ge2_op_case_kind kind;
    ge2_case_body body;          /* NULL for GE2_CASE_ELSEWHERE */
    ge2_reference_fn reference;  /* NULL for GE2_CASE_ELSEWHERE */
} ge2_op_case;

/* Registers op's case; GE2_OP_TEST does it when the test program loads. */
void ge2_op_case_register(const ge2_op_case *c);
#define GE2_OP_TEST(name, kind, body, reference)                                                 \
    __attribute__((constructor)) static void ge2_op_test_##name(void)                            \
    {                                                                                            \
        static const ge2_op_case c = {#name, kind, body, reference};                             \
        ge2_op_case_register(&c);                                                                \
    }

/* The case of op; one with no body (the table test fails on it) when the op
 * registered none. */
const ge2_op_case *ge2_op_case_of(ge2_op op);
/* A fresh instance from seed: random shapes, attrs and data, in dtype
 * (GE2_F32 or GE2_F64); freed (ge2_op_instance_free) on failure. */
ge2_status ge2_op_case_build(const ge2_op_case *c, uint64_t seed, ge2_dtype dtype, ge2_op_instance *out);

/* Frees the graph and the feed data. */
void ge2_op_instance_free(ge2_op_instance *inst);

/* ---------------------------------------------- helpers for case bodies */

double ge2_case_uniform(ge2_case_ctx *c, double lo, double hi);
int64_t ge2_case_irange(ge2_case_ctx *c, int64_t lo, int64_t hi);
bool ge2_case_coin(ge2_case_ctx *c);
/* min_nd..max_nd dims of 1..4 */
ge2_shape ge2_case_random_shape(ge2_case_ctx *c, int min_nd, int max_nd);
/* A fed tensor with random data: float operands in [-1, 1), labels in [0, classes). */
ge2_status ge2_case_feed(ge2_case_ctx *c, ge2_role role, ge2_dtype dtype, ge2_shape s, int64_t classes, bool wrt,
                         ge2_tensor **out);
/* A differentiated float operand: a PARAMETER the first time (ge2_backward
 * needs one), a required INPUT after that, so both paths are exercised. */
ge2_status ge2_case_operand(ge2_case_ctx *c, ge2_shape s, ge2_tensor **out);
/* A float operand nobody differentiates (shape references, backward-op inputs). */
ge2_status ge2_case_plain(ge2_case_ctx *c, ge2_shape s, ge2_tensor **out);
/* A persistent buffer (GE2_ROLE_BUFFER) with its first values from init:
 * state an op reads and a train step writes (batch norm's running statistics). */
ge2_status ge2_case_buffer(ge2_case_ctx *c, ge2_dtype dtype, ge2_shape s, ge2_init init, ge2_tensor **out);
/* The graph's last node is the one under test. */
ge2_status ge2_case_last_node(ge2_case_ctx *c);
/* A node of op (one the backward emits: no public builder) is the one under test. */
ge2_status ge2_case_direct(ge2_case_ctx *c, ge2_op op, ge2_tensor *const *ts, int n, int n_out, const ge2_attrs *a);
ge2_activation ge2_case_random_act(ge2_case_ctx *c, float *slope);
/* Attrs of an activation derivative: any activation, from y where y allows it, else from z. */
ge2_attrs ge2_case_random_act_backward(ge2_case_ctx *c);
/* big, and small that broadcasts to it: a suffix of big with some dims set to 1. */
void ge2_case_broadcast_shapes(ge2_case_ctx *c, ge2_shape *big, ge2_shape *small);

#endif /* GE2_TESTS_SUPPORT_OP_CASES_H */
