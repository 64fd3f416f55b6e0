/* GRAD_NORM and OPTIMIZER_UPDATE on the CPU: one loop each over the flat
 * pools, following kernels/optimizer_math.h's control-block protocol exactly
 * as the CUDA kernels do (same per-element functions, same commit), so the
 * two backends differ only in reduction order. */
#include <math.h>

#include "graph/error.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/optimizer_math.h"

/* What both kernels start from: the config, its slots (checked against
 * what the program allocated) and the pools. */
typedef struct opt_launch {
    const ge2_optimizer_config *cfg;
    ge2_opt_slots slots;
    ge2_control *ctl;
    int64_t n;
    float *params;      /* [n] */
    const float *grads; /* [n] */
    float *state;       /* [slots, n] */
} opt_launch;

static ge2_status opt_begin(const ge2_launch *l, opt_launch *o)
{
    o->cfg = &l->node->attrs.optim.config;
    o->slots = ge2_opt_slots_of(o->cfg);
    o->ctl = l->control;
    o->n = l->pools.n;
    o->params = l->pools.params;
    o->grads = l->pools.grads;
    o->state = l->pools.state;
    if (l->pools.slots < o->slots.count || (o->n > 0 && (!o->params || !o->grads)) ||
        (o->slots.count > 0 && o->n > 0 && !o->state) || !o->ctl)
        return ge2_error(GE2_ERR_STATE, "ge2_%s: the program gave %d optimizer state slots, the config needs %d",
                         ge2_op_info_of(l->node->op)->name, l->pools.slots, o->slots.count);
    return GE2_OK;
}

ge2_status ge2_cpu_grad_norm(const ge2_launch *l)
{
    opt_launch o;
    GE2_TRY(opt_begin(l, &o));
    if (!ge2_opt_is_update_step(o.cfg, o.ctl))
        return GE2_OK;
    const float *accum = o.slots.accum >= 0 ? o.state + o.slots.accum * o.n : NULL; /* [n] */
    double sum = 0.0;
    for (int64_t i = 0; i < o.n; i++) {
        double e = ge2_opt_effective_grad(o.cfg, o.grads[i], accum ? accum[i] : 0.0f);
        sum += e * e;
    }
    o.ctl->grad_norm = (float)sqrt(sum);
    o.ctl->clip_factor = ge2_clip_factor(o.cfg->clip_norm, o.ctl->grad_norm);
    return GE2_OK;
}

/* One loop per kind, so the per-element branches on the config are gone
 * from the hot loop; the element math is optimizer_math.h's. */
static void opt_update(const opt_launch *o, const ge2_opt_scalars *scalars)
{
    /* a local copy: the compiler can keep it in registers, as writes through
     * the float pools cannot alias it */
    const ge2_opt_scalars sc = *scalars, *s = &sc;
    const int64_t n = o->n;
    float *slot0 = o->state;
    float *accum = o->slots.accum >= 0 ? slot0 + o->slots.accum * n : NULL; /* [n] */
    if (o->cfg->kind == GE2_OPT_SGD) {
        float *buf = o->slots.momentum >= 0 ? slot0 + o->slots.momentum * n : NULL; /* [n] */
        const bool nesterov = o->cfg->nesterov;
        for (int64_t i = 0; i < n; i++) {
            float g = ge2_opt_take_accum(o->grads[i], accum ? accum + i : NULL);
            ge2_opt_sgd_element(s, nesterov, o->params + i, g, buf ? buf + i : NULL);
        }
        return;
    }
    const bool decoupled = o->cfg->kind == GE2_OPT_ADAMW;
    float *m = slot0 + o->slots.exp_avg * n;    /* [n] */
    float *v = slot0 + o->slots.exp_avg_sq * n; /* [n] */
    float *vmax = o->slots.max_exp_avg_sq >= 0 ? slot0 + o->slots.max_exp_avg_sq * n : NULL; /* [n] */
    for (int64_t i = 0; i < n; i++) {
        float g = ge2_opt_take_accum(o->grads[i], accum ? accum + i : NULL);
        ge2_opt_adam_element(s, decoupled, o->params + i, g, m + i, v + i, vmax ? vmax + i : NULL);
    }
}

ge2_status ge2_cpu_optimizer_update(const ge2_launch *l)
{
    opt_launch o;
    GE2_TRY(opt_begin(l, &o));
    const bool update = ge2_opt_is_update_step(o.cfg, o.ctl);
    const ge2_opt_scalars s = ge2_opt_scalars_of(o.cfg, o.ctl);
    if (update) {
        opt_update(&o, &s);
    } else {
        float *accum = o.state + o.slots.accum * o.n; /* [n]: a micro-step implies the slot */
        for (int64_t i = 0; i < o.n; i++)
            accum[i] += o.grads[i];
    }
    ge2_opt_commit(o.ctl, update, &s);
    return GE2_OK;
}
