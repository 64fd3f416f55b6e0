/* The whole-step MLP kernel: one cooperative launch that does a graph key's
 * entire training step — every layer's forward, softmax cross-entropy,
 * every layer's backward and the optimizer update — when the key's launches
 * are exactly that step.
 *
 * Why: a small MLP's step is ten short kernels whose cost is launch,
 * ramp-up and a few dependent memory round trips, not arithmetic
 * (bench/RESULTS.md has the profile). One persistent grid that waits at a
 * grid barrier between dependent phases pays the launch once and a barrier
 * instead of a kernel boundary per phase.
 *
 * It is an implementation of the key's launch list, not a new graph: it
 * reads and writes the very buffers the plan gave those launches (y, relu
 * masks, dlogits, dz, the gradient and optimizer pools, the loss), so the
 * CPU backend, checkpoints, read_output and the kernel report see the same
 * program. Two launches that the schedule ran one after the other may run in
 * the same phase here: the planner keeps their buffers apart (it widens
 * lifetimes to the kernel's phases, planner/groups.c) and
 * ge2_mlp_step_match checks it did.
 *
 * Phases: fusion/mlp_step/pattern.h's table, after the step's feed upload
 * when the backend gives it one (the launches read pinned host memory's
 * copy in the feed region); a staging slot with a device staging has its
 * own launches, which read the feeds there, so its state (one per slot)
 * has its phases read them there and gets no upload. In the row chain each work item takes a few
 * batch rows through the chain's forward, the loss epilogue (logits,
 * dlogits, the item's loss partials) and back through the input gradients:
 * a row needs only itself and the weights, so no barrier is needed between
 * them; each item re-reads the chain's weights, which is why the chain
 * starts where they fit GE2_MLP_STEP_CHAIN_BYTES. A chain of the last
 * layer alone with at most 32 classes runs a warp per row instead, its
 * weights in shared memory (no tiles, no k-group reduction). The last phase's dW and db
 * epilogues also update each element's parameter and optimizer state
 * (optimizer_rule.h): no weight is read after the chain, and the matcher
 * checks the gradients are the whole flat pools.
 * Every sum runs in a fixed order, so a step is bit-identical run to run.
 */
#ifndef GE2_FUSION_MLP_STEP_MLP_STEP_H
#define GE2_FUSION_MLP_STEP_MLP_STEP_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/cuda/step_copy.h"
#include "fusion/mlp_step/pattern.h"
#include "graph/control.h"
#include "graph/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ge2_mlp_step_layer {
    int64_t in, out;
    ge2_activation act;     /* GE2_ACT_NONE or GE2_ACT_RELU */
    const float *x;         /* [B, in]  the feed, or the layer below's y */
    const float *w;         /* [out, in] */
    const float *b;         /* [out] */
    float *y;               /* [B, out] */
    uint8_t *mask;          /* [B, mask_row_bytes] relu's bit-mask (z > 0); NULL without relu */
    int64_t mask_row_bytes;
    float *dz;              /* [B, out] dloss/dz: the dlogits for the last layer */
    float *dw;              /* [out, in] in the gradient pool */
    float *db;              /* [out] in the gradient pool */
} ge2_mlp_step_layer;

typedef struct ge2_mlp_step_desc {
    int n_layers;
    int chain_from;        /* first layer of the row chain (fusion/mlp_step/pattern.h) */
    int64_t batch;
    const int32_t *labels; /* [B] */
    int loss_node;         /* the cross-entropy's node id: an out-of-range label is counted under it */
    float label_smoothing;
    float *loss;           /* [] mean cross-entropy */
    float *correct;        /* [] ACCURACY's count of right argmaxes; NULL without */
    ge2_mlp_step_layer layer[GE2_MLP_STEP_MAX_LAYERS];
    ge2_optimizer_config optimizer;
    ge2_flat_pools pools;
    ge2_control *control;
    bool profile; /* stamp each phase and job; the last step's timings print at free */
} ge2_mlp_step_desc;

/* fusion/mlp_step/match.c. True and *desc filled when launches[0, n) are exactly one
 * training step the kernel implements (ge2_mlp_step_pattern_find), the
 * optimizer's gradients are exactly the layers' dW and db, and running them
 * phase by phase is safe for the plan's arena. Otherwise false and *why
 * says what did not fit. */
bool ge2_mlp_step_match(const ge2_launch *launches, int n, ge2_mlp_step_desc *desc, char *why, size_t why_size);

/* mlp_step.cu. Per graph key, before warm-up and capture: chooses tiles,
 * sizes the grid to the GPU and allocates the kernel's job table and
 * scratch. */
typedef struct ge2_mlp_step ge2_mlp_step;
ge2_status ge2_mlp_step_prepare(const ge2_mlp_step_desc *desc, ge2_mlp_step **out);
/* Enqueues the step on stream (a cudaStream_t); capturable. The kernel also
 * does the step's copies (step_copy.h): upload before the first phase
 * (NULL: none), the n_results result copies after the last. */
ge2_status ge2_mlp_step_launch(const ge2_mlp_step *step, void *stream, const ge2_cuda_copy *upload,
                               const ge2_cuda_copy *results, int n_results);
void ge2_mlp_step_free(ge2_mlp_step *step);
/* One line for the kernel report, e.g. "ge2 whole-step MLP kernel: 3 layers, 7 phases, 132 blocks". */
const char *ge2_mlp_step_describe(const ge2_mlp_step *step);

#ifdef __cplusplus
}
#endif

#endif /* GE2_FUSION_MLP_STEP_MLP_STEP_H */
