/* A kernel that keeps the stream busy for a while, so that what the host
 * enqueues behind it runs back to back once it ends: timing launches with
 * events then measures the GPU, not how fast the host enqueued them. */
#ifndef GE2_KERNELS_CUDA_HOLD_H
#define GE2_KERNELS_CUDA_HOLD_H

#include "ge2/ge2.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Enqueues on stream (a cudaStream_t) one thread that spins for
 * `microseconds` by the GPU's global timer. */
ge2_status ge2_cuda_hold(void *stream, unsigned microseconds);

#ifdef __cplusplus
}
#endif

#endif /* GE2_KERNELS_CUDA_HOLD_H */
