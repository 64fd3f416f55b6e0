/* The kernels of a device loop between a key's steps (graph/step_loop.h):
 * the gather that writes a step's batch into its feeds, and the advance
 * that sums its results, moves the position and decides whether the
 * loop's WHILE node runs again. Enqueued on the stream the CUDA backend
 * captures the loop's body from. */
#ifndef GE2_KERNELS_CUDA_STEP_LOOP_H
#define GE2_KERNELS_CUDA_STEP_LOOP_H

#include "ge2/ge2.h"
#include "graph/step_loop.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The batch at loop->counters' position into every field's feed. */
ge2_status ge2_cuda_loop_gather(const ge2_step_loop *loop, void *stream);

/* After the step: its results into the sums, the position one batch on,
 * `remaining` one less, and the WHILE node's condition (`handle`, a
 * cudaGraphConditionalHandle) set to whether any step remains; after a
 * step that read an out-of-range label or id only `failed` and the
 * condition, 0. */
ge2_status ge2_cuda_loop_advance(const ge2_step_loop *loop, unsigned long long handle, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* GE2_KERNELS_CUDA_STEP_LOOP_H */
