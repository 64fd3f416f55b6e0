/* Shared by the CPU kernel files: type dispatch and broadcast indexing. */
#ifndef GE2_KERNELS_CPU_CPU_UTIL_H
#define GE2_KERNELS_CPU_CPU_UTIL_H

#include "graph/error.h"
#include "kernels/broadcast.h"
#include "graph/ir.h"

/* Each kernel body is written once as a macro over (T, SUF) and expanded for
 * float and double; this picks the expansion by the first input's dtype. */
#define GE2_CPU_DEFINE_BOTH(DEF) DEF(float, f32) DEF(double, f64)
#define GE2_CPU_DISPATCH(fn, l, dtype) \
    ((dtype) == GE2_F64 ? fn##_f64(l) : (dtype) == GE2_F32 ? fn##_f32(l) : ge2_cpu_bad_dtype(l, dtype))

static inline ge2_status ge2_cpu_bad_dtype(const ge2_launch *l, ge2_dtype dtype)
{
    return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_%s: the CPU kernel has no %s version",
                     ge2_op_name(l->node->op), ge2_dtype_name(dtype));
}

/* Walks the 4-D index space of an output in row-major order, keeping the
 * offsets of up to two broadcast operands (strides from
 * ge2_bcast_strides) in step: O(1) amortized per element, no division. */
typedef struct ge2_cpu_odometer {
    int64_t dim[GE2_MAX_DIMS];
    int64_t stride[2][GE2_MAX_DIMS];
    int64_t idx[GE2_MAX_DIMS];
    int64_t off[2];
} ge2_cpu_odometer;

static inline void ge2_cpu_odometer_init(ge2_cpu_odometer *o, ge2_shape out, ge2_shape a, ge2_shape b)
{
    ge2_bcast_dims(out, o->dim);
    ge2_bcast_strides(a, out, o->stride[0]);
    ge2_bcast_strides(b, out, o->stride[1]);
    for (int k = 0; k < 4; k++)
        o->idx[k] = 0;
    o->off[0] = o->off[1] = 0;
}

static inline void ge2_cpu_odometer_next(ge2_cpu_odometer *o)
{
    for (int k = 3; k >= 0; k--) {
        o->off[0] += o->stride[0][k];
        o->off[1] += o->stride[1][k];
        if (++o->idx[k] < o->dim[k])
            return;
        o->off[0] -= o->stride[0][k] * o->dim[k];
        o->off[1] -= o->stride[1][k] * o->dim[k];
        o->idx[k] = 0;
    }
}

/* Splits a shape around `axis` into outer x len x inner. */
static inline void ge2_cpu_split_axis(ge2_shape s, int axis, int64_t *outer, int64_t *len, int64_t *inner)
{
    *outer = 1, *inner = 1;
    for (int i = 0; i < axis; i++)
        *outer *= s.dim[i];
    *len = s.dim[axis];
    for (int i = axis + 1; i < s.ndim; i++)
        *inner *= s.dim[i];
}

#endif /* GE2_KERNELS_CPU_CPU_UTIL_H */
