/* GRAD_NORM and OPTIMIZER_UPDATE on the CPU: one loop each, GRAD_NORM over
 * the flat pools, OPTIMIZER_UPDATE over its spans (ops/optimizer/optimizer_spans.h:
 * the flat pools, or its parameters), following optim/optimizer_math.h's
 * control-block protocol exactly as the CUDA kernels do (same per-element
 * functions, same commit), so the two backends differ only in reduction
 * order, and a per-parameter update is bitwise the flat one. */
#include <math.h>

#include "graph/bf16.h"
#include "graph/error.h"
#include "ops/optimizer/optimizer.h"
#include "optim/optimizer_math.h"
#include "ops/optimizer/optimizer_spans.h"

static ge2_status require_control(const ge2_launch *l)
{
    if (l->control)
        return GE2_OK;
    return ge2_error(GE2_ERR_STATE, "ge2_%s: needs the control block", ge2_op_name(l->node->op));
}

ge2_status ge2_cpu_grad_norm(const ge2_launch *l)
{
    GE2_TRY(require_control(l));
    ge2_opt_spans spans;
    GE2_TRY(ge2_opt_spans_of(l, &spans)); /* no inputs: the whole pools */
    const ge2_optimizer_config *cfg = &GE2_ATTRS(ge2_optim_attrs, l->node->attrs)->config;
    ge2_control *ctl = l->control;
    if (!ge2_opt_is_update_step(cfg, ctl))
        return GE2_OK;
    const ge2_opt_span *all = &spans.span[0];
    int accum_slot = ge2_opt_slots_of(cfg).accum;
    const float *accum = accum_slot >= 0 ? all->state + accum_slot * spans.stride : NULL; /* [n] */
    const float unscale = ge2_opt_unscale(cfg, ctl);
    double sum = 0.0;
    for (int64_t i = 0; i < all->n; i++) {
        double e = ge2_opt_effective_grad(cfg, all->grads[i], accum ? accum[i] : 0.0f) * unscale;
        sum += e * e;
    }
    ctl->grad_norm = (float)(sqrt(sum) * ge2_opt_rank_average(ctl));
    ctl->clip_factor = ge2_clip_factor(cfg->clip_norm, ctl->grad_norm);
    if (cfg->loss_scaling.dynamic) /* in float, as CUDA sums: a norm past a float's range counts too */
        ctl->found_inf = !isfinite((float)sum);
    return GE2_OK;
}

/* One loop per kind, so the per-element branches on the config are gone
 * from the hot loop; the element math is optimizer_math.h's. */
static void update_range(const ge2_optimizer_config *cfg, const ge2_opt_slots *slots, const ge2_opt_span *span,
                         int64_t stride, const ge2_opt_scalars *scalars)
{
    /* a local copy: the compiler can keep it in registers, as writes through
     * the float pools cannot alias it */
    const ge2_opt_scalars sc = *scalars, *s = &sc;
    const int64_t n = span->n;
    float *params = span->params;      /* [n] */
    const float *grads = span->grads;  /* [n] */
    float *slot0 = span->state;
    float *accum = slots->accum >= 0 ? slot0 + slots->accum * stride : NULL; /* [n] */
    if (cfg->kind == GE2_OPT_SGD) {
        float *buf = slots->momentum >= 0 ? slot0 + slots->momentum * stride : NULL; /* [n] */
        const bool nesterov = cfg->nesterov;
        for (int64_t i = 0; i < n; i++) {
            float g = ge2_opt_take_accum(grads[i], accum ? accum + i : NULL);
            ge2_opt_sgd_element(s, nesterov, params + i, g, buf ? buf + i : NULL);
        }
        return;
    }
    const bool decoupled = cfg->kind == GE2_OPT_ADAMW;
    float *m = slot0 + slots->exp_avg * stride;    /* [n] */
    float *v = slot0 + slots->exp_avg_sq * stride; /* [n] */
    float *vmax = slots->max_exp_avg_sq >= 0 ? slot0 + slots->max_exp_avg_sq * stride : NULL; /* [n] */
    for (int64_t i = 0; i < n; i++) {
        float g = ge2_opt_take_accum(grads[i], accum ? accum + i : NULL);
        ge2_opt_adam_element(s, decoupled, params + i, g, m + i, v + i, vmax ? vmax + i : NULL);
    }
}

/* A span's weight-decay group, then the rest without decay. */
static void update_span(const ge2_optimizer_config *cfg, const ge2_opt_slots *slots, const ge2_opt_span *span,
                        int64_t stride, const ge2_opt_scalars *s)
{
    ge2_opt_span decayed = *span, rest = *span;
    decayed.n = span->decay_n;
    update_range(cfg, slots, &decayed, stride, s);
    const int64_t d = span->decay_n;
    rest.n = span->n - d;
    rest.params += d;
    rest.grads += d;
    rest.state = rest.state ? rest.state + d : NULL;
    const ge2_opt_scalars nd = ge2_opt_scalars_no_decay(*s);
    update_range(cfg, slots, &rest, stride, &nd);
}

ge2_status ge2_cpu_optimizer_update(const ge2_launch *l)
{
    GE2_TRY(require_control(l));
    ge2_opt_spans spans;
    GE2_TRY(ge2_opt_spans_of(l, &spans));
    const ge2_optimizer_config *cfg = &GE2_ATTRS(ge2_optim_attrs, l->node->attrs)->config;
    const ge2_opt_slots slots = ge2_opt_slots_of(cfg);
    ge2_control *ctl = l->control;
    const bool update = ge2_opt_is_update_step(cfg, ctl), skipped = update && ge2_opt_skipped(cfg, ctl);
    const ge2_opt_scalars s = ge2_opt_scalars_of(cfg, ctl);
    for (int k = 0; k < spans.count; k++) {
        const ge2_opt_span *span = &spans.span[k];
        float *accum = slots.accum >= 0 ? span->state + slots.accum * spans.stride : NULL; /* [n] */
        if (skipped) { /* the step's gradients are dropped, the accumulated ones with them */
            for (int64_t i = 0; accum && i < span->n; i++)
                accum[i] = 0.0f;
        } else if (update) {
            update_span(cfg, &slots, span, spans.stride, &s);
            for (int64_t i = 0; span->copies && i < span->n; i++)
                span->copies[i] = ge2_bf16_from_f32(span->params[i]);
        } else { /* a micro-step implies the slot */
            for (int64_t i = 0; i < span->n; i++)
                accum[i] += span->grads[i];
        }
    }
    if (ge2_opt_node_done(ctl, GE2_ATTRS(ge2_optim_attrs, l->node->attrs)->update_nodes))
        ge2_opt_commit(ctl, cfg, update, &s);
    return GE2_OK;
}
