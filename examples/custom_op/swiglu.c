/* The SwiGLU ops' definitions: inference, backward rule, CPU kernels, and
 * their registration (see swiglu.h). Public headers only. */
#include "swiglu.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static ge2_op swiglu_op = -1, swiglu_backward_op = -1;

/* ---------------------------------------------------------------- inference */

static ge2_status need_same(const ge2_node *node, const ge2_desc *x, const ge2_desc *y)
{
    char sx[64], sy[64];
    if (x->dtype != y->dtype || (x->dtype != GE2_F32 && x->dtype != GE2_F64))
        return ge2_error(GE2_ERR_DTYPE, "ge2_%s: '%s' is %s, '%s' is %s; both f32 (or f64 on the CPU)",
                         ge2_node_op_name(node), x->name, ge2_dtype_name(x->dtype), y->name, ge2_dtype_name(y->dtype));
    bool same = x->shape.ndim == y->shape.ndim;
    for (int d = 0; same && d < x->shape.ndim; d++)
        same = x->shape.dim[d] == y->shape.dim[d];
    if (!same)
        return ge2_error(GE2_ERR_SHAPE, "ge2_%s: shapes differ: '%s' is %s, '%s' is %s", ge2_node_op_name(node),
                         x->name, ge2_shape_str(x->shape, sx, sizeof sx), y->name,
                         ge2_shape_str(y->shape, sy, sizeof sy));
    return GE2_OK;
}

/* a, g -> y */
static ge2_status infer_forward(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    ge2_status st = need_same(node, &in[0], &in[1]);
    out[0] = (ge2_desc){in[0].dtype, in[0].shape, NULL};
    return st;
}

/* dy, a, g -> da, dg */
static ge2_status infer_backward(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    ge2_status st = need_same(node, &in[0], &in[1]);
    if (st == GE2_OK)
        st = need_same(node, &in[1], &in[2]);
    out[0] = out[1] = (ge2_desc){in[1].dtype, in[1].shape, NULL};
    return st;
}

/* ----------------------------------------------------------- backward rule */

static ge2_status backward_rule(ge2_autograd *ag, const ge2_node *node, const int *dy)
{
    const int a = ge2_node_input(node, 0), g = ge2_node_input(node, 1);
    int d, grads[2];
    ge2_status st = ge2_ag_dy_tensor(ag, dy[0], &d);
    if (st != GE2_OK)
        return st;
    const int in[3] = {d, a, g};
    st = ge2_ag_emit_op(ag, swiglu_backward_op, in, 3, NULL, 0, 2, grads);
    if (st == GE2_OK)
        st = ge2_ag_accumulate(ag, a, grads[0]); /* a no-op when a wants no gradient */
    if (st == GE2_OK)
        st = ge2_ag_accumulate(ag, g, grads[1]);
    return st;
}

/* -------------------------------------------------------------- CPU kernels */

#define SWIGLU_CPU(T, SUF, EXP)                                                                             \
    static void forward_##SUF(const ge2_launch *l, int64_t n)                                              \
    {                                                                                                      \
        const T *a = l->in[0].data, *g = l->in[1].data;                                                    \
        T *y = l->out[0].data;                                                                             \
        for (int64_t i = 0; i < n; i++)                                                                    \
            y[i] = a[i] * g[i] / ((T)1 + EXP(-g[i]));                                                      \
    }                                                                                                      \
    static void backward_##SUF(const ge2_launch *l, int64_t n)                                             \
    {                                                                                                      \
        const T *dy = l->in[0].data, *a = l->in[1].data, *g = l->in[2].data;                              \
        T *da = l->out[0].data, *dg = l->out[1].data;                                                      \
        for (int64_t i = 0; i < n; i++) {                                                                  \
            const T s = (T)1 / ((T)1 + EXP(-g[i]));                                                        \
            if (da)                                                                                        \
                da[i] = dy[i] * g[i] * s;                                                                  \
            if (dg)                                                                                        \
                dg[i] = dy[i] * a[i] * s * ((T)1 + g[i] * ((T)1 - s));                                     \
        }                                                                                                  \
    }
SWIGLU_CPU(float, f32, expf)
SWIGLU_CPU(double, f64, exp)

static ge2_status cpu_forward(const ge2_launch *l)
{
    const int64_t n = ge2_shape_numel(l->out[0].shape);
    if (l->out[0].data)
        (l->in[0].dtype == GE2_F64 ? forward_f64 : forward_f32)(l, n);
    return GE2_OK;
}

static ge2_status cpu_backward(const ge2_launch *l)
{
    (l->in[1].dtype == GE2_F64 ? backward_f64 : backward_f32)(l, ge2_shape_numel(l->in[1].shape));
    return GE2_OK;
}

/* --------------------------------------------------------------- the ops */

static const ge2_op_def swiglu_def = {
    .name = "swiglu",
    .min_inputs = 2,
    .max_inputs = 2,
    .max_outputs = 1,
    .flags = GE2_OPF_ELEMENTWISE, /* y may take a's bytes when a dies here */
    .infer = infer_forward,
    .backward = backward_rule,
    .cpu = cpu_forward,
    .cuda = {NULL, swiglu_cuda_forward, NULL, NULL},
};

static const ge2_op_def swiglu_backward_def = {
    .name = "swiglu_backward",
    .min_inputs = 3,
    .max_inputs = 3,
    .max_outputs = 2,
    .infer = infer_backward,
    .cpu = cpu_backward,
    .cuda = {NULL, swiglu_cuda_backward, NULL, NULL},
};

static const char *describe_vec4(const ge2_launch *l)
{
    (void)l;
    return "swiglu float4 kernel";
}

/* The float4 kernel takes whole float4s only: n a multiple of 4 and every
 * pointer 16-byte aligned. */
static bool vec4_applies(const ge2_launch *l, char *why, size_t why_size)
{
    const int64_t n = ge2_shape_numel(l->out[0].shape);
    bool ok = n % 4 == 0;
    for (int i = 0; ok && i < 2; i++)
        ok = ((uintptr_t)l->in[i].data & 15) == 0;
    ok = ok && ((uintptr_t)l->out[0].data & 15) == 0;
    if (!ok)
        snprintf(why, why_size, "%lld elements or an address not in whole float4s", (long long)n);
    return ok;
}

static const ge2_kernel_candidate vec4_candidate = {
    .name = "swiglu_vec4",
    .applies = vec4_applies,
    .cuda = {NULL, swiglu_cuda_forward_vec4, NULL, describe_vec4},
};

ge2_status swiglu_register(void)
{
    ge2_status st = ge2_op_register(&swiglu_def, &swiglu_op);
    if (st == GE2_OK)
        st = ge2_op_register(&swiglu_backward_def, &swiglu_backward_op);
    if (st == GE2_OK)
        st = ge2_kernel_candidate_register(swiglu_op, &vec4_candidate);
    return st;
}

ge2_status swiglu(ge2_graph *graph, ge2_tensor *a, ge2_tensor *g, ge2_tensor **y)
{
    if (swiglu_op < 0)
        return ge2_error(GE2_ERR_STATE, "swiglu: call swiglu_register() first");
    ge2_tensor *in[2] = {a, g};
    return ge2_apply(graph, swiglu_op, in, 2, NULL, 0, 1, y);
}
