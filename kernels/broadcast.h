/* Right-aligned (numpy) broadcast indexing, host side: a shape padded to
 * GE2_MAX_DIMS dims with leading 1s, and an operand's element strides over
 * an output's index space. The CPU kernels and the CUDA launchers both build
 * their index arrays here; device code only reads the arrays. */
#ifndef GE2_KERNELS_BROADCAST_H
#define GE2_KERNELS_BROADCAST_H

#include <stdint.h>

#include "ge2/ge2.h"

/* s right-aligned into GE2_MAX_DIMS dims (missing leading dims are 1). */
static inline void ge2_bcast_dims(ge2_shape s, int64_t dim[GE2_MAX_DIMS])
{
    for (int d = 0; d < GE2_MAX_DIMS; d++) {
        int j = d - (GE2_MAX_DIMS - s.ndim);
        dim[d] = j >= 0 ? s.dim[j] : 1;
    }
}

/* Element strides of contiguous `in` over the index space of `out`: 0 along
 * the dims `in` broadcasts (shape inference has checked every dim is equal
 * or 1). With out == in, in's own row-major strides. */
static inline void ge2_bcast_strides(ge2_shape in, ge2_shape out, int64_t stride[GE2_MAX_DIMS])
{
    int64_t din[GE2_MAX_DIMS], dout[GE2_MAX_DIMS], s = 1;
    ge2_bcast_dims(in, din);
    ge2_bcast_dims(out, dout);
    for (int d = GE2_MAX_DIMS - 1; d >= 0; d--) {
        stride[d] = din[d] == dout[d] ? s : 0;
        s *= din[d];
    }
}

#endif /* GE2_KERNELS_BROADCAST_H */
