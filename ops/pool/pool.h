/* The pooling family over NCHW: MAX_POOL2D and AVG_POOL2D (PyTorch's
 * MaxPool2d and AvgPool2d: kernel, stride, padding; floor mode; average
 * pooling counts the padding), and their backward ops MAX_POOL2D_BACKWARD
 * (dy, x -> dx: each gradient goes to its window's first maximum, as in
 * PyTorch) and AVG_POOL2D_BACKWARD (dy, x as a shape -> dx). Global average
 * pooling is a builder over RESHAPE and MEAN (api.c).
 *
 * ops.c holds the definitions (registered by ops/builtin.def's line for
 * each); the rest of the folder is their parts: infer.c, backward.c, api.c
 * (the public builders), cpu.c, the CUDA launchers (cuda.cu) and test.c
 * (test cases and float64 references). */
#ifndef GE2_OPS_POOL_POOL_H
#define GE2_OPS_POOL_POOL_H

/* nvcc compiles the CUDA launchers as C++: these are C declarations */
#ifdef __cplusplus
extern "C" {
#endif

#include "autograd/autograd.h"
#include "graph/op_support.h"
#include "ops/ops.h"

/* The family's node attributes (graph/ir.h: GE2_ATTRS). */
/* MAX_POOL2D, AVG_POOL2D and their backward ops, per axis (h, w). Average
 * pooling divides by the whole window, padding included (PyTorch's
 * count_include_pad=True). */
typedef struct ge2_pool2d_attrs {
    int kernel[2], stride[2], padding[2];
} ge2_pool2d_attrs;
GE2_ATTRS_FIT(ge2_pool2d_attrs);

/* One pooling's sizes: x [N, C, H, W] -> y [N, C, OH, OW]. */
typedef struct ge2_pool2d_geom {
    int64_t n, c, h, w, oh, ow;
    int64_t kh, kw, sh, sw, ph, pw;
} ge2_pool2d_geom;

static inline ge2_pool2d_geom ge2_pool2d_geom_of(const ge2_pool2d_attrs *a, ge2_shape x)
{
    ge2_pool2d_geom g;
    g.n = x.dim[0], g.c = x.dim[1], g.h = x.dim[2], g.w = x.dim[3];
    g.kh = a->kernel[0], g.kw = a->kernel[1], g.sh = a->stride[0], g.sw = a->stride[1];
    g.ph = a->padding[0], g.pw = a->padding[1];
    /* a span < 0 is a window that does not fit (0 outputs, not C's truncation to 1) */
    int64_t span_h = g.h + 2 * g.ph - g.kh, span_w = g.w + 2 * g.pw - g.kw;
    g.oh = g.sh > 0 && span_h >= 0 ? span_h / g.sh + 1 : 0;
    g.ow = g.sw > 0 && span_w >= 0 ? span_w / g.sw + 1 : 0;
    return g;
}

/* infer.c */
ge2_status ge2_infer_POOL2D(const ge2_node *node, const ge2_desc *in, ge2_desc *out);
ge2_status ge2_infer_POOL2D_BACKWARD(const ge2_node *node, const ge2_desc *in, ge2_desc *out);

/* backward.c */
ge2_status ge2_backward_pool2d(ge2_autograd *ag, const ge2_node *node, const int *dy);

/* cpu.c: shapes from the launch views, in the dtype of input 0 (f32, or f64
 * for gradient checks); outputs whose data is NULL are skipped */
ge2_status ge2_cpu_pool2d(const ge2_launch *l);          /* MAX_POOL2D, AVG_POOL2D */
ge2_status ge2_cpu_pool2d_backward(const ge2_launch *l); /* their backward ops */

/* CUDA launchers (f32): enqueue on launch->stream, capturable */
ge2_status ge2_cuda_pool2d_launch(const ge2_launch *launch);
ge2_status ge2_cuda_pool2d_backward_launch(const ge2_launch *launch);

/* ops.c */
extern const ge2_op_def ge2_op_def_max_pool2d;
extern const ge2_op_def ge2_op_def_avg_pool2d;
extern const ge2_op_def ge2_op_def_max_pool2d_backward;
extern const ge2_op_def ge2_op_def_avg_pool2d_backward;

#ifdef __cplusplus
}
#endif

#endif /* GE2_OPS_POOL_POOL_H */
