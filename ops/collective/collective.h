/* The data-parallel all-reduce, which ge2_optimizer emits when its config
 * has data_parallel: ALL_REDUCE sums its inputs (parameter gradients, one
 * bucket of layers) over the ranks of the program's process group
 * (ge2_launch.collective) in place, and makes no outputs. The update that
 * follows divides by the ranks (optim/optimizer_math.h,
 * ge2_opt_rank_average). Without a group it does nothing; a group of one
 * rank still calls it (so one GPU tests the captured collective).
 *
 * The kernels only call the group: the CPU kernel its sum_host (MPI, in
 * ge2's dist/), the CUDA kernel its sum_device (NCCL, enqueued on the step's
 * stream and captured with it). Gradients next to each other in memory (a
 * bucket's in the gradient pool) go as one span.
 *
 * ops.c holds the definition (registered by ops/builtin.def's line);
 * infer.c, spans.c, cpu.c, cuda.c and test.c are its parts. */
#ifndef GE2_OPS_COLLECTIVE_COLLECTIVE_H
#define GE2_OPS_COLLECTIVE_COLLECTIVE_H

#include "graph/op_support.h"
#include "ops/ops.h"

/* infer.c */
ge2_status ge2_infer_ALL_REDUCE(const ge2_node *node, const ge2_desc *in, ge2_desc *out);

/* spans.c: the launch's inputs as spans by address, neighbours in memory merged;
 * returns how many (<= GE2_MAX_INPUTS). */
int ge2_all_reduce_spans(const ge2_launch *l, float **data, int64_t *n);

/* cpu.c */
ge2_status ge2_cpu_all_reduce(const ge2_launch *l);

/* cuda.c: prepare makes the group's device communicator (before capture)
 * unless it exists; launch enqueues the sums on launch->stream; release
 * frees nothing, as the communicator is the group's (ge2_dist_free ends it) */
ge2_status ge2_cuda_all_reduce_prepare(ge2_launch *l);
ge2_status ge2_cuda_all_reduce_launch(const ge2_launch *l);
void ge2_cuda_all_reduce_release(ge2_launch *l);
const char *ge2_cuda_all_reduce_describe(const ge2_launch *l);

/* ops.c */
extern const ge2_op_def ge2_op_def_all_reduce;

#endif /* GE2_OPS_COLLECTIVE_COLLECTIVE_H */
