/* The all-reduce's inputs as spans of memory, for both backends. */
#include "ops/collective/collective.h"

/* In input order, each input joining the span before it when it starts
 * where that span ends: a bucket's gradients are neighbours in the
 * gradient pool, so the group sums them in one call. */
int ge2_all_reduce_spans(const ge2_launch *l, float **data, int64_t *n)
{
    int spans = 0;
    for (int i = 0; i < l->n_in; i++) {
        float *p = l->in[i].data;
        int64_t count = ge2_shape_numel(l->in[i].shape);
        if (!p || count == 0)
            continue;
        if (spans > 0 && data[spans - 1] + n[spans - 1] == p) {
            n[spans - 1] += count;
            continue;
        }
        data[spans] = p;
        n[spans] = count;
        spans++;
    }
    return spans;
}
