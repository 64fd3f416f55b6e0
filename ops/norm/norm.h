/* The normalization family: BATCH_NORM over dim 1 of [N, C], [N, C, L] or
 * [N, C, H, W] (PyTorch's BatchNorm1d/2d with affine weight and bias), and
 * its backward ops BATCH_NORM_GRAD_PARAMS (dy, x, saved -> dweight, dbias)
 * and BATCH_NORM_GRAD_INPUT (dy, x, weight, saved, dweight, dbias -> dx).
 *
 * BATCH_NORM's inputs are x, weight [C], bias [C], running_mean [C],
 * running_var [C] and optionally num_batches_tracked (i64 scalar); the last
 * three are persistent buffers (GE2_ROLE_BUFFER), which a train step updates
 * in place: running = (1 - momentum) · running + momentum · batch statistic
 * (the unbiased variance, as PyTorch), and num_batches_tracked + 1. Its
 * outputs are y and saved [2, C]: the mean and 1/sqrt(var + eps) it
 * normalized with (the batch's in a train step, the running ones in eval),
 * which the backward reads instead of recomputing them.
 *
 * The kernels take a relu for the bn_relu fusion's ops (fusion/bn_relu),
 * which run them through the *_with launchers below: y = max(0, ·) of the
 * normalized value, and dy taken where that y is positive.
 *
 * Under precision BF16 the three batch-norm ops read x as a bf16 tensor
 * where the storage pass stored a convolution's output so, and
 * BATCH_NORM_GRAD_INPUT stores dx in bf16 where only the convolution's
 * backward GEMMs read it; they compute in f32 either way.
 *
 * LAYER_NORM over the last dim of x [..., C] (PyTorch's LayerNorm): inputs
 * x, weight [C][, bias [C]], outputs y and saved [2, rows] (each row's mean
 * and 1/sqrt(var + eps)); its backward ops LAYER_NORM_GRAD_PARAMS (dy, x,
 * saved -> dweight, dbias: sums over the rows) and LAYER_NORM_GRAD_INPUT
 * (dy, x, weight, saved -> dx: within each row). LAYER_NORM_GRAD_INPUT's
 * inference and kernels also take an addend as input 4, which dx gets at
 * the store: fusion/add_into's LAYER_NORM_GRAD_INPUT_ADD runs them so (the
 * residual stream's gradient), the plain op has no such input.
 *
 * ops.c holds the definitions (registered by ops/builtin.def's line for
 * each); the rest of the folder is their parts: infer.c, backward.c, api.c
 * (the public builders), cpu.c, the CUDA launchers (cuda.cu) and test.c
 * (test cases and float64 references). */
#ifndef GE2_OPS_NORM_NORM_H
#define GE2_OPS_NORM_NORM_H

/* nvcc compiles the CUDA launchers as C++: these are C declarations */
#ifdef __cplusplus
extern "C" {
#endif

#include <stdio.h>

#include "autograd/autograd.h"
#include "graph/op_support.h"
#include "ops/ops.h"

/* The family's node attributes (graph/ir.h: GE2_ATTRS). */
/* BATCH_NORM: PyTorch's BatchNorm momentum and eps. */
typedef struct ge2_batch_norm_attrs {
    double momentum, eps;
} ge2_batch_norm_attrs;
GE2_ATTRS_FIT(ge2_batch_norm_attrs);

/* LAYER_NORM: PyTorch's LayerNorm eps. */
typedef struct ge2_layer_norm_attrs {
    double eps;
} ge2_layer_norm_attrs;
GE2_ATTRS_FIT(ge2_layer_norm_attrs);

/* x [N, C, inner...] seen as N × C × inner; each channel normalizes over
 * m = N · inner values. */
typedef struct ge2_bn_geom {
    int64_t n, c, inner, m;
} ge2_bn_geom;

static inline ge2_bn_geom ge2_bn_geom_of(ge2_shape x)
{
    ge2_bn_geom g;
    g.n = x.dim[0], g.c = x.dim[1], g.inner = 1;
    for (int i = 2; i < x.ndim; i++)
        g.inner *= x.dim[i];
    g.m = g.n * g.inner;
    return g;
}

/* The running variance's factor m / (m - 1) (PyTorch's unbiased estimate);
 * 1 for a single value, where the unbiased estimate does not exist. */
static inline double ge2_bn_unbias(int64_t m) { return m > 1 ? (double)m / (double)(m - 1) : 1.0; }

/* infer.c */
ge2_status ge2_infer_BATCH_NORM(const ge2_node *node, const ge2_desc *in, ge2_desc *out);
ge2_status ge2_infer_BATCH_NORM_GRAD_PARAMS(const ge2_node *node, const ge2_desc *in, ge2_desc *out);
ge2_status ge2_infer_BATCH_NORM_GRAD_INPUT(const ge2_node *node, const ge2_desc *in, ge2_desc *out);

/* x [..., C] seen as rows × C */
typedef struct ge2_ln_geom {
    int64_t rows, c;
} ge2_ln_geom;

static inline ge2_ln_geom ge2_ln_geom_of(ge2_shape x)
{
    ge2_ln_geom g = {1, x.ndim > 0 ? x.dim[x.ndim - 1] : 1};
    for (int i = 0; i + 1 < x.ndim; i++)
        g.rows *= x.dim[i];
    return g;
}

/* The "row4" form of a layer norm's rows on CUDA (ops/norm/cuda_layer_norm.h:
 * four neighbouring values a lane) takes rows of c values, c a multiple of
 * 4 up to GE2_LN_ROW4_MAX_C; the fusions' matchers ask it too, so a group
 * their kernels cannot run is not planned */
#define GE2_LN_ROW4_MAX_C 1024
static inline bool ge2_ln_row4_takes(int64_t c) { return c > 0 && c % 4 == 0 && c <= GE2_LN_ROW4_MAX_C; }

/* For a fusion's matcher: whether its row4 kernel, taking rows of up to
 * max_c values, takes rows of c, else why not (why NULL-safe) */
static inline bool ge2_ln_row4_fits(int64_t c, int max_c, char *why, size_t why_size)
{
    if (ge2_ln_row4_takes(c) && c <= max_c)
        return true;
    if (why && why_size)
        snprintf(why, why_size, "rows of %lld values (the kernel takes a multiple of 4 up to %d)", (long long)c,
                 max_c);
    return false;
}

/* infer.c: the row norms' checks, which RMS_NORM's (ops/rms_norm) share.
 * x [..., C] float with at least one dim; t is [C] in x's dtype. */
ge2_status ge2_norm_check_rows_x(const ge2_node *node, const ge2_desc *x);
ge2_status ge2_norm_check_row_vector(const ge2_node *node, const ge2_desc *x, const ge2_desc *t, const char *what);
ge2_status ge2_infer_LAYER_NORM(const ge2_node *node, const ge2_desc *in, ge2_desc *out);
ge2_status ge2_infer_LAYER_NORM_GRAD_PARAMS(const ge2_node *node, const ge2_desc *in, ge2_desc *out);
ge2_status ge2_infer_LAYER_NORM_GRAD_INPUT(const ge2_node *node, const ge2_desc *in, ge2_desc *out);

/* backward.c */
ge2_status ge2_backward_batch_norm(ge2_autograd *ag, const ge2_node *node, const int *dy);
/* The batch norm's backward from tensor d, the gradient of the normalized
 * value (the bn_relu fusion's op takes its dy through relu' first). */
ge2_status ge2_backward_batch_norm_from(ge2_autograd *ag, const ge2_node *node, int d);
ge2_status ge2_backward_layer_norm(ge2_autograd *ag, const ge2_node *node, const int *dy);

/* cpu.c: shapes from the launch views, in the dtype of input 0 (f32, or f64
 * for gradient checks); outputs whose data is NULL are skipped */
ge2_status ge2_cpu_batch_norm(const ge2_launch *l);
ge2_status ge2_cpu_batch_norm_grad_params(const ge2_launch *l);
ge2_status ge2_cpu_batch_norm_grad_input(const ge2_launch *l);
/* The same with the bn_relu fusion's relu: y = max(0, ·) (relu), dy taken
 * where relu_y > 0 (relu_y: the relu'd y, of x's dtype; NULL: none). */
ge2_status ge2_cpu_batch_norm_with(const ge2_launch *l, bool relu);
ge2_status ge2_cpu_batch_norm_grad_params_with(const ge2_launch *l, const void *relu_y);
ge2_status ge2_cpu_batch_norm_grad_input_with(const ge2_launch *l, const void *relu_y);
ge2_status ge2_cpu_layer_norm(const ge2_launch *l);
ge2_status ge2_cpu_layer_norm_grad_params(const ge2_launch *l);
ge2_status ge2_cpu_layer_norm_grad_input(const ge2_launch *l);

/* CUDA launchers (f32, batch norm's x and dx also bf16): enqueue on launch->stream, capturable */
ge2_status ge2_cuda_batch_norm_launch(const ge2_launch *launch);
ge2_status ge2_cuda_batch_norm_grad_params_launch(const ge2_launch *launch);
ge2_status ge2_cuda_batch_norm_grad_input_launch(const ge2_launch *launch);
/* The same with the bn_relu fusion's relu (as the CPU's *_with; relu_y f32) */
ge2_status ge2_cuda_batch_norm_launch_with(const ge2_launch *launch, bool relu);
ge2_status ge2_cuda_batch_norm_grad_params_launch_with(const ge2_launch *launch, const float *relu_y);
ge2_status ge2_cuda_batch_norm_grad_input_launch_with(const ge2_launch *launch, const float *relu_y);
ge2_status ge2_cuda_layer_norm_launch(const ge2_launch *launch);
ge2_status ge2_cuda_layer_norm_grad_params_launch(const ge2_launch *launch);
ge2_status ge2_cuda_layer_norm_grad_input_launch(const ge2_launch *launch);

/* ops.c */
extern const ge2_op_def ge2_op_def_batch_norm;
extern const ge2_op_def ge2_op_def_batch_norm_grad_params;
extern const ge2_op_def ge2_op_def_batch_norm_grad_input;
extern const ge2_op_def ge2_op_def_layer_norm;
extern const ge2_op_def ge2_op_def_layer_norm_grad_params;
extern const ge2_op_def ge2_op_def_layer_norm_grad_input;

#ifdef __cplusplus
}
#endif

#endif /* GE2_OPS_NORM_NORM_H */
