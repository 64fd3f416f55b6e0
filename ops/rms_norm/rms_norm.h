/* The RMS norm family: RMS_NORM over the last dim of x [..., C] (PyTorch's
 * RMSNorm with an elementwise weight, as Llama's layers use it):
 *   y = x · rstd · weight,  rstd = 1 / sqrt(mean(x²) + eps),
 * inputs x, weight [C], outputs y and saved [rows] (each row's rstd, which
 * the backward reads instead of recomputing it); its backward op
 * RMS_NORM_GRAD (dy, x, weight, saved -> dx, dweight), with
 *   dx = rstd · (g - x̂ · mean(g · x̂)),  g = dy · weight,  x̂ = x · rstd,
 *   dweight = Σ_rows dy · x̂.
 *
 * ops.c holds the definitions (registered by ops/builtin.def's line for
 * each); the rest of the folder is their parts: infer.c, backward.c, api.c
 * (the public builders), cpu.c, the CUDA launchers (cuda.cu) and test.c
 * (test cases and float64 references). The row checks and the rows × C
 * geometry are the layer norm's (ops/norm/norm.h). */
#ifndef GE2_OPS_RMS_NORM_RMS_NORM_H
#define GE2_OPS_RMS_NORM_RMS_NORM_H

/* nvcc compiles the CUDA launchers as C++: these are C declarations */
#ifdef __cplusplus
extern "C" {
#endif

#include "autograd/autograd.h"
#include "graph/op_support.h"
#include "ops/norm/norm.h"
#include "ops/ops.h"

/* RMS_NORM's node attributes (graph/ir.h: GE2_ATTRS): the eps added to
 * mean(x²) */
typedef struct ge2_rms_norm_attrs {
    double eps;
} ge2_rms_norm_attrs;
GE2_ATTRS_FIT(ge2_rms_norm_attrs);

/* infer.c */
ge2_status ge2_infer_RMS_NORM(const ge2_node *node, const ge2_desc *in, ge2_desc *out);
ge2_status ge2_infer_RMS_NORM_GRAD(const ge2_node *node, const ge2_desc *in, ge2_desc *out);

/* backward.c */
ge2_status ge2_backward_rms_norm(ge2_autograd *ag, const ge2_node *node, const int *dy);

/* cpu.c: shapes from the launch views, in the dtype of x (f32, or f64 for
 * gradient checks); outputs whose data is NULL are skipped */
ge2_status ge2_cpu_rms_norm(const ge2_launch *l);
ge2_status ge2_cpu_rms_norm_grad(const ge2_launch *l);

/* cuda.cu: f32, enqueue on launch->stream, capturable */
ge2_status ge2_cuda_rms_norm_launch(const ge2_launch *l);
ge2_status ge2_cuda_rms_norm_grad_launch(const ge2_launch *l);
size_t ge2_cuda_rms_norm_grad_scratch_bytes(const ge2_launch *l);

/* ops.c */
extern const ge2_op_def ge2_op_def_rms_norm;
extern const ge2_op_def ge2_op_def_rms_norm_grad;

#ifdef __cplusplus
}
#endif

#endif /* GE2_OPS_RMS_NORM_RMS_NORM_H */
