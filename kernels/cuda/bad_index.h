/* Device side of the count of out-of-range labels and token ids
 * (graph/control.h): a kernel cannot fail a step, so the first thread to see
 * such a value in a launch's row counts it and, if it is the program's first,
 * records where it was. CUDA C++ only. */
#ifndef GE2_KERNELS_CUDA_BAD_INDEX_H
#define GE2_KERNELS_CUDA_BAD_INDEX_H

#ifndef __CUDACC__
#error "kernels/cuda/bad_index.h is device code for .cu files"
#endif

#include "graph/control.h"

/* Whether index is in [0, bound); if not, counts it in ctl->bad_index and,
 * if it is the first ever counted, records it. Call from one thread per
 * value read (a warp's lane 0 for a row). */
__device__ __forceinline__ bool ge2_index_ok(ge2_control *ctl, int node, ge2_bad_index_kind kind, long long position,
                                             int index, long long bound)
{
    if (index >= 0 && index < bound)
        return true;
    ge2_bad_index *b = &ctl->bad_index;
    if (atomicAdd((unsigned long long *)&b->count, 1ull) == 0) {
        b->position = position;
        b->bound = bound;
        b->node = node;
        b->kind = kind;
        b->value = index;
    }
    return false;
}

#endif /* GE2_KERNELS_CUDA_BAD_INDEX_H */
