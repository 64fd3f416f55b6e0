/* The naive reference executor: every tensor in its own buffer, nodes in
 * creation order, the CPU kernels. It plans nothing and shares nothing, so a
 * planned program (arena offsets, in-place reuse, graph keys) must give
 * bitwise the same values; and it runs ge2_check_gradients (gradients.c). */
#ifndef GE2_CHECK_NAIVE_H
#define GE2_CHECK_NAIVE_H

#include "graph/control.h"
#include "graph/ir.h"

typedef struct ge2_naive {
    const ge2_graph *graph;
    int n_tensors;
    ge2_shape *shape; /* [n_tensors] concrete shapes for the given feeds */
    void **data;      /* [n_tensors] one buffer each (zero-filled at creation) */
    ge2_control control;
    /* what the forward's mode-dependent ops see (launch.training): TRAIN
     * unless a caller sets it, so a gradient check differentiates the
     * training forward */
    ge2_mode mode;
} ge2_naive;

/* Allocates every buffer, fills parameters and persistent buffers (ge2_init_fill) and constants, and
 * copies the feeds (a feed's shape may change dim 0; ndim 0 means "as built"). */
ge2_status ge2_naive_new(const ge2_graph *g, const ge2_feed *feeds, int n_feeds, ge2_naive **out);
/* Runs the forward nodes, and the backward ones too when backward is set
 * (never the optimizer), in creation order. May be called again, e.g. after
 * perturbing a parameter's buffer for finite differences. */
ge2_status ge2_naive_exec(ge2_naive *n, bool backward);
void ge2_naive_free(ge2_naive *n);

/* ge2_naive_new + ge2_naive_exec(forward and backward). */
ge2_status ge2_naive_run(const ge2_graph *g, const ge2_feed *feeds, int n_feeds, ge2_naive **out);

static inline void *ge2_naive_data(const ge2_naive *n, const ge2_tensor *t) { return n->data[t->id]; }

#endif /* GE2_CHECK_NAIVE_H */
