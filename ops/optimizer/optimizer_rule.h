// The optimizer's update rules as compile-time types, and the update of a
// span of the flat pools by one grid's threads. Shared by OPTIMIZER_UPDATE's
// own kernel (optimizer.cu) and the whole-step MLP kernel (mlp_step.cu), so
// the update has one implementation on the GPU as it has one in
// optim/optimizer_math.h. CUDA C++ only.
#ifndef GE2_OPS_OPTIMIZER_OPTIMIZER_RULE_H
#define GE2_OPS_OPTIMIZER_OPTIMIZER_RULE_H

#include "kernels/cuda/bf16_store.h"
#include "optim/optimizer_math.h"

// opt_rule restates ge2_opt_slots_of's layout as constants, so every slot
// index below is known at compile time; the launcher checks the two agree.
template <ge2_optimizer_kind KIND_, bool MOMENTUM_, bool AMSGRAD_, bool ACCUM_> struct opt_rule {
    static constexpr ge2_optimizer_kind KIND = KIND_;
    static constexpr bool SGD = KIND_ == GE2_OPT_SGD;
    static constexpr int MOMENTUM = SGD && MOMENTUM_ ? 0 : -1;
    static constexpr int EXP_AVG = SGD ? -1 : 0;
    static constexpr int EXP_AVG_SQ = SGD ? -1 : 1;
    static constexpr int MAX_EXP_AVG_SQ = !SGD && AMSGRAD_ ? 2 : -1;
    static constexpr int OWN = SGD ? (MOMENTUM_ ? 1 : 0) : (AMSGRAD_ ? 3 : 2); /* the kind's slots */
    static constexpr int ACCUM = ACCUM_ ? OWN : -1;
    static constexpr int SLOTS = OWN + (ACCUM_ ? 1 : 0);
    static constexpr int ARRAY = SLOTS > 0 ? SLOTS : 1; /* C++ has no zero-length arrays */

    static bool matches(const ge2_opt_slots *s)
    {
        return s->momentum == MOMENTUM && s->exp_avg == EXP_AVG && s->exp_avg_sq == EXP_AVG_SQ &&
               s->max_exp_avg_sq == MAX_EXP_AVG_SQ && s->accum == ACCUM && s->count == SLOTS;
    }
};

/* Protocol step 4 for one element of an update step; st holds the element's
 * state slots in registers. */
template <class R>
__device__ __forceinline__ void ge2_opt_rule_element(const ge2_opt_scalars *s, bool nesterov, float *param, float g,
                                                     float *st /* [R::SLOTS] */)
{
    g = ge2_opt_take_accum(g, R::ACCUM >= 0 ? st + R::ACCUM : nullptr);
    if constexpr (R::SGD)
        ge2_opt_sgd_element(s, nesterov, param, g, R::MOMENTUM >= 0 ? st + R::MOMENTUM : nullptr);
    else
        ge2_opt_adam_element(s, R::KIND == GE2_OPT_ADAMW, param, g, st + R::EXP_AVG, st + R::EXP_AVG_SQ,
                             R::MAX_EXP_AVG_SQ >= 0 ? st + R::MAX_EXP_AVG_SQ : nullptr);
}

// Four consecutive elements of a span: parameters, gradients and state
// slots in registers, moved as float4.
template <class R> struct ge2_opt_group4 {
    float p[4], g[4], st[4][R::ARRAY]; /* st: [element][slot] */

    __device__ __forceinline__ void load(const float4 *p4, const float4 *g4, const float *state, long long sstride,
                                         long long i)
    {
        const float4 pv = p4[i], gv = g4[i];
        p[0] = pv.x, p[1] = pv.y, p[2] = pv.z, p[3] = pv.w;
        g[0] = gv.x, g[1] = gv.y, g[2] = gv.z, g[3] = gv.w;
#pragma unroll
        for (int k = 0; k < R::SLOTS; k++) {
            const float4 v = reinterpret_cast<const float4 *>(state + k * sstride)[i];
            st[0][k] = v.x, st[1][k] = v.y, st[2][k] = v.z, st[3][k] = v.w;
        }
    }
    __device__ __forceinline__ void update(const ge2_opt_scalars *s, bool nesterov)
    {
#pragma unroll
        for (int j = 0; j < 4; j++)
            ge2_opt_rule_element<R>(s, nesterov, &p[j], g[j], st[j]);
    }
    __device__ __forceinline__ void store(float4 *p4, float *state, long long sstride, long long i,
                                          __nv_bfloat16 *copies) const
    {
        p4[i] = make_float4(p[0], p[1], p[2], p[3]);
        if (copies)
            ge2_store4(copies + 4 * i, make_float4(p[0], p[1], p[2], p[3]));
#pragma unroll
        for (int k = 0; k < R::SLOTS; k++)
            reinterpret_cast<float4 *>(state + k * sstride)[i] = make_float4(st[0][k], st[1][k], st[2][k], st[3][k]);
    }
};

// Protocol step 4 (an update step) for elements [0, n) of a span of the
// pools (ops/optimizer/optimizer_spans.h), the calling thread taking tid, tid +
// stride, ... State slot k of element i is state[k * sstride + i]. VEC4
// (every slot's base 16-byte aligned): four elements at a time as float4,
// then the scalar tail. copies (NULL: none): the parameters' bf16 copies,
// written with them (8-byte aligned under VEC4).
template <class R, bool VEC4>
__device__ __forceinline__ void ge2_opt_update_span(long long tid, long long stride, long long n,
                                                    float *params /* [n] */, const float *grads /* [n] */,
                                                    float *state /* [R::SLOTS] x [n], slot k at k * sstride */,
                                                    long long sstride, const ge2_opt_scalars &s, bool nesterov,
                                                    __nv_bfloat16 *copies /* [n] */)
{
    const long long n4 = VEC4 ? n / 4 : 0, head = n4 * 4;
    float4 *p4 = reinterpret_cast<float4 *>(params);
    const float4 *g4 = reinterpret_cast<const float4 *>(grads);
    // Two groups of four per pass, both loaded before either is stored: the
    // compiler may not move a load above a store to another pointer, so a
    // group per pass keeps one group's loads in flight per thread.
    for (long long i = tid; i < n4; i += 2 * stride) {
        const long long i2 = i + stride;
        const bool two = i2 < n4;
        ge2_opt_group4<R> a, b;
        a.load(p4, g4, state, sstride, i);
        if (two)
            b.load(p4, g4, state, sstride, i2);
        a.update(&s, nesterov);
        a.store(p4, state, sstride, i, copies);
        if (two) {
            b.update(&s, nesterov);
            b.store(p4, state, sstride, i2, copies);
        }
    }
    for (long long i = head + tid; i < n; i += stride) {
        float p = params[i], st[R::ARRAY]; /* [slot] */
#pragma unroll
        for (int k = 0; k < R::SLOTS; k++)
            st[k] = state[k * sstride + i];
        ge2_opt_rule_element<R>(&s, nesterov, &p, grads[i], st);
        params[i] = p;
        if (copies)
            ge2_store(copies + i, p);
#pragma unroll
        for (int k = 0; k < R::SLOTS; k++)
            state[k * sstride + i] = st[k];
    }
}

#endif /* GE2_OPS_OPTIMIZER_OPTIMIZER_RULE_H */
