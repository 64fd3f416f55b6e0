/* GRAD_NORM and OPTIMIZER_UPDATE on the CPU: one loop each over the flat
 * pools, following kernels/optimizer_math.h's control-block protocol exactly
 * as the CUDA kernels do (same per-element functions, same commit), so the
 * two backends differ only in reduction order. */
#include <math.h>

#include "graph/error.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/optimizer_math.h"

/* The config's slots, checked against what the program allocated. */
static ge2_status opt_slots(const ge2_launch *l, ge2_opt_slots *slots)
{
    *slots = ge2_opt_slots_of(&l->node->attrs.optim.config);
    if (l->pools.slots < slots->count || (l->pools.n > 0 && (!l->pools.params || !l->pools.grads)) ||
        (slots->count > 0 && l->pools.n > 0 && !l->pools.state) || !l->control)
        return ge2_error(GE2_ERR_STATE, "ge2_%s: the program gave %d optimizer state slots, the config needs %d",
                         ge2_op_info_of(l->node->op)->name, l->pools.slots, slots->count);
    return GE2_OK;
}

ge2_status ge2_cpu_grad_norm(const ge2_launch *l)
{
    const ge2_optimizer_config *cfg = &l->node->attrs.optim.config;
    ge2_opt_slots slots;
    GE2_TRY(opt_slots(l, &slots));
    ge2_control *ctl = l->control;
    if (!ge2_opt_is_update_step(cfg, ctl))
        return GE2_OK;
    const int64_t n = l->pools.n;
    const float *grads = l->pools.grads;                                              /* [n] */
    const float *accum = slots.accum >= 0 ? l->pools.state + slots.accum * n : NULL; /* [n] */
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double e = ge2_opt_effective_grad(cfg, grads[i], accum ? accum[i] : 0.0f);
        sum += e * e;
    }
    ctl->grad_norm = (float)sqrt(sum);
    ctl->clip_factor = ge2_clip_factor(cfg->clip_norm, ctl->grad_norm);
    return GE2_OK;
}

ge2_status ge2_cpu_optimizer_update(const ge2_launch *l)
{
    const ge2_optimizer_config *cfg = &l->node->attrs.optim.config;
    ge2_opt_slots slots;
    GE2_TRY(opt_slots(l, &slots));
    ge2_control *ctl = l->control;
    const bool update = ge2_opt_is_update_step(cfg, ctl);
    const ge2_opt_scalars s = ge2_opt_scalars_of(cfg, ctl);
    const int64_t n = l->pools.n;
    float *params = l->pools.params;      /* [n] */
    const float *grads = l->pools.grads;  /* [n] */
    float *state = l->pools.state;        /* [slots, n] */
    for (int64_t i = 0; i < n; i++)
        ge2_opt_step_element(cfg, &slots, &s, update, params + i, grads[i], state ? state + i : NULL, n);
    ge2_opt_commit(ctl, update, &s);
    return GE2_OK;
}
