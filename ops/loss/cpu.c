/* Losses and metrics: CROSS_ENTROPY (softmax, mean loss and its gradient in
 * one pass), MSE_LOSS and ACCURACY. A label outside [0, C) (the loss's:
 * [0, classes), ge2_cross_entropy_padded) fails the step,
 * naming the node, the row and the value (graph/control.h); CUDA counts it
 * and the program fails the same way. */
#include <math.h>

#include "graph/control.h"
#include "kernels/cpu/cpu_util.h"
#include "ops/loss/loss.h"

static ge2_status bad_label(const ge2_launch *l, int64_t row, int32_t label, int64_t classes)
{
    return ge2_bad_index_error(ge2_op_name(l->node->op), l->node->id, GE2_BAD_LABEL, row, label, classes);
}

/* in: logits [B, C], labels [B] i32; out: loss [] (mean over B), dlogits [B, C] = d loss / d logits, times the
 * control block's loss_scale where the loss is this node's output (ge2_loss_attrs.seeds_backward)
 * With label smoothing eps the target is q = (1 - eps) onehot + eps / K (PyTorch), over the K classes: the first
 * ge2_loss_attrs.classes columns (all when 0); the columns past them get zero gradient. */
#define CROSS_ENTROPY(T, SUF)                                                                                     \
    static ge2_status cross_entropy_##SUF(const ge2_launch *l)                                                  \
    {                                                                                                           \
        const ge2_loss_attrs *at = GE2_ATTRS(ge2_loss_attrs, l->node->attrs);                                   \
        const T *x = l->in[0].data;                                                                             \
        const int32_t *labels = l->in[1].data;                                                                  \
        T *loss = l->out[0].data, *dx = l->n_out > 1 ? l->out[1].data : NULL;                                   \
        int64_t rows = l->in[0].shape.dim[0], c = l->in[0].shape.dim[1];                                        \
        int64_t k = ge2_loss_classes(l->node, c);                                                               \
        double eps = at->label_smoothing, off = eps / (double)k, total = 0;                                     \
        const bool seeds = at->seeds_backward && l->control; /* the loss: ge2_loss_scaling */                   \
        const double scale = seeds ? l->control->loss_scale : 1.0;                                              \
        for (int64_t r = 0; r < rows; r++)                                                                      \
            if (labels[r] < 0 || labels[r] >= k)                                                                \
                return bad_label(l, r, labels[r], k);                                                           \
        for (int64_t r = 0; r < rows; r++) {                                                                    \
            const T *xr = x + r * c;                                                                            \
            int32_t y = labels[r];                                                                              \
            T mx = xr[0];                                                                                       \
            for (int64_t i = 1; i < k; i++)                                                                     \
                mx = xr[i] > mx ? xr[i] : mx;                                                                   \
            double sum = 0, qx = 0;                                                                             \
            for (int64_t i = 0; i < k; i++) {                                                                   \
                sum += exp((double)(xr[i] - mx));                                                               \
                qx += (off + (i == y ? 1.0 - eps : 0.0)) * (double)(xr[i] - mx);                                \
            }                                                                                                   \
            /* -sum q log p = lse - sum q x, with the max shifted out of both */                                \
            total += log(sum) - qx;                                                                             \
            for (int64_t i = 0; dx && i < c; i++) {                                                             \
                double p = exp((double)(xr[i] - mx)) / sum, q = off + (i == y ? 1.0 - eps : 0.0);               \
                dx[r * c + i] = i < k ? (T)((p - q) / (double)rows * scale) : (T)0;                             \
            }                                                                                                   \
        }                                                                                                       \
        if (loss)                                                                                               \
            *loss = (T)(total / (double)rows);                                                                  \
        return GE2_OK;                                                                                          \
    }

/* in: pred, target (same shape); out: loss [] = mean (pred - target)^2 */
#define MSE_LOSS(T, SUF)                                                                                          \
    static ge2_status mse_loss_##SUF(const ge2_launch *l)                                                       \
    {                                                                                                           \
        const T *p = l->in[0].data, *t = l->in[1].data;                                                         \
        T *loss = l->out[0].data;                                                                               \
        int64_t n = ge2_shape_numel(l->in[0].shape);                                                            \
        double acc = 0;                                                                                         \
        for (int64_t i = 0; loss && i < n; i++)                                                                 \
            acc += ((double)p[i] - t[i]) * ((double)p[i] - t[i]);                                               \
        if (loss)                                                                                               \
            *loss = (T)(acc / (double)n);                                                                       \
        return GE2_OK;                                                                                          \
    }

/* in: logits [B, C], labels [B] i32; out: correct [] f32 = rows whose first argmax is the label */
#define ACCURACY(T, SUF)                                                                                          \
    static ge2_status accuracy_##SUF(const ge2_launch *l)                                                       \
    {                                                                                                           \
        const T *x = l->in[0].data;                                                                             \
        const int32_t *labels = l->in[1].data;                                                                  \
        float *correct = l->out[0].data;                                                                        \
        int64_t rows = l->in[0].shape.dim[0], c = l->in[0].shape.dim[1], hits = 0;                              \
        for (int64_t r = 0; r < rows; r++)                                                                      \
            if (labels[r] < 0 || labels[r] >= c)                                                                \
                return bad_label(l, r, labels[r], c);                                                           \
        for (int64_t r = 0; correct && r < rows; r++) {                                                         \
            int64_t arg = c; /* a row of NaNs matches no label */                                               \
            T best = (T)-INFINITY;                                                                              \
            for (int64_t i = 0; i < c; i++)                                                                     \
                if (x[r * c + i] > best || (arg == c && x[r * c + i] == best))                                  \
                    best = x[r * c + i], arg = i;                                                               \
            hits += arg == labels[r];                                                                           \
        }                                                                                                       \
        if (correct)                                                                                            \
            *correct = (float)hits;                                                                             \
        return GE2_OK;                                                                                          \
    }

GE2_CPU_DEFINE_BOTH(CROSS_ENTROPY)
GE2_CPU_DEFINE_BOTH(MSE_LOSS)
GE2_CPU_DEFINE_BOTH(ACCURACY)

ge2_status ge2_cpu_cross_entropy(const ge2_launch *l) { return GE2_CPU_DISPATCH(cross_entropy, l, l->in[0].dtype); }
ge2_status ge2_cpu_mse_loss(const ge2_launch *l) { return GE2_CPU_DISPATCH(mse_loss, l, l->in[0].dtype); }
ge2_status ge2_cpu_accuracy(const ge2_launch *l) { return GE2_CPU_DISPATCH(accuracy, l, l->in[0].dtype); }

/* out: the seed [] = the control block's loss_scale (1 without one: a
 * graph run outside a program) */
ge2_status ge2_cpu_loss_scale(const ge2_launch *l)
{
    const double scale = l->control ? l->control->loss_scale : 1.0;
    if (l->out[0].dtype == GE2_F64)
        *(double *)l->out[0].data = scale;
    else
        *(float *)l->out[0].data = (float)scale;
    return GE2_OK;
}
