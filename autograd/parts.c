/* Gradient parts (autograd.h): held back per tensor, then merged by kind
 * when the tensor's gradient is read. */
#include <string.h>

#include "autograd/autograd.h"
#include "graph/alloc.h"

ge2_status ge2_ag_accumulate_part(ge2_autograd *ag, int x, int dy, const ge2_attrs *attrs, ge2_ag_merge_fn merge)
{
    if (!ge2_ag_wants(ag, x))
        return GE2_OK;
    if (!ge2_reserve((void **)&ag->parts, &ag->cap_parts, ag->n_parts, sizeof *ag->parts, 16))
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_backward: out of memory holding %d gradient parts",
                         ag->n_parts + 1);
    ge2_ag_part *p = &ag->parts[ag->n_parts++];
    memset(p, 0, sizeof *p);
    p->x = x;
    p->dy = dy;
    p->attrs = *attrs;
    p->merge = merge;
    return GE2_OK;
}

ge2_status ge2_ag_settle(ge2_autograd *ag, int x)
{
    int k = 0;
    for (int i = 0; i < ag->n_parts; i++)
        k += ag->parts[i].x == x;
    if (k == 0)
        return GE2_OK;
    /* Take x's parts out first, in the order they came: merging accumulates
     * into x's gradient and must not meet them again. */
    ge2_ag_part *mine = ge2_malloc((size_t)k * sizeof *mine), *group = ge2_malloc((size_t)k * sizeof *group);
    if (!mine || !group) {
        ge2_free(mine);
        ge2_free(group);
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_backward: out of memory merging %d gradient parts", k);
    }
    int n_rest = 0, n_mine = 0;
    for (int i = 0; i < ag->n_parts; i++) {
        if (ag->parts[i].x == x)
            mine[n_mine++] = ag->parts[i];
        else
            ag->parts[n_rest++] = ag->parts[i];
    }
    ag->n_parts = n_rest;
    /* One merge per kind, kinds in the order their first part came. */
    ge2_status st = GE2_OK;
    for (int i = 0; i < k && st == GE2_OK; i++) {
        if (!mine[i].merge)
            continue; /* merged with an earlier part of its kind */
        ge2_ag_merge_fn merge = mine[i].merge;
        int n = 0;
        for (int j = i; j < k; j++)
            if (mine[j].merge == merge) {
                group[n++] = mine[j];
                mine[j].merge = NULL;
            }
        st = merge(ag, x, group, n);
    }
    ge2_free(mine);
    ge2_free(group);
    return st;
}
