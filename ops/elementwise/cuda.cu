// Elementwise ops: ADD/SUB/MUL with right-aligned broadcasting, SCALE,
// ACTIVATION, ACTIVATION_BACKWARD, and EXPAND (a broadcast times a scale,
// so it lives with the broadcasting machinery). Activation math comes from
// kernels/activation_math.h so both backends compute the same formula.
//
// Two shapes of kernel: when every operand has the output's shape (the common
// case, and every in-place case) a flat grid-stride loop, float4 when all
// pointers are 16-byte aligned; otherwise a strided loop where each operand
// carries per-dim strides against the output's dims (stride 0 = broadcast),
// precomputed on the host.
#include "kernels/cuda/check.h"

// Static inline math only: no C linkage needed.
#include "kernels/activation_math.h"
#include "kernels/broadcast.h"
#include "ops/elementwise/elementwise.h"
#include "ops/reduce/reduce.h"

// ------------------------------------------------------------------- kernels

// Operand strides against the output's dims, right-aligned, padded to 4 dims.
struct ge2_bcast {
    int64_t dim[GE2_MAX_DIMS];        // output dims, leading 1s for padding
    int64_t stride[2][GE2_MAX_DIMS];  // per operand; 0 where it broadcasts
};

struct ge2_add_fn {
    __device__ float operator()(float a, float b) const { return a + b; }
};
struct ge2_sub_fn {
    __device__ float operator()(float a, float b) const { return a - b; }
};
struct ge2_mul_fn {
    __device__ float operator()(float a, float b) const { return a * b; }
};
struct ge2_scale_fn {
    float alpha;
    __device__ float operator()(float x, float) const { return alpha * x; }
};
struct ge2_expand_fn {
    float scale;
    __device__ float operator()(float x, float) const { return scale * x; }
};
struct ge2_act_fn {
    ge2_activation act;
    float slope;
    __device__ float operator()(float z, float) const { return ge2_act_f32(act, z, slope); }
};
struct ge2_act_grad_fn {
    ge2_activation act;
    float slope;
    bool from_output;
    __device__ float operator()(float dy, float saved) const
    {
        return dy * ge2_act_grad_f32(act, saved, from_output, slope);
    }
};

// y[i] = f(a[i], b[i]); b may be NULL for unary functors (then 0 is passed).
// No __restrict__: the planner may run an elementwise op in place (y == a).
template <bool VEC4, typename F>
__global__ void ge2_map_kernel(long long n, const float *a /* [n] */, const float *b /* [n] or NULL */,
                               float *y /* [n] */, F f)
{
    long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long stride = (long long)gridDim.x * blockDim.x;
    long long head = 0;
    if (VEC4) {
        long long n4 = n / 4;
        const float4 *a4 = reinterpret_cast<const float4 *>(a);
        const float4 *b4 = reinterpret_cast<const float4 *>(b);
        float4 *y4 = reinterpret_cast<float4 *>(y);
        for (long long i = tid; i < n4; i += stride) {
            float4 va = a4[i];
            float4 vb = b ? b4[i] : make_float4(0.f, 0.f, 0.f, 0.f);
            y4[i] = make_float4(f(va.x, vb.x), f(va.y, vb.y), f(va.z, vb.z), f(va.w, vb.w));
        }
        head = n4 * 4;
    }
    for (long long i = head + tid; i < n; i += stride)
        y[i] = f(a[i], b ? b[i] : 0.0f);
}

// y[i] = f(a[i % na], b[i % nb]): each operand is y's shape or its
// trailing dims, repeated (a bias over rows, a position table over a
// batch), so its index is a remainder, not a coordinate walk. VEC4: na and
// nb multiples of 4 and every pointer 16-byte aligned, four a thread.
template <bool VEC4, typename F>
__global__ void ge2_repeat_kernel(long long n, const float *a, long long na, const float *b, long long nb, float *y,
                                  F f)
{
    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x, stride = (long long)gridDim.x * blockDim.x;
    if (VEC4) {
        for (long long i = 4 * first; i + 4 <= n; i += 4 * stride) {
            const float4 va = *reinterpret_cast<const float4 *>(a + i % na);
            const float4 vb = *reinterpret_cast<const float4 *>(b + i % nb);
            *reinterpret_cast<float4 *>(y + i) = make_float4(f(va.x, vb.x), f(va.y, vb.y), f(va.z, vb.z), f(va.w, vb.w));
        }
        return; // n is a multiple of 4: na is, and divides it
    }
    for (long long i = first; i < n; i += stride)
        y[i] = f(a[i % na], b[i % nb]);
}

// y[i] = f(a[ai], b[bi]) with ai, bi from the output coordinates of i.
template <typename F>
__global__ void ge2_broadcast_kernel(long long n, const float *a /* broadcastable to y */,
                                     const float *b /* broadcastable to y */, float *y /* [n] */,
                                     ge2_bcast bc, F f)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        long long rest = i, ai = 0, bi = 0;
        for (int d = GE2_MAX_DIMS - 1; d >= 0; d--) {
            long long c = rest % bc.dim[d];
            rest /= bc.dim[d];
            ai += c * bc.stride[0][d];
            bi += c * bc.stride[1][d];
        }
        y[i] = f(a[ai], b[bi]);
    }
}

// ----------------------------------------------------------------- launchers

static bool same_shape(ge2_shape x, ge2_shape y)
{
    return ge2_shape_numel(x) == ge2_shape_numel(y);
}

static ge2_bcast make_bcast(ge2_shape a, ge2_shape b, ge2_shape out)
{
    ge2_bcast bc;
    ge2_bcast_dims(out, bc.dim);
    ge2_bcast_strides(a, out, bc.stride[0]);
    ge2_bcast_strides(b, out, bc.stride[1]);
    return bc;
}

// Flat map over out[0]: float4 when every pointer allows it.
template <typename F>
static ge2_status launch_map(const ge2_launch *l, const float *a, const float *b, F f)
{
    float *y = (float *)l->out[0].data;
    long long n = ge2_shape_numel(l->out[0].shape);
    if (!y || n == 0)
        return GE2_OK;
    bool vec = ge2_cuda_aligned16(a) && ge2_cuda_aligned16(y) && (!b || ge2_cuda_aligned16(b));
    if (vec) {
        ge2_map_kernel<true><<<ge2_cuda_blocks(n / 4 + 1, GE2_CUDA_THREADS), GE2_CUDA_THREADS, 0,
                               ge2_cuda_stream(l)>>>(n, a, b, y, f);
        return ge2_cuda_check_launch(l, "ge2_map_kernel<float4>");
    }
    ge2_map_kernel<false><<<ge2_cuda_blocks(n, GE2_CUDA_THREADS), GE2_CUDA_THREADS, 0, ge2_cuda_stream(l)>>>(
        n, a, b, y, f);
    return ge2_cuda_check_launch(l, "ge2_map_kernel");
}

// Whether x broadcast to out is out's trailing dims repeated: x's dims,
// leading 1s dropped, equal out's last ones (then element i of out takes
// x's element i mod numel(x))
static bool repeats(ge2_shape x, ge2_shape out)
{
    int first = 0;
    while (first < x.ndim && x.dim[first] == 1)
        first++;
    const int kept = x.ndim - first;
    if (kept > out.ndim)
        return false;
    for (int d = 0; d < kept; d++)
        if (x.dim[first + d] != out.dim[out.ndim - kept + d])
            return false;
    return true;
}

// y = f(a, b) over y where each operand is y's shape or its trailing dims
// repeated (ge2_repeat_kernel); false: not such a pair
template <typename F>
static bool launch_repeat(const ge2_launch *l, const ge2_view *a, const ge2_view *b, F f, ge2_status *st)
{
    const ge2_view *y = &l->out[0];
    if (!repeats(a->shape, y->shape) || !repeats(b->shape, y->shape))
        return false;
    const long long n = ge2_shape_numel(y->shape), na = ge2_shape_numel(a->shape), nb = ge2_shape_numel(b->shape);
    const bool vec = na % 4 == 0 && nb % 4 == 0 && ge2_cuda_aligned16(a->data) && ge2_cuda_aligned16(b->data) &&
                     ge2_cuda_aligned16(y->data);
    if (vec)
        ge2_repeat_kernel<true><<<ge2_cuda_blocks(n / 4, GE2_CUDA_THREADS), GE2_CUDA_THREADS, 0, ge2_cuda_stream(l)>>>(
            n, (const float *)a->data, na, (const float *)b->data, nb, (float *)y->data, f);
    else
        ge2_repeat_kernel<false><<<ge2_cuda_blocks(n, GE2_CUDA_THREADS), GE2_CUDA_THREADS, 0, ge2_cuda_stream(l)>>>(
            n, (const float *)a->data, na, (const float *)b->data, nb, (float *)y->data, f);
    *st = ge2_cuda_check_launch(l, "ge2_repeat_kernel");
    return true;
}

template <typename F>
static ge2_status launch_binary(const ge2_launch *l, F f)
{
    const ge2_view *a = &l->in[0], *b = &l->in[1], *y = &l->out[0];
    if (same_shape(a->shape, y->shape) && same_shape(b->shape, y->shape))
        return launch_map(l, (const float *)a->data, (const float *)b->data, f);
    long long n = ge2_shape_numel(y->shape);
    if (!y->data || n == 0)
        return GE2_OK;
    ge2_status st;
    if (launch_repeat(l, a, b, f, &st))
        return st;
    ge2_broadcast_kernel<<<ge2_cuda_blocks(n, GE2_CUDA_THREADS), GE2_CUDA_THREADS, 0, ge2_cuda_stream(l)>>>(
        n, (const float *)a->data, (const float *)b->data, (float *)y->data, make_bcast(a->shape, b->shape, y->shape),
        f);
    return ge2_cuda_check_launch(l, "ge2_broadcast_kernel");
}

extern "C" ge2_status ge2_cuda_binary_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    switch (l->node->op) {
    case GE2_OP_ADD:
        return launch_binary(l, ge2_add_fn());
    case GE2_OP_SUB:
        return launch_binary(l, ge2_sub_fn());
    case GE2_OP_MUL:
        return launch_binary(l, ge2_mul_fn());
    default:
        return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_%s: not a binary elementwise op", ge2_cuda_op_name(l));
    }
}

// x is broadcast (right-aligned) to the like input's shape, which out[0] has,
// times scale, and divided by the broadcast factor when attrs.mean (taken
// from this key's shapes, so a new batch size keeps mean's 1/n right).
extern "C" ge2_status ge2_cuda_expand_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    const ge2_view *x = &l->in[0], *y = &l->out[0];
    const ge2_expand_attrs *at = GE2_ATTRS(ge2_expand_attrs, l->node->attrs);
    double scale = at->scale;
    if (at->mean && ge2_shape_numel(x->shape) > 0)
        scale /= (double)ge2_shape_numel(y->shape) / (double)ge2_shape_numel(x->shape);
    ge2_expand_fn f = {(float)scale};
    if (same_shape(x->shape, y->shape))
        return launch_map(l, (const float *)x->data, NULL, f);
    long long n = ge2_shape_numel(y->shape);
    if (!y->data || n == 0)
        return GE2_OK;
    ge2_status st;
    if (launch_repeat(l, x, x, f, &st)) // f reads the first operand only
        return st;
    ge2_broadcast_kernel<<<ge2_cuda_blocks(n, GE2_CUDA_THREADS), GE2_CUDA_THREADS, 0, ge2_cuda_stream(l)>>>(
        n, (const float *)x->data, (const float *)x->data, (float *)y->data, make_bcast(x->shape, x->shape, y->shape),
        f);
    return ge2_cuda_check_launch(l, "ge2_broadcast_kernel");
}

extern "C" ge2_status ge2_cuda_scale_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    ge2_scale_fn f = {(float)GE2_ATTRS(ge2_scale_attrs, l->node->attrs)->alpha};
    return launch_map(l, (const float *)l->in[0].data, NULL, f);
}

extern "C" ge2_status ge2_cuda_activation_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    ge2_act_fn f = {GE2_ATTRS(ge2_act_attrs, l->node->attrs)->act, GE2_ATTRS(ge2_act_attrs, l->node->attrs)->slope};
    return launch_map(l, (const float *)l->in[0].data, NULL, f);
}

extern "C" ge2_status ge2_cuda_activation_backward_launch(const ge2_launch *l)
{
    GE2_TRY(ge2_cuda_require_f32(l, 0));
    const ge2_act_attrs *at = GE2_ATTRS(ge2_act_attrs, l->node->attrs);
    ge2_act_grad_fn f = {at->act, at->slope, at->from_output};
    return launch_map(l, (const float *)l->in[0].data, (const float *)l->in[1].data, f);
}

extern "C" const char *ge2_cuda_elementwise_describe(const ge2_launch *l)
{
    bool flat = true;
    for (int i = 0; i < l->n_in; i++)
        flat = flat && same_shape(l->in[i].shape, l->out[0].shape);
    bool repeated = true;
    for (int i = 0; i < l->n_in; i++)
        repeated = repeated && repeats(l->in[i].shape, l->out[0].shape);
    if (!flat)
        return repeated ? "trailing dims repeated" : "strided broadcast";
    bool vec = ge2_cuda_aligned16(l->out[0].data);
    for (int i = 0; i < l->n_in; i++)
        vec = vec && ge2_cuda_aligned16(l->in[i].data);
    return vec ? "flat float4" : "flat scalar";
}
