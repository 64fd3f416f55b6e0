/* The loss family: CROSS_ENTROPY (mean over the batch, label smoothing,
 * its gradient as a second output), MSE_LOSS, the ACCURACY metric, and
 * LOSS_SCALE, the backward's seed: d loss / d loss, a scalar that is the
 * control block's loss_scale (1 unless the optimizer scales the loss,
 * ge2_loss_scaling). CROSS_ENTROPY's gradient output is scaled by it too.
 * loss_row.h is one row's cross-entropy, shared with the fused head kernels.
 *
 * ops.c holds the definitions (registered by ops/builtin.def's line for
 * each); the rest of the folder is their parts: infer.c, backward.c, api.c
 * (the public builders), cpu.c, the CUDA launchers (cuda*.cu) and test.c
 * (test cases and float64 references). */
#ifndef GE2_OPS_LOSS_LOSS_H
#define GE2_OPS_LOSS_LOSS_H

/* nvcc compiles the CUDA launchers as C++: these are C declarations */
#ifdef __cplusplus
extern "C" {
#endif

#include "autograd/autograd.h"
#include "graph/op_support.h"
#include "ops/ops.h"

/* The family's node attributes (graph/ir.h: GE2_ATTRS). */
typedef struct ge2_loss_attrs {
    float label_smoothing;
    /* CROSS_ENTROPY: the loss is this node's output itself (set by its
     * backward rule), so its gradient output is the backward's start and
     * carries the control block's loss_scale; else the rule multiplies it
     * by an upstream gradient that carries the scale already */
    bool seeds_backward;
    /* CROSS_ENTROPY: the classes are the logits' first `classes` columns;
     * the columns past them are padding (a tied head over a padded
     * embedding, ge2_parameter_padding): out of the softmax, their gradient
     * zero, no label names them. 0: every column is a class. */
    int64_t classes;
} ge2_loss_attrs;
GE2_ATTRS_FIT(ge2_loss_attrs);

/* Cross-entropy rows this wide and wider are a vocabulary's: the CUDA kernel
 * gives each a block of threads (a warp keeps too few loads in flight to
 * read one at the memory's speed), and the gradient is written over the
 * logits where nothing reads them after (ge2_op_def.over_output), as a
 * fused classifier does: [B·T, V] once instead of twice at the step's peak. */
#define GE2_LOSS_WIDE_COLS 1024

/* CROSS_ENTROPY's classes among its logits' cols columns (ge2_loss_attrs.classes; 0: all) */
static inline int64_t ge2_loss_classes(const ge2_node *node, int64_t cols)
{
    const int64_t classes = GE2_ATTRS(ge2_loss_attrs, node->attrs)->classes;
    return classes > 0 && classes < cols ? classes : cols;
}

/* infer.c */
ge2_status ge2_infer_CROSS_ENTROPY(const ge2_node *node, const ge2_desc *in, ge2_desc *out);
ge2_status ge2_infer_MSE_LOSS(const ge2_node *node, const ge2_desc *in, ge2_desc *out);
ge2_status ge2_infer_ACCURACY(const ge2_node *node, const ge2_desc *in, ge2_desc *out);
ge2_status ge2_infer_LOSS_SCALE(const ge2_node *node, const ge2_desc *in, ge2_desc *out);

/* backward.c */
ge2_status ge2_backward_cross_entropy(ge2_autograd *ag, const ge2_node *node, const int *dy);
ge2_status ge2_backward_mse_loss(ge2_autograd *ag, const ge2_node *node, const int *dy);

/* cpu.c: shapes from the launch views, in the dtype of input 0 (f32, or f64
 * for gradient checks); outputs whose data is NULL are skipped */
ge2_status ge2_cpu_cross_entropy(const ge2_launch *l);
ge2_status ge2_cpu_mse_loss(const ge2_launch *l);
ge2_status ge2_cpu_accuracy(const ge2_launch *l);
ge2_status ge2_cpu_loss_scale(const ge2_launch *l);

/* CUDA launchers (f32): enqueue on launch->stream, capturable */
ge2_status ge2_cuda_cross_entropy_launch(const ge2_launch *launch);
ge2_status ge2_cuda_mse_loss_launch(const ge2_launch *launch);
ge2_status ge2_cuda_accuracy_launch(const ge2_launch *launch);
ge2_status ge2_cuda_loss_scale_launch(const ge2_launch *launch);

/* ops.c */
extern const ge2_op_def ge2_op_def_cross_entropy;
extern const ge2_op_def ge2_op_def_mse_loss;
extern const ge2_op_def ge2_op_def_accuracy;
extern const ge2_op_def ge2_op_def_loss_scale;

#ifdef __cplusplus
}
#endif

#endif /* GE2_OPS_LOSS_LOSS_H */
