/* A dropout and the layer norm of its result in one pass: DROPOUT (or
 * DROPOUT_ADD, with its residual addend: fusion/add_into), any RESHAPEs of its
 * result, then the LAYER_NORM of it, consecutive in the schedule, as one
 * kernel that keeps the dropout's row in registers for the norm.
 *
 * Why: in a pre-LN transformer every residual add is followed by the next
 * block's layer norm of the sum. Apart, the norm reads back the [rows, c]
 * tensor the dropout just wrote; together it is read from registers, and
 * one launch does both (bench/RESULTS.md has the launch times).
 *
 * The kernel: a warp per row in the row4 form (ops/norm/cuda_layer_norm.h,
 * LAYER_NORM's kernel's own arithmetic), one Philox draw per four values
 * (ops/dropout/cuda_dropout.h, DROPOUT's kernel's own arithmetic): the
 * same masks and the same expressions as the two ops' kernels (the
 * compiler may still contract them differently in each). Rows of c
 * values, c a multiple of 4 up to GE2_LN_ROW4_MAX_C (ops/norm/norm.h); the
 * dropout's tensors in f32.
 */
#ifndef GE2_FUSION_DROPOUT_LN_DROPOUT_LN_H
#define GE2_FUSION_DROPOUT_LN_DROPOUT_LN_H

#include <stdbool.h>
#include <stddef.h>

#include "graph/ir.h"
#include "ops/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether the kernel takes the group's launches: the DROPOUT first and
 * the LAYER_NORM last (RESHAPEs between run nothing), else why not. */
bool ge2_dropout_ln_takes(const ge2_launch *launches, int n, char *why, size_t why_size);

/* Enqueues the kernel on the dropout's stream. */
ge2_status ge2_dropout_ln_launch(const ge2_launch *launches, int n);

#ifdef __cplusplus
}
#endif

#endif /* GE2_FUSION_DROPOUT_LN_DROPOUT_LN_H */
