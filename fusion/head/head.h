/* The classifier head in two kernels: a small last layer (at most
 * GE2_HEAD_MAX_CLASSES outputs), its softmax cross-entropy, and both of its
 * gradients.
 *
 * Why: in a launch list the head is four launches whose cost is launch and
 * ramp-up, not arithmetic (a few MFLOP and MB; bench/RESULTS.md has the
 * profile).
 *
 * Two pairs of consecutive launches each become one kernel:
 *   LOSS       LINEAR (no activation) then the CROSS_ENTROPY of its output:
 *              a block per batch row makes the row's logits (its threads
 *              split K) and, still holding them, its loss and dlogits; the
 *              mean loss is summed across blocks in a fixed order
 *              (block_reduce.h's ticket).
 *   GRADIENTS  LINEAR_GRAD_INPUT and LINEAR_GRAD_WEIGHT of the same dz
 *              (either order): a block per 4 columns of the layer's input
 *              makes dx = (dz·W) ⊙ act'(saved) (and its column sums), dW =
 *              dzᵀ·x and, in block 0, db = dz's column sums.
 * Each is an implementation of its two launches: it reads and writes the
 * buffers the plan gave them. The planner keeps both launches' inputs
 * alive through the pair (fusion/head/pattern.h, planner/groups.c), and
 * the matcher checks that neither launch writes what the other reads, so
 * running them as one kernel cannot change a result. Every sum runs in a fixed order: a step is bit-identical run to
 * run (not to the unfused GEMMs, whose order differs).
 */
#ifndef GE2_FUSION_HEAD_HEAD_H
#define GE2_FUSION_HEAD_HEAD_H

#include <stddef.h>

#include "fusion/head/pattern.h"
#include "graph/control.h"
#include "graph/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Classes (the head's outputs) a head kernel takes: one per lane. */
#define GE2_HEAD_MAX_CLASSES 32

/* Which head kernel runs the launches pair[0] and pair[1] (consecutive in
 * the schedule), or GE2_HEAD_NONE with the reason in why when they are no
 * head pair. */
ge2_head_kind ge2_head_match(const ge2_launch *pair /* [2] */, char *why, size_t why_size);

/* Enqueues the head kernel of a matched pair on pair[0]'s stream. */
ge2_status ge2_head_launch(ge2_head_kind kind, const ge2_launch *pair /* [2] */);

/* For the kernel report: "ge2 head kernel (...)". */
const char *ge2_head_describe(ge2_head_kind kind);

#ifdef __cplusplus
}
#endif

#endif /* GE2_FUSION_HEAD_HEAD_H */
