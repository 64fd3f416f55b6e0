/* The optimizer update math: the one place torch.optim's formulas live.
 *
 * Static inline and free of host-only calls, so the CPU kernel
 * (ops/optimizer/cpu.c) and the CUDA kernel (ops/optimizer/cuda.cu) compile the
 * same lines; a difference between backends is then a reduction-order
 * difference, never a formula difference.
 *
 * Control-block protocol (graph/control.h). One training step runs GRAD_NORM
 * (only when clip_norm > 0 or under dynamic loss scaling) then
 * OPTIMIZER_UPDATE over the flat pools; or, with per-parameter updates (no
 * clipping, no loss scaling, no accumulation), one
 * OPTIMIZER_UPDATE per layer, each right after that layer's gradients (every
 * one an "update node" below; ge2_optim_attrs.update_nodes counts them). The host writes only
 * control->base_lr (ge2_set_lr), between steps. Everything else is derived on
 * the device from the control block as it was when the step began:
 *
 *   1. micro = control->micro_step + 1 (1-based micro-batch in this update).
 *      ge2_opt_is_update_step(cfg, ctl) is true when micro == accumulation_steps.
 *      Not an update step: OPTIMIZER_UPDATE adds the gradients into the
 *      accumulation slot, GRAD_NORM does nothing, and the commit only
 *      writes micro_step = micro. Parameters and step stay untouched.
 *   2. An update step: ge2_opt_scalars_of(cfg, ctl) gives this update's
 *      scalars, a pure function of (config, control->step, control->base_lr,
 *      control->clip_factor): t = step + 1, lr = ge2_schedule_lr(schedule,
 *      base_lr, step) (the schedule is indexed by updates completed, like a
 *      torch LR scheduler stepped after optimizer.step()), bias corrections
 *      1 - beta^t computed in double (ge2_pow_count). Every CUDA thread
 *      may compute them itself: they depend only on values nobody writes
 *      during the update.
 *   3. GRAD_NORM (update steps only) reduces the squared effective gradient
 *      (the accumulated mean, see ge2_opt_effective_grad; the ranks' mean
 *      under data parallelism, ge2_opt_rank_average; unscaled under loss
 *      scaling, ge2_opt_unscale) into grad_norm and writes clip_factor =
 *      ge2_clip_factor(clip_norm, grad_norm), and under dynamic loss
 *      scaling found_inf when the sum is not finite (it runs then even
 *      without clipping). Without clipping scalars use a clip factor of 1.
 *   4. OPTIMIZER_UPDATE, on an update step (not skipped, ge2_opt_skipped),
 *      runs ge2_opt_take_accum then
 *      the kind's ge2_opt_sgd_element / ge2_opt_adam_element on every
 *      element of its spans (ops/optimizer/optimizer_spans.h: the flat pools, or
 *      its parameters); on a micro-step it only adds the gradients into the
 *      accumulation slot. Backends specialize per kind
 *      (a loop per kind on the CPU, a kernel per rule on CUDA) so nothing
 *      branches on the config per element. Padding is zero and stays zero
 *      under every rule.
 *   5. Once every element of an update node is done, exactly one writer
 *      calls ge2_opt_node_done (on CUDA the node's last block to finish,
 *      blocks_done counter); it counts the step's finished update nodes in
 *      control->updates_done, and the one that completes the set runs
 *      ge2_opt_commit: step = t, lr, bias corrections (for reporting),
 *      micro_step = 0. It must not happen earlier, since other blocks, and
 *      the step's later update nodes, still derive their scalars from the
 *      old step: so every node of a step uses the same step's values, and
 *      the step advances exactly once. Update nodes run one after another
 *      on one stream, so only the counter's one writer per node touches it.
 *
 * Gradient accumulation uses the MEAN of the k micro-batch gradients, so k
 * micro-batches of B equal one batch of k*B under a mean loss (the
 * accumulation buffer is cleared by the update that consumes it).
 */
#ifndef GE2_OPTIM_OPTIMIZER_MATH_H
#define GE2_OPTIM_OPTIMIZER_MATH_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "ge2/ge2.h"
#include "graph/control.h"
#include "graph/host_device.h"
#include "graph/ir.h"

/* GRAD_NORM's and OPTIMIZER_UPDATE's node attributes (graph/ir.h: GE2_ATTRS). */
typedef struct ge2_optim_attrs {
    ge2_optimizer_config config;
    /* OPTIMIZER_UPDATE: how many update nodes the step runs (1 flat, one per
     * layer per-parameter); the last to finish commits the step
     * (optim/optimizer_math.h). 0 reads as 1. */
    int update_nodes;
} ge2_optim_attrs;
GE2_ATTRS_FIT(ge2_optim_attrs);

/* (parameter, gradient) pairs one per-parameter update node takes (a
 * layer's weight and bias): ge2_optimizer splits a layer with more over
 * several nodes, and the update kernels sweep this many spans at most. */
#define GE2_OPT_MAX_SPANS 2


/* Most state slots a config can need: amsgrad's m, v, v_max plus accumulation. */
#define GE2_OPT_MAX_SLOTS 4

/* Slot indices into ge2_flat_pools.state ([slots * n]); -1 where the kind has none. */
typedef struct ge2_opt_slots {
    int momentum;   /* SGD momentum_buffer (momentum != 0) */
    int exp_avg;    /* Adam m */
    int exp_avg_sq; /* Adam v */
    int max_exp_avg_sq; /* amsgrad v_max */
    int accum;      /* gradient accumulation buffer (accumulation_steps > 1) */
    int count;
} ge2_opt_slots;

static inline GE2_HD ge2_opt_slots ge2_opt_slots_of(const ge2_optimizer_config *cfg)
{
    ge2_opt_slots s = {-1, -1, -1, -1, -1, 0};
    if (cfg->kind == GE2_OPT_SGD) {
        if (cfg->momentum != 0.0)
            s.momentum = s.count++;
    } else {
        s.exp_avg = s.count++;
        s.exp_avg_sq = s.count++;
        if (cfg->amsgrad)
            s.max_exp_avg_sq = s.count++;
    }
    if (cfg->accumulation_steps > 1)
        s.accum = s.count++;
    return s;
}

/* The name torch.optim's state_dict gives a slot ("exp_avg", ...); the
 * accumulation buffer, which torch lacks, is "grad_accum". Checkpoints store
 * state as "optim.<param>.<name>". */
static inline const char *ge2_opt_slot_name(const ge2_opt_slots *s, int slot)
{
    if (slot == s->momentum)
        return "momentum_buffer";
    if (slot == s->exp_avg)
        return "exp_avg";
    if (slot == s->exp_avg_sq)
        return "exp_avg_sq";
    if (slot == s->max_exp_avg_sq)
        return "max_exp_avg_sq";
    return slot == s->accum ? "grad_accum" : "?";
}

/* cos(pi * p) for p in [0, 1]. On the device, cospi: cos's large-argument
 * reduction path keeps a local array, which would give every optimizer
 * kernel a stack frame. The two agree to an ulp of double, far below the
 * float the schedule returns. */
static inline GE2_HD double ge2_cos_pi(double p)
{
#ifdef __CUDA_ARCH__
    return cospi(p);
#else
    return cos(3.14159265358979323846 * p);
#endif
}

/* Learning rate of the update that follows `step` completed updates.
 * STEP: base_lr * gamma^floor(step / step_size).
 * COSINE (transformers' get_cosine_schedule_with_warmup, floored at min_lr):
 *   step < warmup: base_lr * step / warmup;
 *   then min_lr + (base_lr - min_lr) * (1 + cos(pi * p)) / 2 with
 *   p = (step - warmup) / (total - warmup), clamped to [0, 1]. */
/* base^n, n >= 0 (a step count), by repeated squaring: 2 log2(n) double
 * multiplies, a few double ulps from pow(), far below the float the
 * scalars are kept in. A device pow() is a long dependent chain: two of
 * them kept thread 0 of every block of the whole-step kernel from its first
 * work for a measurable part of the step. */
static inline GE2_HD double ge2_pow_count(double base, int64_t n)
{
    double result = 1.0;
    for (; n > 0; n >>= 1) {
        if (n & 1)
            result *= base;
        base *= base;
    }
    return result;
}

static inline GE2_HD float ge2_schedule_lr(const ge2_schedule *sched, float base_lr, int64_t step)
{
    double lr = base_lr;
    switch (sched->kind) {
    case GE2_SCHEDULE_STEP:
        if (sched->step_size > 0)
            lr = base_lr * ge2_pow_count(sched->gamma, step / sched->step_size);
        break;
    case GE2_SCHEDULE_COSINE: {
        if (step < sched->warmup_steps)
            return (float)(lr * (double)step / (double)sched->warmup_steps);
        int64_t span = sched->total_steps - sched->warmup_steps;
        double p = span > 0 ? (double)(step - sched->warmup_steps) / (double)span : 1.0;
        if (p > 1.0)
            p = 1.0;
        lr = sched->min_lr + (lr - sched->min_lr) * 0.5 * (1.0 + ge2_cos_pi(p));
        break;
    }
    default:
        break;
    }
    return (float)lr;
}

/* torch.nn.utils.clip_grad_norm_: scale = min(1, max_norm / (norm + 1e-6)). */
static inline GE2_HD float ge2_clip_factor(double clip_norm, float grad_norm)
{
    double f = clip_norm / ((double)grad_norm + 1e-6);
    return f < 1.0 ? (float)f : 1.0f;
}

/* Data parallel: the factor from the ranks' summed gradients (the
 * all-reduce's) to their mean, 1 / ranks; exactly 1 in one process, so a
 * single process's arithmetic is unchanged. */
static inline GE2_HD float ge2_opt_rank_average(const ge2_control *ctl)
{
    return ctl->ranks > 1 ? 1.0f / (float)ctl->ranks : 1.0f;
}

static inline GE2_HD bool ge2_opt_is_update_step(const ge2_optimizer_config *cfg, const ge2_control *ctl)
{
    return ctl->micro_step + 1 >= cfg->accumulation_steps;
}

/* Dynamic loss scaling (cfg->loss_scaling, torch.amp.GradScaler): the
 * factor that takes the scaled gradients back to the loss's own, 1 / scale
 * (exact for the powers of two GradScaler's defaults keep the scale at);
 * exactly 1 without scaling. */
static inline GE2_HD float ge2_opt_unscale(const ge2_optimizer_config *cfg, const ge2_control *ctl)
{
    return cfg->loss_scaling.dynamic ? 1.0f / ctl->loss_scale : 1.0f;
}

/* Whether this update step is skipped: GRAD_NORM found an inf or a NaN in
 * the scaled gradients. The update then leaves parameters and state alone
 * (an accumulation slot is still cleared) and the commit backs the scale off. */
static inline GE2_HD bool ge2_opt_skipped(const ge2_optimizer_config *cfg, const ge2_control *ctl)
{
    return cfg->loss_scaling.dynamic && ctl->found_inf != 0;
}

/* The per-update scalars every element of one update shares, with the
 * config's coefficients already in f32 (converted once per update, not per
 * element; the f32 values are what torch's f32 tensor ops use too). */
typedef struct ge2_opt_scalars {
    int64_t t;           /* 1-based number of this update */
    float lr;            /* after the schedule */
    float bc1, bc2;      /* 1 - beta1^t, 1 - beta2^t */
    float step_size;     /* Adam: lr / bc1 */
    float bc2_sqrt;      /* Adam: sqrt(bc2) */
    float grad_scale;    /* clip factor / ranks / accumulation_steps / loss scale: applied to the raw (summed) gradient */
    float decay;         /* AdamW: 1 - lr * weight_decay */
    float weight_decay;  /* SGD, Adam: coupled, g += weight_decay * p */
    float momentum, one_minus_dampening;
    float one_minus_beta1, beta2, one_minus_beta2, eps;
} ge2_opt_scalars;

static inline GE2_HD ge2_opt_scalars ge2_opt_scalars_of(const ge2_optimizer_config *cfg, const ge2_control *ctl)
{
    ge2_opt_scalars s;
    s.t = ctl->step + 1;
    s.lr = ge2_schedule_lr(&cfg->schedule, ctl->base_lr, ctl->step);
    /* torch evaluates these in Python floats (double) before the f32 tensor ops. */
    double bc1 = 1.0 - ge2_pow_count(cfg->beta1, s.t);
    double bc2 = 1.0 - ge2_pow_count(cfg->beta2, s.t);
    s.bc1 = (float)bc1;
    s.bc2 = (float)bc2;
    s.step_size = (float)((double)s.lr / bc1);
    s.bc2_sqrt = (float)sqrt(bc2);
    float clip = cfg->clip_norm > 0.0 ? ctl->clip_factor : 1.0f;
    clip *= ge2_opt_rank_average(ctl) * ge2_opt_unscale(cfg, ctl);
    s.grad_scale = cfg->accumulation_steps > 1 ? clip / (float)cfg->accumulation_steps : clip;
    s.decay = (float)(1.0 - (double)s.lr * cfg->weight_decay);
    s.weight_decay = cfg->kind == GE2_OPT_ADAMW ? 0.0f : (float)cfg->weight_decay;
    s.momentum = (float)cfg->momentum;
    s.one_minus_dampening = (float)(1.0 - cfg->dampening);
    s.one_minus_beta1 = (float)(1.0 - cfg->beta1);
    s.beta2 = (float)cfg->beta2;
    s.one_minus_beta2 = (float)(1.0 - cfg->beta2);
    s.eps = (float)cfg->eps;
    return s;
}

/* The scalars for parameters outside weight decay's group
 * (ge2_no_weight_decay): no coupled decay, and AdamW's factor 1. */
static inline GE2_HD ge2_opt_scalars ge2_opt_scalars_no_decay(ge2_opt_scalars s)
{
    s.weight_decay = 0.0f;
    s.decay = 1.0f;
    return s;
}

/* The gradient the update uses, before clipping: the micro-batch mean when
 * accumulating (accum holds the sum of the earlier micro-batches). */
static inline GE2_HD float ge2_opt_effective_grad(const ge2_optimizer_config *cfg, float grad, float accum)
{
    return cfg->accumulation_steps > 1 ? (accum + grad) / (float)cfg->accumulation_steps : grad;
}

/* The element functions below follow torch's single-tensor (non-foreach)
 * order of operations. g is the raw gradient (already summed with the
 * accumulation buffer); the clip factor and 1/k are applied here. */

/* torch.optim.SGD. buf: the momentum buffer element, NULL without momentum. */
static inline GE2_HD void ge2_opt_sgd_element(const ge2_opt_scalars *s, bool nesterov, float *param, float g,
                                              float *buf)
{
    float p = *param;
    g *= s->grad_scale;
    if (s->weight_decay != 0.0f)
        g += s->weight_decay * p;
    if (buf) {
        /* torch: the first step's buffer is the gradient itself, undamped */
        float b = s->t == 1 ? g : *buf * s->momentum + s->one_minus_dampening * g;
        *buf = b;
        g = nesterov ? g + s->momentum * b : b;
    }
    *param = p - s->lr * g;
}

/* torch.optim.Adam / AdamW. vmax: amsgrad's running max, NULL without amsgrad. */
static inline GE2_HD void ge2_opt_adam_element(const ge2_opt_scalars *s, bool decoupled, float *param, float g,
                                               float *m, float *v, float *vmax)
{
    float p = *param;
    g *= s->grad_scale;
    if (decoupled)
        p *= s->decay;
    else if (s->weight_decay != 0.0f)
        g += s->weight_decay * p;
    float mn = *m + s->one_minus_beta1 * (g - *m); /* exp_avg.lerp_(grad, 1 - beta1) */
    float vn = *v * s->beta2 + s->one_minus_beta2 * g * g;
    *m = mn;
    *v = vn;
    if (vmax) {
        if (vn > *vmax)
            *vmax = vn;
        vn = *vmax;
    }
    float denom = sqrtf(vn) / s->bc2_sqrt + s->eps;
    *param = p - s->step_size * (mn / denom);
}

/* Step 4's gradient of one element on an update step when accumulating:
 * the slot's sum of the earlier micro-batches plus this one, and the slot
 * cleared for the next round (acc NULL: no accumulation). On a micro-step
 * kernels only add the gradient into the slot. */
static inline GE2_HD float ge2_opt_take_accum(float g, float *acc)
{
    if (!acc)
        return g;
    g += *acc;
    *acc = 0.0f;
    return g;
}

/* Step 5, once per update node: true when this node completes the step's
 * update_nodes (0 reads as 1), and the caller then commits. Counting up to
 * the total, rather than naming a last node, leaves the nodes' order to the
 * planner. */
static inline GE2_HD bool ge2_opt_node_done(ge2_control *ctl, int update_nodes)
{
    int32_t done = ctl->updates_done + 1;
    if (done < update_nodes) {
        ctl->updates_done = done;
        return false;
    }
    ctl->updates_done = 0;
    return true;
}

/* Loss scaling's part of an update step's commit, GradScaler.update():
 * after a skipped step the scale backs off and the clean-step count
 * restarts; after growth_interval clean steps in a row it grows (unless
 * that would overflow a float). True when the step was skipped. */
static inline GE2_HD bool ge2_opt_scale_commit(const ge2_optimizer_config *cfg, ge2_control *ctl)
{
    const ge2_loss_scaling *ls = &cfg->loss_scaling;
    const bool skipped = ctl->found_inf != 0;
    ctl->found_inf = 0;
    if (skipped) {
        ctl->loss_scale *= (float)ls->backoff_factor;
        ctl->scale_good_steps = 0;
        ctl->skipped_steps += 1;
        return true;
    }
    if (++ctl->scale_good_steps >= ls->growth_interval) {
        const float grown = ctl->loss_scale * (float)ls->growth_factor;
        if (isfinite(grown))
            ctl->loss_scale = grown;
        ctl->scale_good_steps = 0;
    }
    return false;
}

/* Step 5's commit; `update` says whether this step was an update step. A
 * skipped one (loss scaling) leaves step, lr and bias corrections as they
 * were, as a GradScaler that skips optimizer.step() does. Every train step
 * moves the random offset on, so the next one's dropout masks
 * (graph/philox.h) are fresh without the host. */
static inline GE2_HD void ge2_opt_commit(ge2_control *ctl, const ge2_optimizer_config *cfg, bool update,
                                         const ge2_opt_scalars *s)
{
    ctl->rng_offset += GE2_RNG_OFFSET_STRIDE;
    if (!update) {
        ctl->micro_step += 1;
        return;
    }
    ctl->micro_step = 0;
    if (cfg->loss_scaling.dynamic && ge2_opt_scale_commit(cfg, ctl))
        return;
    ctl->step = s->t;
    ctl->lr = s->lr;
    ctl->bias_correction1 = s->bc1;
    ctl->bias_correction2 = s->bc2;
}

#endif /* GE2_OPTIM_OPTIMIZER_MATH_H */
