/* The all-reduce's inputs as spans of memory, for both backends. */
#include <stdint.h>

#include "ops/collective/collective.h"

/* By address, then each input joining the span before it when it starts
 * where that span ends: a bucket's gradients lie in the gradient pool in
 * parameter order (the reverse of the bucket's), mostly side by side, so
 * the group sums them in a call or two. The sum is elementwise, so the
 * spans' order does not matter. */
int ge2_all_reduce_spans(const ge2_launch *l, float **data, int64_t *n)
{
    int order[GE2_MAX_INPUTS], count = 0;
    for (int i = 0; i < l->n_in; i++) {
        if (!l->in[i].data || ge2_shape_numel(l->in[i].shape) == 0)
            continue;
        int at = count++;
        for (; at > 0 && (uintptr_t)l->in[order[at - 1]].data > (uintptr_t)l->in[i].data; at--)
            order[at] = order[at - 1];
        order[at] = i;
    }
    int spans = 0;
    for (int k = 0; k < count; k++) {
        float *p = l->in[order[k]].data;
        int64_t elements = ge2_shape_numel(l->in[order[k]].shape);
        if (spans > 0 && data[spans - 1] + n[spans - 1] == p) {
            n[spans - 1] += elements;
            continue;
        }
        data[spans] = p;
        n[spans] = elements;
        spans++;
    }
    return spans;
}
