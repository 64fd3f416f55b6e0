/* The shape family: pure data movement, so one byte-level body serves every
 * dtype. */
#include <string.h>

#include "kernels/cpu/cpu_util.h"
#include "ops/shape/shape.h"

static size_t view_bytes(const ge2_view *v) { return (size_t)ge2_shape_numel(v->shape) * ge2_dtype_size(v->dtype); }

/* in: x, like (optional, shape only); out: y [numel(x)], same bytes */
ge2_status ge2_cpu_reshape(const ge2_launch *l)
{
    if (l->out[0].data && l->out[0].data != l->in[0].data)
        memmove(l->out[0].data, l->in[0].data, view_bytes(&l->in[0]));
    return GE2_OK;
}

/* in: x [R, C]; out: y [C, R] */
ge2_status ge2_cpu_transpose(const ge2_launch *l)
{
    const char *x = l->in[0].data;
    char *y = l->out[0].data;
    int64_t r = l->in[0].shape.dim[0], c = l->in[0].shape.dim[1];
    size_t es = ge2_dtype_size(l->in[0].dtype);
    for (int64_t i = 0; y && i < r; i++)
        for (int64_t j = 0; j < c; j++)
            memcpy(y + (size_t)(j * r + i) * es, x + (size_t)(i * c + j) * es, es);
    return GE2_OK;
}

/* in: x; out: y with dim i = x's dim perm[i]; element by element, any dtype */
ge2_status ge2_cpu_permute(const ge2_launch *l)
{
    const char *x = l->in[0].data;
    char *y = l->out[0].data;
    const ge2_shape xs = l->in[0].shape, ys = l->out[0].shape;
    const int n = xs.ndim, *perm = GE2_ATTRS(ge2_permute_attrs, l->node->attrs)->perm;
    const size_t es = ge2_dtype_size(l->in[0].dtype);
    int64_t xstride[GE2_MAX_DIMS], idx[GE2_MAX_DIMS] = {0}, s = 1;
    for (int i = n - 1; i >= 0; s *= xs.dim[i], i--)
        xstride[i] = s;
    const int64_t total = ge2_shape_numel(ys);
    for (int64_t e = 0; y && e < total; e++) {
        int64_t at = 0;
        for (int i = 0; i < n; i++)
            at += idx[i] * xstride[perm[i]];
        memcpy(y + (size_t)e * es, x + (size_t)at * es, es);
        for (int i = n - 1; i >= 0 && ++idx[i] == ys.dim[i]; i--)
            idx[i] = 0; /* the next index of y, row-major */
    }
    return GE2_OK;
}

/* in: xs[0..n) equal off axis; out: y [.., sum of axis dims, ..] */
ge2_status ge2_cpu_concat(const ge2_launch *l)
{
    char *y = l->out[0].data;
    if (!y)
        return GE2_OK;
    int axis = GE2_ATTRS(ge2_concat_attrs, l->node->attrs)->axis;
    int64_t outer, total, inner;
    ge2_cpu_split_axis(l->out[0].shape, axis, &outer, &total, &inner);
    size_t es = ge2_dtype_size(l->out[0].dtype), row = (size_t)(total * inner) * es, at = 0;
    for (int i = 0; i < l->n_in; i++) {
        size_t chunk = (size_t)(l->in[i].shape.dim[axis] * inner) * es;
        for (int64_t o = 0; o < outer; o++)
            memcpy(y + (size_t)o * row + at, (const char *)l->in[i].data + (size_t)o * chunk, chunk);
        at += chunk;
    }
    return GE2_OK;
}

/* Copies the window [start, end) of `axis` between whole (shape ws) and
 * window: to_window picks the direction. */
static void copy_window(const ge2_launch *l, ge2_shape ws, char *whole, char *window, bool to_window)
{
    const ge2_slice_attrs *a = GE2_ATTRS(ge2_slice_attrs, l->node->attrs);
    int64_t outer, len, inner;
    ge2_cpu_split_axis(ws, a->axis, &outer, &len, &inner);
    size_t es = ge2_dtype_size(l->in[0].dtype), row = (size_t)(len * inner) * es;
    size_t chunk = (size_t)((a->end - a->start) * inner) * es, skip = (size_t)(a->start * inner) * es;
    for (int64_t o = 0; o < outer; o++) {
        char *w = whole + (size_t)o * row + skip, *s = window + (size_t)o * chunk;
        memcpy(to_window ? s : w, to_window ? w : s, chunk);
    }
}

/* in: x; out: y [x with axis cut to end - start] */
ge2_status ge2_cpu_slice(const ge2_launch *l)
{
    if (l->out[0].data)
        copy_window(l, l->in[0].shape, l->in[0].data, l->out[0].data, true);
    return GE2_OK;
}

/* in: dy [window], like (shape only); out: dx [like's shape], zero outside the window */
ge2_status ge2_cpu_slice_backward(const ge2_launch *l)
{
    if (!l->out[0].data)
        return GE2_OK;
    memset(l->out[0].data, 0, view_bytes(&l->out[0]));
    copy_window(l, l->out[0].shape, l->out[0].data, l->in[0].data, false);
    return GE2_OK;
}
