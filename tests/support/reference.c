/* Independent float64 reference math: the helpers each op's reference
 * (ops/<family>/test.c) uses, and ref_eval, which finds it. Plain loops over
 * multi-indices, written from the ops' definitions, sharing no code with
 * the kernels (not even activation_math.h). */
#include "tests/support/reference.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#include "tests/support/op_cases.h"

double ge2_ref_act(ge2_activation act, double z, double slope)
{
    switch (act) {
    case GE2_ACT_NONE:
        return z;
    case GE2_ACT_RELU:
        return z > 0 ? z : 0;
    case GE2_ACT_LEAKY_RELU:
        return z > 0 ? z : slope * z;
    case GE2_ACT_GELU_TANH:
        return 0.5 * z * (1 + tanh(sqrt(2 / M_PI) * (z + 0.044715 * z * z * z)));
    case GE2_ACT_GELU_ERF:
        return 0.5 * z * (1 + erf(z / sqrt(2)));
    case GE2_ACT_SIGMOID:
        return 1 / (1 + exp(-z));
    case GE2_ACT_TANH:
        return tanh(z);
    case GE2_ACT_SILU:
        return z / (1 + exp(-z));
    default:
        assert(0);
        return 0;
    }
}

/* d act / dz: from y for the activations that allow it (hand-derived), else
 * a central difference of ref_act in float64. */
double ge2_ref_act_grad(ge2_activation act, double saved, bool from_output, double slope)
{
    if (from_output) {
        switch (act) {
        case GE2_ACT_RELU:
            return saved > 0 ? 1 : 0;
        case GE2_ACT_LEAKY_RELU:
            return saved > 0 ? 1 : slope;
        case GE2_ACT_SIGMOID:
            return saved * (1 - saved);
        case GE2_ACT_TANH:
            return 1 - saved * saved;
        default:
            return 1;
        }
    }
    double h = 1e-6;
    return (ge2_ref_act(act, saved + h, slope) - ge2_ref_act(act, saved - h, slope)) / (2 * h);
}

/* Multi-index helpers over up to 4 dims, row-major. */
void ge2_ref_unravel(int64_t i, ge2_shape s, int64_t idx[GE2_MAX_DIMS])
{
    for (int d = s.ndim - 1; d >= 0; d--) {
        idx[d] = i % s.dim[d];
        i /= s.dim[d];
    }
}

int64_t ge2_ref_ravel(const int64_t idx[GE2_MAX_DIMS], ge2_shape s)
{
    int64_t i = 0;
    for (int d = 0; d < s.ndim; d++)
        i = i * s.dim[d] + idx[d];
    return i;
}

/* Index into `small` (right-aligned, size-1 dims pinned to 0) of the element at idx of `big`. */
int64_t ge2_ref_broadcast_index(const int64_t idx[GE2_MAX_DIMS], ge2_shape big, ge2_shape small)
{
    int64_t j[GE2_MAX_DIMS] = {0};
    for (int d = 0; d < small.ndim; d++) {
        int bd = big.ndim - small.ndim + d;
        j[d] = small.dim[d] == 1 ? 0 : idx[bd];
    }
    return ge2_ref_ravel(j, small);
}

int64_t ge2_ref_numel(ge2_shape s) { return ge2_shape_numel(s); }

uint64_t ge2_ref_rng_seed, ge2_ref_rng_offset;
double ge2_ref_loss_scale = 1.0;

void ref_eval(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    const ge2_op_case *c = ge2_op_case_of(node->op);
    assert(c->reference && "no float64 reference for this op");
    c->reference(node, in, out);
}

/* |value| of a finite bf16 pattern, and the gap to the next one up */
static double bf16_magnitude(uint32_t h, double *step)
{
    const int e = (int)((h >> 7) & 0xff), m = (int)(h & 0x7f);
    if (e == 0) {
        *step = ldexp(1.0, -133); /* subnormal: m x 2^-133 */
        return ldexp((double)m, -133);
    }
    *step = ldexp(1.0, e - 127 - 7);
    return ldexp(1.0 + (double)m / 128.0, e - 127);
}

double ge2_ref_bf16(double v)
{
    const float f = (float)v;
    if (isnan(f) || isinf(f) || f == 0)
        return (double)f;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    double step;
    /* the bf16 at or below |f| (its upper 16 bits), and the next one up */
    const double a = fabs((double)f), lo = bf16_magnitude((u >> 16) & 0x7fffu, &step), hi = lo + step;
    const bool lo_even = ((u >> 16) & 1u) == 0, past_largest = ((u >> 16) & 0x7fffu) == 0x7f7fu;
    double r;
    if (a - lo < hi - a || (a - lo == hi - a && lo_even))
        r = lo;
    else
        r = past_largest ? INFINITY : hi;
    return f < 0 ? -r : r;
}

double ge2_ref_f16(double v)
{
    const float f = (float)v;
    if (isnan(f) || isinf(f) || f == 0)
        return (double)f;
    const double a = fabs((double)f);
    if (a >= 65520.0)
        return copysign(INFINITY, f);
    /* the fp16 grid around a: steps of 2^(e - 10) in [2^e, 2^(e+1)), 2^-24 below 2^-14 */
    int e = (int)floor(log2(a));
    if (ldexp(1.0, e) > a) /* log2's rounding */
        e--;
    else if (ldexp(1.0, e + 1) <= a)
        e++;
    const double step = ldexp(1.0, (e < -14 ? -14 : e) - 10);
    const double lo = floor(a / step) * step, hi = lo + step;
    const bool lo_even = fmod(lo / step, 2.0) == 0.0;
    const double r = a - lo < hi - a || (a - lo == hi - a && lo_even) ? lo : hi;
    return copysign(r, f);
}
