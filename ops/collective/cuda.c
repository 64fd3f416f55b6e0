/* The all-reduce on the CUDA backend: the group's device sum (NCCL),
 * enqueued on the step's stream, so the step's capture records it and every
 * replay runs it. No kernel of ge2's own: plain C. */
#include "ops/collective/collective.h"

#include <stdio.h>

/* No process group: nothing to sum. A group of one rank still goes
 * through NCCL, so a one-GPU run tests the captured collective. */
static bool alone(const ge2_launch *l)
{
    return !l->collective;
}

ge2_status ge2_cuda_all_reduce_prepare(ge2_launch *l)
{
    const ge2_collective *c = l->collective;
    if (alone(l) || !c->prepare_device)
        return GE2_OK;
    return c->prepare_device(c);
}

ge2_status ge2_cuda_all_reduce_launch(const ge2_launch *l)
{
    if (alone(l))
        return GE2_OK;
    float *data[GE2_MAX_INPUTS];
    int64_t n[GE2_MAX_INPUTS];
    int spans = ge2_all_reduce_spans(l, data, n);
    ge2_status st = spans ? l->collective->sum_device(l->collective, data, n, spans, l->stream) : GE2_OK;
    if (st != GE2_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", ge2_last_error());
        return ge2_error(st, "%s (ge2_all_reduce, node %d, %d gradient(s) in %d span(s))", msg,
                         ge2_node_id(l->node), l->n_in, spans);
    }
    return GE2_OK;
}

void ge2_cuda_all_reduce_release(ge2_launch *l)
{
    (void)l; /* the communicator outlives the keys: it is the group's */
}

const char *ge2_cuda_all_reduce_describe(const ge2_launch *l)
{
    return alone(l) ? "all_reduce: no process group, nothing to do" : "all_reduce: the group's device sum (NCCL)";
}
