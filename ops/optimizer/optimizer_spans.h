/* What one OPTIMIZER_UPDATE node sweeps, as spans of the flat pools.
 *
 * A flat update (no inputs) is one span: all n elements of params, grads and
 * every state slot. A per-parameter update names (parameter, gradient)
 * pairs as inputs: each is one span, its parameter at its place in the
 * parameter pool, its state slots at the same place in each slot of the
 * state pool (the layout checkpoints read), its gradient wherever the plan
 * put it (the arena). Either way slot k of a span starts at
 * span.state + k * stride, so the CPU and CUDA kernels sweep both kinds with
 * the same loop. Host code (C and the CUDA launchers), one implementation.
 */
#ifndef GE2_OPS_OPTIMIZER_OPTIMIZER_SPANS_H
#define GE2_OPS_OPTIMIZER_OPTIMIZER_SPANS_H

#include <stdint.h>

#include "graph/error.h"
#include "graph/control.h"
#include "graph/ir.h"
#include "optim/optimizer_math.h"


typedef struct ge2_opt_span {
    int64_t n;
    int64_t decay_n;    /* elements [0, decay_n) take weight decay, the rest none (ge2_flat_pools.no_decay_n) */
    float *params;      /* [n] */
    const float *grads; /* [n] */
    float *state;       /* [slots] x [n], slot k at state + k * stride; NULL without slots */
    uint16_t *copies;   /* [n] the parameters' bf16 copies, written with them (ge2_flat_pools.copies); NULL: none */
} ge2_opt_span;

typedef struct ge2_opt_spans {
    ge2_opt_span span[GE2_OPT_MAX_SPANS];
    int count;
    int64_t stride; /* elements between state slots: the pools' n */
    int64_t total;  /* sum of span[].n */
} ge2_opt_spans;

/* The launch's spans, after checking the pools hold what the config needs;
 * messages name the op (and the parameter). */
static inline ge2_status ge2_opt_spans_of(const ge2_launch *l, ge2_opt_spans *out)
{
    const char *op = ge2_op_name(l->node->op);
    const ge2_flat_pools *p = &l->pools;
    ge2_opt_slots slots = ge2_opt_slots_of(&GE2_ATTRS(ge2_optim_attrs, l->node->attrs)->config);
    if (slots.count > GE2_OPT_MAX_SLOTS || p->slots < slots.count)
        return ge2_error(GE2_ERR_STATE, "ge2_%s: the optimizer needs %d state slots, the pool has %d", op,
                         slots.count, p->slots);
    if (p->n > 0 && (!p->params || (slots.count > 0 && !p->state)))
        return ge2_error(GE2_ERR_STATE, "ge2_%s: flat pools are not allocated", op);
    out->count = 0;
    out->stride = p->n;
    out->total = 0;
    if (l->n_in == 0) {
        if (p->n > 0 && !p->grads)
            return ge2_error(GE2_ERR_STATE, "ge2_%s: the flat update needs the gradient pool, which is not allocated",
                             op);
        if (p->no_decay_n < 0 || p->no_decay_n > p->n)
            return ge2_error(GE2_ERR_STATE, "ge2_%s: %lld elements without weight decay in a pool of %lld", op,
                             (long long)p->no_decay_n, (long long)p->n);
        ge2_opt_span all = {p->n, p->n - p->no_decay_n, p->params, p->grads, p->state, p->copies};
        out->span[0] = all;
        out->count = 1;
        out->total = p->n;
        return GE2_OK;
    }
    if (l->n_in % 2 || l->n_in / 2 > GE2_OPT_MAX_SPANS)
        return ge2_error(GE2_ERR_STATE, "ge2_%s: takes up to %d (parameter, gradient) pairs, got %d inputs", op,
                         GE2_OPT_MAX_SPANS, l->n_in);
    for (int i = 0; i < l->n_in; i += 2) {
        const ge2_view *param = &l->in[i], *grad = &l->in[i + 1];
        int64_t n = ge2_shape_numel(param->shape);
        /* where the parameter sits in its pool says where its state sits */
        int64_t at = param->data && p->params ? (float *)param->data - p->params : -1;
        if (at < 0 || n != ge2_shape_numel(grad->shape) || at + n > p->n || !grad->data)
            return ge2_error(GE2_ERR_STATE,
                             "ge2_%s: input %d (%lld elements) is not a parameter of the %lld-element pool with its "
                             "gradient (%lld elements)",
                             op, i, (long long)n, (long long)p->n, (long long)ge2_shape_numel(grad->shape));
        /* the pool's boundary lies between parameters: a parameter decays whole or not at all */
        ge2_opt_span one = {n, at < p->n - p->no_decay_n ? n : 0, p->params + at, (const float *)grad->data,
                            p->state ? p->state + at : NULL, p->copies ? p->copies + at : NULL};
        out->span[out->count++] = one;
        out->total += n;
    }
    return GE2_OK;
}

#endif /* GE2_OPS_OPTIMIZER_OPTIMIZER_SPANS_H */
