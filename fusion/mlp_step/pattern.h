/* The MLP training step the whole-step kernel (fusion/mlp_step/mlp_step.h)
 * runs, recognised from a key's nodes alone, and the kernel's phase table.
 *
 * Two users, one recognition:
 *   - the planner, before it places the arena: the kernel runs launches of
 *     one phase side by side, so a tensor must keep its bytes for every
 *     phase it is used in, not only between its producer and last reader in
 *     the schedule (planner/groups.c widens the lifetimes);
 *   - the CUDA backend's matcher (fusion/mlp_step/match.c), after
 *     planning, which binds the plan's buffers to the kernel's roles.
 * Backend-independent C, so the CPU build plans exactly as the CUDA one.
 *
 * Phases (L layers, the row chain from layer c), each ending at a grid
 * barrier in the kernel:
 *   0 .. c-1    forward of layer i
 *   c           the row chain: the forward of layers c .. L-1 (the last with
 *               cross-entropy and accuracy), then the input gradients of
 *               layers L-1 .. max(c, 1), a few batch rows per work item
 *   c+1 .. 2c-1 input gradient of layer c-1 .. 1
 *   last        every layer's weight gradient (dW, db) and the optimizer
 */
#ifndef GE2_FUSION_MLP_STEP_PATTERN_H
#define GE2_FUSION_MLP_STEP_PATTERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph/ir.h"

#define GE2_MLP_STEP_MAX_LAYERS 8
/* Largest GEMM (multiply-adds) of a step the kernel takes. Its SIMT tiles
 * win where a step is latency (the small MLP's GEMMs); on the medium MLP's
 * they lose to cuBLASLt launch by launch (bench/RESULTS.md). */
#define GE2_MLP_STEP_MAX_FMAS (32LL << 20)
/* Weights the row chain may re-read per work item (two GEMMs per layer).
 * One SM stages weights from L2 at a fraction of the grid's rate: a large
 * layer re-read by every item costs more in the chain than as a phase of
 * its own across the grid, a small one less than that phase and its
 * barrier (profiled with profile_fused; bench/RESULTS.md). */
#define GE2_MLP_STEP_CHAIN_BYTES (32 << 10)
/* Widest layer of the row chain: an item holds 4 rows by the whole width
 * in one 4096-float tile. Also the most classes the loss epilogue takes. */
#define GE2_MLP_STEP_MAX_WIDTH 1024

typedef struct ge2_mlp_step_pattern {
    int n_layers;
    int chain_from; /* c above */
    int n_phases;
    int64_t batch;
    int64_t in[GE2_MLP_STEP_MAX_LAYERS], out[GE2_MLP_STEP_MAX_LAYERS];
    /* node indices (positions in the list given to find) per role */
    int linear[GE2_MLP_STEP_MAX_LAYERS];
    int grad_weight[GE2_MLP_STEP_MAX_LAYERS];
    int grad_input[GE2_MLP_STEP_MAX_LAYERS]; /* layer i >= 1: dz of layer i-1 */
    int cross_entropy, accuracy, optimizer;  /* accuracy: -1 without */
} ge2_mlp_step_pattern;

/* Concrete shape of tensor id in the key being matched. */
typedef ge2_shape (*ge2_mlp_step_shape_fn)(const void *ctx, int tensor);

/* True and *p filled when nodes[0, n) (one key's, in schedule order) are
 * exactly one training step of an MLP the kernel implements: a LINEAR chain
 * with bias and relu/no activation, CROSS_ENTROPY on the last, optional
 * ACCURACY, the fused backward (LINEAR_GRAD_WEIGHT, LINEAR_GRAD_INPUT), one
 * flat OPTIMIZER_UPDATE of SGD/Adam/AdamW without amsgrad, clipping or
 * accumulation, every GEMM within GE2_MLP_STEP_MAX_FMAS. Otherwise false and
 * *why says what did not fit. */
bool ge2_mlp_step_pattern_find(const ge2_node *const *nodes, int n, ge2_mlp_step_shape_fn shape_of, const void *ctx,
                               ge2_mlp_step_pattern *p, char *why, size_t why_size);

/* The phase node index i runs in. */
int ge2_mlp_step_phase_of(const ge2_mlp_step_pattern *p, int i);

#endif /* GE2_FUSION_MLP_STEP_PATTERN_H */
