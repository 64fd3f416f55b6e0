// The optimizer over the flat pools: GRAD_NORM (global L2 norm and clip
// factor) and OPTIMIZER_UPDATE (SGD / Adam / AdamW, one multi-tensor kernel
// over every parameter at once).
//
// The math and the control-block protocol are kernels/optimizer_math.h's;
// this file only maps them onto a grid. Both kernels read the per-step
// scalars (lr, step, bias corrections, clip factor) from the control block on
// the device, so the captured step never needs a new argument. Both finish
// with the ticket pattern: GRAD_NORM's last block sums the per-block partials
// in block order (deterministic), OPTIMIZER_UPDATE's last block commits the
// step once every element has read the old one.
#include "kernels/cuda/block_reduce.h"
#include "kernels/cuda/check.h"

#include "kernels/optimizer_math.h"

// ------------------------------------------------------------------- kernels

template <bool VEC4>
__global__ void ge2_grad_norm_kernel(long long n, const float *grads /* [n] */, const float *accum /* [n] or NULL */,
                                     ge2_optimizer_config cfg, ge2_control *ctl)
{
    /* uniform across the launch: nobody writes micro_step during it */
    if (!ge2_opt_is_update_step(&cfg, ctl))
        return;
    float acc = 0.0f;
    long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long stride = (long long)gridDim.x * blockDim.x;
    long long head = 0;
    if (VEC4) {
        const float4 *g4 = reinterpret_cast<const float4 *>(grads);
        const float4 *a4 = reinterpret_cast<const float4 *>(accum);
        for (long long i = tid; i < n / 4; i += stride) {
            float4 g = g4[i];
            float4 a = accum ? a4[i] : make_float4(0.f, 0.f, 0.f, 0.f);
            float e[4] = {ge2_opt_effective_grad(&cfg, g.x, a.x), ge2_opt_effective_grad(&cfg, g.y, a.y),
                          ge2_opt_effective_grad(&cfg, g.z, a.z), ge2_opt_effective_grad(&cfg, g.w, a.w)};
            acc += e[0] * e[0] + e[1] * e[1] + e[2] * e[2] + e[3] * e[3];
        }
        head = n / 4 * 4;
    }
    for (long long i = head + tid; i < n; i += stride) {
        float e = ge2_opt_effective_grad(&cfg, grads[i], accum ? accum[i] : 0.0f);
        acc += e * e;
    }
    float total;
    if (!ge2_grid_sum(acc, ctl, &total))
        return;
    if (threadIdx.x == 0) {
        float norm = sqrtf(total);
        ctl->grad_norm = norm;
        ctl->clip_factor = ge2_clip_factor(cfg.clip_norm, norm);
    }
    ge2_ticket_reset(&ctl->blocks_done);
}

// VEC4 (n % 4 == 0, every pool 16-byte aligned): each thread moves four
// elements of params, grads and every state slot as float4, updating them in
// registers through the same per-element function.
template <bool VEC4>
__global__ void ge2_optimizer_update_kernel(long long n, float *params /* [n] */, const float *grads /* [n] */,
                                            float *state /* [slots, n] */, ge2_optimizer_config cfg,
                                            ge2_opt_slots slots, ge2_control *ctl)
{
    bool update = ge2_opt_is_update_step(&cfg, ctl);
    ge2_opt_scalars s = ge2_opt_scalars_of(&cfg, ctl);
    long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long stride = (long long)gridDim.x * blockDim.x;
    if (VEC4) {
        long long n4 = n / 4;
        float4 *p4 = reinterpret_cast<float4 *>(params);
        const float4 *g4 = reinterpret_cast<const float4 *>(grads);
        float4 *s4 = reinterpret_cast<float4 *>(state);
        for (long long i = tid; i < n4; i += stride) {
            float4 pv = p4[i], gv = g4[i];
            float p[4] = {pv.x, pv.y, pv.z, pv.w}, g[4] = {gv.x, gv.y, gv.z, gv.w};
            float st[GE2_OPT_MAX_SLOTS * 4]; /* [slot][4] */
            for (int k = 0; k < slots.count; k++) {
                float4 v = s4[k * n4 + i];
                st[k * 4 + 0] = v.x;
                st[k * 4 + 1] = v.y;
                st[k * 4 + 2] = v.z;
                st[k * 4 + 3] = v.w;
            }
            for (int j = 0; j < 4; j++)
                ge2_opt_step_element(&cfg, &slots, &s, update, &p[j], g[j], &st[j], 4);
            if (update)
                p4[i] = make_float4(p[0], p[1], p[2], p[3]);
            for (int k = 0; k < slots.count; k++)
                s4[k * n4 + i] = make_float4(st[k * 4 + 0], st[k * 4 + 1], st[k * 4 + 2], st[k * 4 + 3]);
        }
    } else {
        for (long long i = tid; i < n; i += stride)
            ge2_opt_step_element(&cfg, &slots, &s, update, params + i, grads[i], state + i, n);
    }
    if (!ge2_ticket_is_last(&ctl->blocks_done))
        return;
    if (threadIdx.x == 0)
        ge2_opt_commit(ctl, update, &s);
    ge2_ticket_reset(&ctl->blocks_done);
}

// ----------------------------------------------------------------- launchers

static ge2_status check_pools(const ge2_launch *l, ge2_opt_slots *slots)
{
    GE2_TRY(ge2_cuda_require_control(l));
    const ge2_optimizer_config *cfg = &l->node->attrs.optim.config;
    *slots = ge2_opt_slots_of(cfg);
    if (slots->count > GE2_OPT_MAX_SLOTS || l->pools.slots < slots->count)
        return ge2_error(GE2_ERR_STATE, "ge2_%s: the optimizer needs %d state slots, the pool has %d",
                         ge2_cuda_op_name(l), slots->count, l->pools.slots);
    if (l->pools.n > 0 && (!l->pools.params || !l->pools.grads || (slots->count > 0 && !l->pools.state)))
        return ge2_error(GE2_ERR_STATE, "ge2_%s: flat pools are not allocated", ge2_cuda_op_name(l));
    return GE2_OK;
}

static bool pools_vec4(const ge2_flat_pools *p)
{
    return p->n % 4 == 0 && ge2_cuda_aligned16(p->params) && ge2_cuda_aligned16(p->grads) &&
           ge2_cuda_aligned16(p->state);
}

extern "C" ge2_status ge2_cuda_grad_norm_launch(const ge2_launch *l)
{
    ge2_opt_slots slots;
    GE2_TRY(check_pools(l, &slots));
    const ge2_flat_pools *p = &l->pools;
    const ge2_optimizer_config cfg = l->node->attrs.optim.config;
    const float *accum = slots.accum >= 0 ? p->state + slots.accum * p->n : NULL;
    unsigned blocks = ge2_cuda_blocks(p->n / 4 + 1, GE2_CUDA_THREADS);
    if (blocks > GE2_CONTROL_PARTIALS)
        blocks = GE2_CONTROL_PARTIALS;
    /* n == 0 still runs one block: grad_norm = 0 and clip_factor = 1 get written */
    if (pools_vec4(p)) {
        ge2_grad_norm_kernel<true><<<blocks, GE2_CUDA_THREADS, 0, ge2_cuda_stream(l)>>>(p->n, p->grads, accum, cfg,
                                                                                       l->control);
        return ge2_cuda_check_launch(l, "ge2_grad_norm_kernel<float4>");
    }
    ge2_grad_norm_kernel<false><<<blocks, GE2_CUDA_THREADS, 0, ge2_cuda_stream(l)>>>(p->n, p->grads, accum, cfg,
                                                                                    l->control);
    return ge2_cuda_check_launch(l, "ge2_grad_norm_kernel");
}

extern "C" ge2_status ge2_cuda_optimizer_update_launch(const ge2_launch *l)
{
    ge2_opt_slots slots;
    GE2_TRY(check_pools(l, &slots));
    const ge2_flat_pools *p = &l->pools;
    const ge2_optimizer_config cfg = l->node->attrs.optim.config;
    /* n == 0 still runs one block, which commits the step */
    if (pools_vec4(p)) {
        ge2_optimizer_update_kernel<true><<<ge2_cuda_blocks(p->n / 4, GE2_CUDA_THREADS), GE2_CUDA_THREADS, 0,
                                            ge2_cuda_stream(l)>>>(p->n, p->params, p->grads, p->state, cfg, slots,
                                                                  l->control);
        return ge2_cuda_check_launch(l, "ge2_optimizer_update_kernel<float4>");
    }
    ge2_optimizer_update_kernel<false><<<ge2_cuda_blocks(p->n, GE2_CUDA_THREADS), GE2_CUDA_THREADS, 0,
                                         ge2_cuda_stream(l)>>>(p->n, p->params, p->grads, p->state, cfg, slots,
                                                               l->control);
    return ge2_cuda_check_launch(l, "ge2_optimizer_update_kernel");
}
