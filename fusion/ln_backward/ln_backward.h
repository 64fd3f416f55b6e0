/* A layer norm's backward in one pass: LAYER_NORM_GRAD_PARAMS then
 * LAYER_NORM_GRAD_INPUT of the same dy, x and saved statistics
 * (consecutive in the schedule, as ops/norm/backward.c emits them), and
 * the DROPOUT_BACKWARD of the dx they make when it comes next, run as one
 * kernel that reads dy and x once.
 *
 * Why: the two ops read the same two [rows, c] tensors; apart they read
 * them twice, and the parameter gradients' column sums ran at half the
 * memory's speed. In a pre-LN transformer the residual stream's gradient
 * (this dx) goes next through the dropout of the branch that added to it;
 * masked here, it is not read back (bench/RESULTS.md has the launch times).
 *
 * The kernel: a warp per row in the row4 form (ops/norm/cuda_layer_norm.h:
 * four neighbouring values a lane), with LAYER_NORM_GRAD_INPUT's own
 * arithmetic (ops/norm/cuda_layer_norm.h; fp32 rounding may differ where
 * the compiler contracts differently, and a lane sums its values in
 * another order than the op's kernel) and DROPOUT's (ops/dropout/
 * cuda_dropout.h: the same masks); each lane also leaves its columns'
 * dy·x̂ and dy, which the block's 8 rows add in row order, and a second
 * kernel adds the blocks' partials per column in block order, a warp a
 * column (a fixed tree across its lanes): dweight and dbias in a fixed
 * order, bit-identical run to run (not to the unfused kernel's order).
 * Rows of a multiple of 4 values up to GE2_LN_BACKWARD_MAX_C, in f32 (the
 * dropout's gradient may be bf16, a GEMM's operand).
 */
#ifndef GE2_FUSION_LN_BACKWARD_LN_BACKWARD_H
#define GE2_FUSION_LN_BACKWARD_LN_BACKWARD_H

#include <stdbool.h>
#include <stddef.h>

#include "graph/ir.h"
#include "fusion/add_into/add_into.h"
#include "ops/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Values a row (c) the kernel takes: 24 a lane (its partials fill 48 KiB of shared memory) */
#define GE2_LN_BACKWARD_MAX_C 768

/* Whether nodes a then b are one layer norm's GRAD_PARAMS and GRAD_INPUT
 * (the same dy, x and saved statistics); graph-level, for the matcher. */
static inline bool ge2_ln_backward_pair(const ge2_node *a, const ge2_node *b)
{
    const bool grad_input = b->op == GE2_OP_LAYER_NORM_GRAD_INPUT || b->op == ge2_op_layer_norm_grad_input_add();
    return a->op == GE2_OP_LAYER_NORM_GRAD_PARAMS && grad_input && a->n_inputs == 3 &&
           b->n_inputs >= 4 && a->inputs[0] == b->inputs[0] && a->inputs[1] == b->inputs[1] &&
           a->inputs[2] == b->inputs[3];
}

/* Whether node c is the DROPOUT_BACKWARD of GRAD_INPUT b's dx */
static inline bool ge2_ln_backward_then_dropout(const ge2_node *b, const ge2_node *c)
{
    return c->op == GE2_OP_DROPOUT_BACKWARD && c->n_inputs == 1 && c->inputs[0] == b->outputs[0];
}

/* Whether the CUDA kernel takes the group's launches (the pair, and the
 * dropout's backward when n is 3: f32 tensors aligned for 16-byte
 * accesses, rows of a multiple of 4 up to GE2_LN_BACKWARD_MAX_C, dx
 * wanted, room for the partials in the workspace), else why not. */
bool ge2_ln_backward_takes(const ge2_launch *launches /* [n] */, int n, char *why, size_t why_size);

/* Enqueues the kernels on the pair's stream. */
ge2_status ge2_ln_backward_launch(const ge2_launch *launches /* [n] */, int n);

#ifdef __cplusplus
}
#endif

#endif /* GE2_FUSION_LN_BACKWARD_LN_BACKWARD_H */
