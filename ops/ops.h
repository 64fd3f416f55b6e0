/* The ids of ge2's own ops (ops/builtin.def), for the code that builds or
 * matches nodes of a given op: op modules, their backward rules, fusion
 * patterns and tests. The engine finds ops through the registry
 * (graph/ir.h: ge2_op_def_of) and does not include this header, but for
 * the ops it is built around: autograd sums gradients with ADD and seeds
 * with SCALE, optim/ emits GRAD_NORM, OPTIMIZER_UPDATE and (data
 * parallel) ALL_REDUCE, and the bf16 storage pass (passes/) emits CAST. */
#ifndef GE2_OPS_OPS_H
#define GE2_OPS_OPS_H

#include "ge2/extension.h"
#include "graph/ir.h"

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

/* The attributes of the ops the engine emits itself (GE2_ATTRS). */
/* SCALE: out = alpha * x (autograd copies a gradient with alpha 1). */
typedef struct ge2_scale_attrs {
    double alpha;
} ge2_scale_attrs;
GE2_ATTRS_FIT(ge2_scale_attrs);

/* CAST: the dtype it converts to (precision BF16's storage pass emits
 * casts to bf16, passes/bf16_storage.c; ge2_cast builds any). */
typedef struct ge2_cast_attrs {
    ge2_dtype to;
} ge2_cast_attrs;
GE2_ATTRS_FIT(ge2_cast_attrs);

/* LOSS_SCALE: the backward's seed, d loss / d loss times the control
 * block's loss scale, in the loss's dtype. */
typedef struct ge2_loss_scale_attrs {
    ge2_dtype dtype;
} ge2_loss_scale_attrs;
GE2_ATTRS_FIT(ge2_loss_scale_attrs);

#endif /* GE2_OPS_OPS_H */
