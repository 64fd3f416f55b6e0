// The optimizer: GRAD_NORM (global L2 norm and clip factor, over the flat
// pools) and OPTIMIZER_UPDATE (SGD / Adam / AdamW, one multi-tensor launch
// over its spans: every parameter at once, or one layer's parameters; its
// kernel specialized per update rule).
//
// The math and the control-block protocol are optim/optimizer_math.h's,
// the spans ops/optimizer/optimizer_spans.h's; this file only maps them onto a
// grid. Both kernels read the per-step scalars (lr, step, bias corrections,
// clip factor) from the control block on the device, so the captured step
// never needs a new argument. Both finish with the ticket pattern:
// GRAD_NORM's last block sums the per-block partials in block order
// (deterministic), OPTIMIZER_UPDATE's last block counts the node done and,
// for the step's last update node, commits the step once every element has
// read the old one.
#include "kernels/cuda/block_reduce.h"
#include "kernels/cuda/check.h"

#include "ops/optimizer/optimizer_rule.h"
#include "ops/optimizer/optimizer_spans.h"
#include "kernels/cuda/step_copy.h"
#include "ops/optimizer/optimizer.h"
#include "optim/optimizer_math.h"

// ------------------------------------------------------------------- kernels

template <bool VEC4>
__global__ void ge2_grad_norm_kernel(long long n, const float *grads /* [n] */, const float *accum /* [n] or NULL */,
                                     ge2_optimizer_config cfg, ge2_control *ctl)
{
    /* uniform across the launch: nobody writes micro_step during it */
    if (!ge2_opt_is_update_step(&cfg, ctl))
        return;
    const float unscale = ge2_opt_unscale(&cfg, ctl); /* 1, or 1 / the loss scale */
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
            float e[4] = {ge2_opt_effective_grad(&cfg, g.x, a.x) * unscale,
                          ge2_opt_effective_grad(&cfg, g.y, a.y) * unscale,
                          ge2_opt_effective_grad(&cfg, g.z, a.z) * unscale,
                          ge2_opt_effective_grad(&cfg, g.w, a.w) * unscale};
            acc += e[0] * e[0] + e[1] * e[1] + e[2] * e[2] + e[3] * e[3];
        }
        head = n / 4 * 4;
    }
    for (long long i = head + tid; i < n; i += stride) {
        float e = ge2_opt_effective_grad(&cfg, grads[i], accum ? accum[i] : 0.0f) * unscale;
        acc += e * e;
    }
    float total;
    if (!ge2_grid_sum(acc, ctl, &total))
        return;
    if (threadIdx.x == 0) {
        float norm = sqrtf(total) * ge2_opt_rank_average(ctl);
        ctl->grad_norm = norm;
        ctl->clip_factor = ge2_clip_factor(cfg.clip_norm, norm);
        if (cfg.loss_scaling.dynamic)
            ctl->found_inf = !isfinite(total);
    }
    ge2_ticket_reset(&ctl->blocks_done);
}

// OPTIMIZER_UPDATE, one kernel per update rule.
//
// The rule is a template parameter, so the optimizer state stays in
// registers: a slot array indexed by the run-time slot count lived in local
// memory, and a switch on the kind ran for every element. `nvcc -Xptxas -v`
// must keep showing 0 bytes stack frame and no spills for every
// instantiation: hence cospi in optimizer_math.h, and no __launch_bounds__
// (under which ptxas spilled around the double pow call in three rules).
// The scalars (a few double pow calls) are worked out by thread 0 of each
// block, into shared memory, not by every thread.
//
// One span (ops/optimizer/optimizer_spans.h) of an update: this thread's share of
// its elements. VEC4 (every slot's base 16-byte aligned): each thread moves
// four elements of params, grads and every slot as float4, then the scalar
// tail. A micro-step (accumulating, not an update) touches only grads and
// the accumulation slot.
template <class R, bool VEC4>
__device__ __forceinline__ void ge2_opt_sweep(const ge2_opt_scalars &s, bool nesterov, bool update, bool skipped,
                                              long long n,
                                              float *params /* [n] */, const float *grads /* [n] */,
                                              float *state /* [R::SLOTS] x [n], slot k at state + k * sstride */,
                                              long long sstride, uint16_t *copies /* [n] or NULL */)
{
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long n4 = VEC4 ? n / 4 : 0, head = n4 * 4;
    if (skipped) { // loss scaling found an inf: the step's gradients, and those accumulated, are dropped
        if constexpr (R::ACCUM >= 0)
            for (long long i = tid; i < n; i += stride)
                state[R::ACCUM * sstride + i] = 0.0f;
        return;
    }
    if (!update) {
        if constexpr (R::ACCUM >= 0) {
            float *acc = state + R::ACCUM * sstride; /* [n] */
            float4 *a4 = reinterpret_cast<float4 *>(acc);
            const float4 *g4 = reinterpret_cast<const float4 *>(grads);
            for (long long i = tid; i < n4; i += stride) {
                float4 a = a4[i], g = g4[i];
                a4[i] = make_float4(a.x + g.x, a.y + g.y, a.z + g.z, a.w + g.w);
            }
            for (long long i = head + tid; i < n; i += stride)
                acc[i] += grads[i];
        }
        return;
    }
    ge2_opt_update_span<R, VEC4>(tid, stride, n, params, grads, state, sstride, s, nesterov,
                                 reinterpret_cast<__nv_bfloat16 *>(copies));
}

// Copies the update does besides its work: the step's result read-back
// (ge2_cuda_optimizer_update_launch_copying), by block 0 before it sweeps.
typedef struct ge2_update_copies {
    ge2_cuda_copy copy[GE2_CUDA_MAX_COPIES];
    int n;
} ge2_update_copies;

// Every thread sweeps its share of each span in turn (a layer's weight,
// then its bias); the spans' fields are indexed by constants only, so they
// stay in the kernel's parameter space.
template <class R, bool VEC4>
__global__ void ge2_optimizer_update_kernel(ge2_opt_spans spans, ge2_optimizer_config cfg, int update_nodes,
                                            ge2_control *ctl, ge2_update_copies copies)
{
    if (blockIdx.x == 0)
        for (int c = 0; c < copies.n; c++)
            ge2_copy_share(copies.copy[c], threadIdx.x, blockDim.x);
    const bool update = ge2_opt_is_update_step(&cfg, ctl), skipped = update && ge2_opt_skipped(&cfg, ctl);
    // The step's scalars (lr, bias corrections: double pow calls) once per
    // block, not once per thread.
    __shared__ ge2_opt_scalars shared_scalars;
    if (threadIdx.x == 0)
        shared_scalars = ge2_opt_scalars_of(&cfg, ctl);
    __syncthreads();
    const ge2_opt_scalars s = shared_scalars, nd = ge2_opt_scalars_no_decay(shared_scalars);
#pragma unroll
    for (int k = 0; k < GE2_OPT_MAX_SPANS; k++)
        if (k < spans.count) {
            // the weight-decay group, then the rest (spans_vec4 took float4 only where that start is aligned)
            const ge2_opt_span sp = spans.span[k];
            const long long d = sp.decay_n;
            ge2_opt_sweep<R, VEC4>(s, cfg.nesterov, update, skipped, d, sp.params, sp.grads, sp.state, spans.stride,
                                   sp.copies);
            if (d < sp.n)
                ge2_opt_sweep<R, VEC4>(nd, cfg.nesterov, update, skipped, sp.n - d, sp.params + d, sp.grads + d,
                                       sp.state ? sp.state + d : NULL, spans.stride,
                                       sp.copies ? sp.copies + d : NULL);
        }
    if (!ge2_ticket_is_last(&ctl->blocks_done))
        return;
    if (threadIdx.x == 0 && ge2_opt_node_done(ctl, update_nodes))
        ge2_opt_commit(ctl, &cfg, update, &s);
    ge2_ticket_reset(&ctl->blocks_done);
}

// ----------------------------------------------------------------- launchers

/* The launch's spans and slots, after the control block and pools are checked. */
static ge2_status optimizer_begin(const ge2_launch *l, ge2_opt_spans *spans, ge2_opt_slots *slots)
{
    GE2_TRY(ge2_cuda_require_control(l));
    GE2_TRY(ge2_opt_spans_of(l, spans));
    *slots = ge2_opt_slots_of(&GE2_ATTRS(ge2_optim_attrs, l->node->attrs)->config);
    return GE2_OK;
}

/* float4 is safe when every span's params, grads and slot bases
 * (state + k * stride) are 16-byte aligned; the kernels run each span's
 * n % 4 tail scalar. */
static bool spans_vec4(const ge2_opt_spans *spans, int slots)
{
    bool vec = spans->stride % 4 == 0 || slots <= 1;
    for (int k = 0; k < spans->count; k++)
        vec = vec && ge2_cuda_aligned16(spans->span[k].params) && ge2_cuda_aligned16(spans->span[k].grads) &&
              (uintptr_t)spans->span[k].copies % 8 == 0 &&
              ge2_cuda_aligned16(spans->span[k].state) && spans->span[k].decay_n % 4 == 0; /* the 2nd sweep's start */
    return vec;
}

extern "C" ge2_status ge2_cuda_grad_norm_launch(const ge2_launch *l)
{
    ge2_opt_spans spans;
    ge2_opt_slots slots;
    GE2_TRY(optimizer_begin(l, &spans, &slots)); /* no inputs: the whole pools */
    const ge2_opt_span *all = &spans.span[0];
    const ge2_optimizer_config cfg = GE2_ATTRS(ge2_optim_attrs, l->node->attrs)->config;
    const float *accum = slots.accum >= 0 ? all->state + slots.accum * spans.stride : NULL;
    unsigned blocks = ge2_grid_sum_blocks(all->n / 4 + 1, GE2_CUDA_THREADS);
    /* n == 0 still runs one block: grad_norm = 0 and clip_factor = 1 get written */
    if (spans_vec4(&spans, slots.count)) {
        ge2_grad_norm_kernel<true><<<blocks, GE2_CUDA_THREADS, 0, ge2_cuda_stream(l)>>>(all->n, all->grads, accum,
                                                                                       cfg, l->control);
        return ge2_cuda_check_launch(l, "ge2_grad_norm_kernel<float4>");
    }
    ge2_grad_norm_kernel<false><<<blocks, GE2_CUDA_THREADS, 0, ge2_cuda_stream(l)>>>(all->n, all->grads, accum, cfg,
                                                                                    l->control);
    return ge2_cuda_check_launch(l, "ge2_grad_norm_kernel");
}

/* Blocks for an update of `groups` groups of four elements: each thread
 * two groups a pass (optimizer_rule.h), and no more blocks than the GPU
 * holds at once, so every block stays resident and sweeps its share with
 * loads in flight instead of a second wave waiting for the first's last
 * stores and tickets; the occupancy query below takes what is resident
 * (bench/RESULTS.md has the A/B against a group per thread). */
static unsigned update_blocks(int64_t groups, const void *kernel)
{
    unsigned blocks = ge2_cuda_blocks((groups + 1) / 2, GE2_CUDA_THREADS);
    int device = 0, sms = 0, per_sm = 0;
    if (cudaGetDevice(&device) == cudaSuccess &&
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) == cudaSuccess &&
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, GE2_CUDA_THREADS, 0) == cudaSuccess &&
        sms > 0 && per_sm > 0 && blocks > (unsigned)(sms * per_sm))
        blocks = (unsigned)(sms * per_sm);
    cudaGetLastError(); /* a failed query only leaves the grid as it was */
    return blocks;
}

/* The one launch of rule R. No elements still runs one block, which counts
 * the node done (and commits the step). */
template <class R> static ge2_status launch_update(const ge2_launch *l, const ge2_opt_spans *spans,
                                                   const ge2_opt_slots *slots, const ge2_update_copies &copies)
{
    if (!R::matches(slots))
        return ge2_error(GE2_ERR_STATE, "ge2_%s: internal: the CUDA rule's slot layout differs from ge2_opt_slots_of",
                         ge2_cuda_op_name(l));
    const ge2_optimizer_config cfg = GE2_ATTRS(ge2_optim_attrs, l->node->attrs)->config;
    const int nodes = GE2_ATTRS(ge2_optim_attrs, l->node->attrs)->update_nodes;
    if (spans_vec4(spans, slots->count)) {
        const void *kernel = (const void *)ge2_optimizer_update_kernel<R, true>;
        const unsigned blocks = update_blocks((spans->total + 3) / 4, kernel);
        ge2_optimizer_update_kernel<R, true>
            <<<blocks, GE2_CUDA_THREADS, 0, ge2_cuda_stream(l)>>>(*spans, cfg, nodes, l->control, copies);
        return ge2_cuda_check_launch(l, "ge2_optimizer_update_kernel<float4>");
    }
    ge2_optimizer_update_kernel<R, false><<<ge2_cuda_blocks(spans->total, GE2_CUDA_THREADS), GE2_CUDA_THREADS, 0,
                                            ge2_cuda_stream(l)>>>(*spans, cfg, nodes, l->control, copies);
    return ge2_cuda_check_launch(l, "ge2_optimizer_update_kernel");
}

/* The host-side dispatch: once per launch, never per element. */
template <ge2_optimizer_kind KIND, bool MOMENTUM, bool AMSGRAD>
static ge2_status launch_accum(const ge2_launch *l, const ge2_opt_spans *spans, const ge2_opt_slots *slots,
                               const ge2_update_copies &copies)
{
    if (slots->accum >= 0)
        return launch_update<opt_rule<KIND, MOMENTUM, AMSGRAD, true>>(l, spans, slots, copies);
    return launch_update<opt_rule<KIND, MOMENTUM, AMSGRAD, false>>(l, spans, slots, copies);
}

template <ge2_optimizer_kind KIND>
static ge2_status launch_kind(const ge2_launch *l, const ge2_opt_spans *spans, const ge2_opt_slots *slots,
                              const ge2_update_copies &copies)
{
    if constexpr (KIND == GE2_OPT_SGD)
        return slots->momentum >= 0 ? launch_accum<KIND, true, false>(l, spans, slots, copies)
                                    : launch_accum<KIND, false, false>(l, spans, slots, copies);
    else
        return slots->max_exp_avg_sq >= 0 ? launch_accum<KIND, false, true>(l, spans, slots, copies)
                                          : launch_accum<KIND, false, false>(l, spans, slots, copies);
}

extern "C" ge2_status ge2_cuda_optimizer_update_launch(const ge2_launch *l)
{
    return ge2_cuda_optimizer_update_launch_copying(l, NULL, 0);
}

extern "C" ge2_status ge2_cuda_optimizer_update_launch_copying(const ge2_launch *l, const ge2_cuda_copy *copies,
                                                               int n)
{
    ge2_opt_spans spans;
    ge2_opt_slots slots;
    GE2_TRY(optimizer_begin(l, &spans, &slots));
    if (n < 0 || n > GE2_CUDA_MAX_COPIES || (n > 0 && !copies))
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_%s: %d copies (at most %d)", ge2_cuda_op_name(l), n,
                         GE2_CUDA_MAX_COPIES);
    ge2_update_copies with = {};
    for (int c = 0; c < n; c++)
        with.copy[with.n++] = copies[c];
    switch (GE2_ATTRS(ge2_optim_attrs, l->node->attrs)->config.kind) {
    case GE2_OPT_SGD:
        return launch_kind<GE2_OPT_SGD>(l, &spans, &slots, with);
    case GE2_OPT_ADAM:
        return launch_kind<GE2_OPT_ADAM>(l, &spans, &slots, with);
    case GE2_OPT_ADAMW:
        return launch_kind<GE2_OPT_ADAMW>(l, &spans, &slots, with);
    default:
        return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_%s: optimizer kind %d has no CUDA kernel", ge2_cuda_op_name(l),
                         (int)GE2_ATTRS(ge2_optim_attrs, l->node->attrs)->config.kind);
    }
}

/* The kernel report's line: which update and over what. */
extern "C" const char *ge2_cuda_optimizer_update_describe(const ge2_launch *l)
{
    return l->n_in == 0 ? "flat update over the pools" : "per-parameter update";
}
