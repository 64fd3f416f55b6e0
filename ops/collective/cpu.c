/* The all-reduce on the CPU backend: the group's host sum (MPI). */
#include "ops/collective/collective.h"

ge2_status ge2_cpu_all_reduce(const ge2_launch *l)
{
    const ge2_collective *c = l->collective;
    if (!c) /* one process: nothing to sum (a group of one still calls it) */
        return GE2_OK;
    float *data[GE2_MAX_INPUTS];
    int64_t n[GE2_MAX_INPUTS];
    int spans = ge2_all_reduce_spans(l, data, n);
    return spans ? c->sum_host(c, data, n, spans) : GE2_OK;
}
