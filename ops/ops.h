/* The ids of ge2's own ops (ops/builtin.def), for the code that builds or
 * matches nodes of a given op: op modules, their backward rules, fusion
 * patterns and tests. The engine finds ops through the registry
 * (graph/ir.h: ge2_op_def_of) and does not include this header, but for
 * the ops it is built around: autograd sums gradients with ADD and seeds
 * with SCALE, and optim/ emits GRAD_NORM, OPTIMIZER_UPDATE and (data
 * parallel) ALL_REDUCE. */
#ifndef GE2_OPS_OPS_H
#define GE2_OPS_OPS_H

#include "ge2/extension.h"

enum {
#define GE2_BUILTIN_OP(id, def) GE2_OP_##id,
#include "ops/builtin.def"
#undef GE2_BUILTIN_OP
    GE2_OP_BUILTIN_COUNT
};

/* Constructor priorities: the built-in ops register first (ops/registry.c),
 * then ge2's own kernel candidates for them (ops/<family>/candidates.c),
 * all before any unprioritized constructor (tests, users). */
#define GE2_OP_BUILTIN_PRIORITY 1001
#define GE2_OP_CANDIDATES_PRIORITY 1002

#endif /* GE2_OPS_OPS_H */
