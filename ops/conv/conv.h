/* The convolution family: CONV2D (PyTorch's Conv2d over NCHW: stride,
 * padding, dilation, groups, optional bias) and its two backward ops,
 * CONV2D_GRAD_INPUT (dy, x as a shape, w -> dx) and CONV2D_GRAD_WEIGHT
 * (dy, w as a shape, x -> dw[, db]).
 *
 * ops.c holds the definitions (registered by ops/builtin.def's line for
 * each); the rest of the folder is their parts: infer.c, backward.c, api.c
 * (the public builder), cpu.c (im2col + cblas), cudnn.c (the CUDA kernels:
 * cuDNN's plans), cuda.cu (ge2's direct kernels, the fallback)
 * and test.c (test cases and float64 references). */
#ifndef GE2_OPS_CONV_CONV_H
#define GE2_OPS_CONV_CONV_H

/* nvcc compiles the CUDA launchers as C++: these are C declarations */
#ifdef __cplusplus
extern "C" {
#endif

#include "autograd/autograd.h"
#include "graph/op_support.h"
#include "ops/ops.h"

/* The family's node attributes (graph/ir.h: GE2_ATTRS). */
/* CONV2D and its backward ops: PyTorch's Conv2d arguments, per axis (h, w). */
typedef struct ge2_conv2d_attrs {
    int stride[2], padding[2], dilation[2];
    int groups;
} ge2_conv2d_attrs;
GE2_ATTRS_FIT(ge2_conv2d_attrs);

/* One convolution's sizes, from its attrs and the concrete shapes of x
 * [N, C, H, W] and w [O, C/groups, KH, KW]; y is [N, O, OH, OW]. */
typedef struct ge2_conv2d_geom {
    int64_t n, c, h, w;   /* x */
    int64_t o, kh, kw;    /* w */
    int64_t oh, ow;       /* y */
    int64_t groups, cg, og; /* groups, input and output channels per group */
    int64_t sh, sw, ph, pw, dh, dw;
} ge2_conv2d_geom;

/* Output extent of one axis; < 1 when the window does not fit (tested
 * before dividing: C's division truncates a small negative span to 0). */
static inline int64_t ge2_conv2d_out_extent(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dil)
{
    int64_t span = in + 2 * pad - dil * (k - 1) - 1;
    return span < 0 ? 0 : span / stride + 1;
}

static inline ge2_conv2d_geom ge2_conv2d_geom_of(const ge2_conv2d_attrs *a, ge2_shape x, ge2_shape w)
{
    ge2_conv2d_geom g;
    g.n = x.dim[0], g.c = x.dim[1], g.h = x.dim[2], g.w = x.dim[3];
    g.o = w.dim[0], g.kh = w.dim[2], g.kw = w.dim[3];
    g.sh = a->stride[0], g.sw = a->stride[1], g.ph = a->padding[0], g.pw = a->padding[1];
    g.dh = a->dilation[0], g.dw = a->dilation[1];
    g.groups = a->groups > 0 ? a->groups : 1;
    g.cg = g.c / g.groups, g.og = g.o / g.groups;
    g.oh = ge2_conv2d_out_extent(g.h, g.kh, g.sh, g.ph, g.dh);
    g.ow = ge2_conv2d_out_extent(g.w, g.kw, g.sw, g.pw, g.dw);
    return g;
}

/* infer.c */
ge2_status ge2_infer_CONV2D(const ge2_node *node, const ge2_desc *in, ge2_desc *out);
ge2_status ge2_infer_CONV2D_GRAD_INPUT(const ge2_node *node, const ge2_desc *in, ge2_desc *out);
ge2_status ge2_infer_CONV2D_GRAD_WEIGHT(const ge2_node *node, const ge2_desc *in, ge2_desc *out);

/* backward.c */
ge2_status ge2_backward_conv2d(ge2_autograd *ag, const ge2_node *node, const int *dy);

/* cpu.c: shapes from the launch views, in the dtype of input 0 (f32, or f64
 * for gradient checks); outputs whose data is NULL are skipped */
ge2_status ge2_cpu_conv2d(const ge2_launch *l);
ge2_status ge2_cpu_conv2d_grad_input(const ge2_launch *l);
ge2_status ge2_cpu_conv2d_grad_weight(const ge2_launch *l);

/* The ops' CUDA kernels (cudnn.c): prepare builds a cuDNN plan for the
 * launch, or notes why not; launch runs it, or ge2's direct kernel. Under
 * precision BF16 (FP16) the plan is cuDNN's bf16 (fp16) convolution, with
 * its 16-bit operand copies and result in ge2_launch.scratch
 * (bf16_scratch_bytes), or writing a y the storage pass stored in bf16
 * itself (stores_bf16: only batch norm or another convolution reads it). */
ge2_status ge2_cuda_conv2d_prepare(ge2_launch *launch);
ge2_status ge2_cuda_conv2d_grad_input_prepare(ge2_launch *launch);
ge2_status ge2_cuda_conv2d_grad_weight_prepare(ge2_launch *launch);
ge2_status ge2_cuda_conv2d_launch(const ge2_launch *launch);
void ge2_cuda_conv2d_release(ge2_launch *launch);
const char *ge2_cuda_conv2d_describe(const ge2_launch *launch);
size_t ge2_cuda_conv2d_bf16_scratch_bytes(const ge2_launch *launch);

/* cuda.cu (f32, or 16-bit operands and a bf16 y): ge2's direct kernels, and the bias kernels cuDNN's plans
 * need; enqueue on launch->stream, capturable */
ge2_status ge2_cuda_conv2d_direct(const ge2_launch *launch);
ge2_status ge2_cuda_conv2d_grad_input_direct(const ge2_launch *launch);
ge2_status ge2_cuda_conv2d_grad_weight_direct(const ge2_launch *launch);
ge2_status ge2_cuda_conv2d_add_bias(const ge2_launch *launch);  /* y += b */
ge2_status ge2_cuda_conv2d_grad_bias(const ge2_launch *launch); /* db = Σ dy (dy f32 or bf16) */

/* ops.c */
extern const ge2_op_def ge2_op_def_conv2d;
extern const ge2_op_def ge2_op_def_conv2d_grad_input;
extern const ge2_op_def ge2_op_def_conv2d_grad_weight;

/* cuda_wgrad_small.cu: a kernel candidate for CONV2D_GRAD_WEIGHT with at
 * most GE2_WGRAD_SMALL_K weights per output channel (candidates.c
 * registers it) */
#define GE2_WGRAD_SMALL_K 32
bool ge2_conv2d_wgrad_small_applies(const ge2_launch *l, char *why, size_t why_size);
ge2_status ge2_conv2d_wgrad_small_launch(const ge2_launch *l);
const char *ge2_conv2d_wgrad_small_describe(const ge2_launch *l);

#ifdef __cplusplus
}
#endif

#endif /* GE2_OPS_CONV_CONV_H */
