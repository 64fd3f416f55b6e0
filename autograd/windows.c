/* Gradients that arrive as windows of their tensor (autograd.h): held
 * back, then emitted as one CONCAT when they tile the axis, else as a
 * SLICE_BACKWARD each. */
#include <string.h>

#include "autograd/autograd.h"
#include "graph/alloc.h"
#include "ops/ops.h" /* CONCAT, SLICE_BACKWARD */

typedef struct ge2_ag_window {
    int x, dy; /* tensor ids: whose gradient, and the window's values */
    ge2_slice_attrs at;
} ge2_ag_window;

ge2_status ge2_ag_accumulate_window(ge2_autograd *ag, int x, int dy, const ge2_slice_attrs *window)
{
    if (!ge2_ag_wants(ag, x))
        return GE2_OK;
    if (!ge2_reserve((void **)&ag->windows, &ag->cap_windows, ag->n_windows, sizeof *ag->windows, 16))
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_backward: out of memory holding %d gradient windows",
                         ag->n_windows + 1);
    ag->windows[ag->n_windows++] = (ge2_ag_window){x, dy, *window};
    return GE2_OK;
}

/* Do windows w[0..k) (sorted by start) cover x's axis exactly, without overlap? */
static bool tiles(const ge2_graph *g, const ge2_ag_window *w, int k)
{
    if (k < 2 || k > GE2_MAX_INPUTS || w[0].at.start != 0)
        return false;
    for (int i = 1; i < k; i++)
        if (w[i].at.axis != w[0].at.axis || w[i].at.start != w[i - 1].at.end)
            return false;
    return w[k - 1].at.end == g->tensors[w[0].x]->shape.dim[w[0].at.axis];
}

/* x's windows as one CONCAT when they tile its axis (w: x's k windows in the order they came) */
static ge2_status concat_if_tiling(ge2_autograd *ag, int x, const ge2_ag_window *w, int k, bool *done)
{
    *done = false;
    if (k < 2 || k > GE2_MAX_INPUTS)
        return GE2_OK;
    ge2_ag_window sorted[GE2_MAX_INPUTS];
    memcpy(sorted, w, (size_t)k * sizeof *w);
    for (int i = 1; i < k; i++) /* insertion sort by start: k is small */
        for (int j = i; j > 0 && sorted[j].at.start < sorted[j - 1].at.start; j--) {
            ge2_ag_window t = sorted[j];
            sorted[j] = sorted[j - 1];
            sorted[j - 1] = t;
        }
    if (!tiles(ag->graph, sorted, k))
        return GE2_OK;
    int in[GE2_MAX_INPUTS], g;
    for (int i = 0; i < k; i++)
        in[i] = sorted[i].dy;
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    a.concat.axis = sorted[0].at.axis;
    GE2_TRY(ge2_ag_emit(ag, GE2_OP_CONCAT, in, k, &a, &g));
    *done = true;
    return ge2_ag_accumulate(ag, x, g);
}

ge2_status ge2_ag_settle(ge2_autograd *ag, int x)
{
    int k = 0;
    for (int i = 0; i < ag->n_windows; i++)
        k += ag->windows[i].x == x;
    if (k == 0)
        return GE2_OK;
    /* Take x's windows out first, in the order they came. */
    ge2_ag_window *mine = ge2_malloc((size_t)k * sizeof *mine);
    if (!mine)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_backward: out of memory settling %d gradient windows", k);
    int n_rest = 0, n_mine = 0;
    for (int i = 0; i < ag->n_windows; i++) {
        if (ag->windows[i].x == x)
            mine[n_mine++] = ag->windows[i];
        else
            ag->windows[n_rest++] = ag->windows[i];
    }
    ag->n_windows = n_rest;
    bool done;
    ge2_status st = concat_if_tiling(ag, x, mine, k, &done);
    for (int i = 0; st == GE2_OK && !done && i < k; i++) {
        ge2_attrs a;
        memset(&a, 0, sizeof a);
        a.slice = mine[i].at;
        int in[2] = {mine[i].dy, x}, g;
        st = ge2_ag_emit(ag, GE2_OP_SLICE_BACKWARD, in, 2, &a, &g);
        if (st == GE2_OK)
            st = ge2_ag_accumulate(ag, x, g);
    }
    ge2_free(mine);
    return st;
}
