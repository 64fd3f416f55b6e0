#include "tests/graph/reference.h"
#include "ops/ops.h"

#include <assert.h>
#include <math.h>
#include <string.h>

double ref_act(ge2_activation act, double z, double slope)
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
static double ref_act_grad(ge2_activation act, double saved, bool from_output, double slope)
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
    return (ref_act(act, saved + h, slope) - ref_act(act, saved - h, slope)) / (2 * h);
}

/* Multi-index helpers over up to 4 dims, row-major. */
static void unravel(int64_t i, ge2_shape s, int64_t idx[GE2_MAX_DIMS])
{
    for (int d = s.ndim - 1; d >= 0; d--) {
        idx[d] = i % s.dim[d];
        i /= s.dim[d];
    }
}

static int64_t ravel(const int64_t idx[GE2_MAX_DIMS], ge2_shape s)
{
    int64_t i = 0;
    for (int d = 0; d < s.ndim; d++)
        i = i * s.dim[d] + idx[d];
    return i;
}

/* Index into `small` (right-aligned, size-1 dims pinned to 0) of the element at idx of `big`. */
static int64_t broadcast_index(const int64_t idx[GE2_MAX_DIMS], ge2_shape big, ge2_shape small)
{
    int64_t j[GE2_MAX_DIMS] = {0};
    for (int d = 0; d < small.ndim; d++) {
        int bd = big.ndim - small.ndim + d;
        j[d] = small.dim[d] == 1 ? 0 : idx[bd];
    }
    return ravel(j, small);
}

static int64_t numel(ge2_shape s) { return ge2_shape_numel(s); }

static void ref_linear(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    int64_t B = in[0].shape.dim[0], K = in[0].shape.dim[1], N = in[1].shape.dim[0];
    for (int64_t r = 0; r < B; r++)
        for (int64_t o = 0; o < N; o++) {
            double z = node->n_inputs > 2 ? in[2].v[o] : 0;
            for (int64_t k = 0; k < K; k++)
                z += in[0].v[r * K + k] * in[1].v[o * K + k];
            out[0].v[r * N + o] = ref_act(node->attrs.linear.act, z, node->attrs.linear.slope);
            if (node->n_outputs > 1 && node->attrs.linear.act != GE2_ACT_RELU)
                out[1].v[r * N + o] = z;
            else if (node->n_outputs > 1) /* bytes of a bit-mask: rows of N bits padded to 128, LSB first */
                out[1].v[r * out[1].shape.dim[1] + o / 8] += z > 0 ? (double)(1 << (o % 8)) : 0;
        }
}

/* dz [B, O], w [O, N], saved [B, N] (z, y, or bytes of the relu bit-mask) ->
 * dx = (dz w) * act'(saved) [B, N], db = column sums of dx [N] */
static void ref_linear_grad_input(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    int64_t B = in[0].shape.dim[0], O = in[0].shape.dim[1], N = in[1].shape.dim[1];
    const ge2_act_attrs *a = &node->attrs.act;
    for (int64_t r = 0; r < B; r++)
        for (int64_t c = 0; c < N; c++) {
            double g = 0, d = 1;
            for (int64_t k = 0; k < O; k++)
                g += in[0].v[r * O + k] * in[1].v[k * N + c];
            if (node->n_inputs > 2 && a->act == GE2_ACT_RELU && !a->from_output) /* bytes of the bit-mask */
                d = ((int)in[2].v[r * in[2].shape.dim[1] + c / 8] >> (c % 8)) & 1;
            else if (node->n_inputs > 2)
                d = ref_act_grad(a->act, in[2].v[r * N + c], a->from_output, a->slope);
            out[0].v[r * N + c] = g * d;
            if (node->n_outputs > 1)
                out[1].v[c] += g * d;
        }
}

/* dz [B, O], x [B, N] -> dw = dzᵀ x [O, N], db = column sums of dz [O] */
static void ref_linear_grad_weight(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    int64_t B = in[0].shape.dim[0], O = in[0].shape.dim[1], N = in[1].shape.dim[1];
    for (int64_t o = 0; o < O; o++) {
        for (int64_t c = 0; c < N; c++) {
            double s = 0;
            for (int64_t r = 0; r < B; r++)
                s += in[0].v[r * O + o] * in[1].v[r * N + c];
            out[0].v[o * N + c] = s;
        }
        for (int64_t r = 0; node->n_outputs > 1 && r < B; r++)
            out[1].v[o] += in[0].v[r * O + o];
    }
}

/* element (b, i, j) of op(x), op = transpose of the last two dims when t */
static double mat_at(const ref_tensor *x, int64_t b, int64_t i, int64_t j, bool t)
{
    int nd = x->shape.ndim;
    int64_t r = x->shape.dim[nd - 2], c = x->shape.dim[nd - 1];
    return t ? x->v[b * r * c + j * c + i] : x->v[b * r * c + i * c + j];
}

static void ref_matmul(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    bool ta = node->attrs.matmul.trans_a, tb = node->attrs.matmul.trans_b;
    int nd = out[0].shape.ndim;
    int64_t batch = nd == 3 ? out[0].shape.dim[0] : 1, M = out[0].shape.dim[nd - 2], N = out[0].shape.dim[nd - 1];
    int64_t K = in[0].shape.dim[ta ? nd - 2 : nd - 1];
    for (int64_t b = 0; b < batch; b++)
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double s = 0;
                for (int64_t k = 0; k < K; k++)
                    s += mat_at(&in[0], b, i, k, ta) * mat_at(&in[1], b, k, j, tb);
                out[0].v[(b * M + i) * N + j] = s;
            }
}

static void ref_binary(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    int64_t idx[GE2_MAX_DIMS];
    for (int64_t i = 0; i < numel(out[0].shape); i++) {
        unravel(i, out[0].shape, idx);
        double a = in[0].v[broadcast_index(idx, out[0].shape, in[0].shape)];
        double b = in[1].v[broadcast_index(idx, out[0].shape, in[1].shape)];
        out[0].v[i] = node->op == GE2_OP_ADD ? a + b : node->op == GE2_OP_SUB ? a - b : a * b;
    }
}

static void ref_softmax(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    int64_t C = in[0].shape.dim[in[0].shape.ndim - 1], rows = numel(in[0].shape) / C;
    for (int64_t r = 0; r < rows; r++) {
        const double *x = in[0].v + r * C;
        double z = 0;
        for (int64_t i = 0; i < C; i++)
            z += exp(x[i]);
        for (int64_t i = 0; i < C; i++)
            out[0].v[r * C + i] = node->op == GE2_OP_SOFTMAX ? exp(x[i]) / z : x[i] - log(z);
    }
}

/* Through the explicit Jacobian of y with respect to x, then its transpose times dy. */
static void ref_softmax_backward(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    int64_t C = in[0].shape.dim[in[0].shape.ndim - 1], rows = numel(in[0].shape) / C;
    bool log_out = node->op == GE2_OP_LOG_SOFTMAX_BACKWARD;
    for (int64_t r = 0; r < rows; r++) {
        const double *dy = in[0].v + r * C, *y = in[1].v + r * C;
        for (int64_t i = 0; i < C; i++) {
            double s = 0;
            for (int64_t j = 0; j < C; j++) {
                /* d y_j / d x_i */
                double jac = log_out ? (i == j) - exp(y[i]) : y[j] * ((i == j) - y[i]);
                s += jac * dy[j];
            }
            out[0].v[r * C + i] = s;
        }
    }
}

static void ref_reduce(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    int axis = node->attrs.reduce.axis;
    int64_t n = numel(in[0].shape), idx[GE2_MAX_DIMS];
    memset(out[0].v, 0, sizeof(double) * (size_t)numel(out[0].shape));
    for (int64_t i = 0; i < n; i++) {
        unravel(i, in[0].shape, idx);
        int64_t o = 0;
        if (axis != GE2_AXIS_ALL) {
            int64_t j[GE2_MAX_DIMS];
            for (int d = 0, k = 0; d < in[0].shape.ndim; d++)
                if (d != axis)
                    j[k++] = idx[d];
            o = ravel(j, out[0].shape);
        }
        out[0].v[o] += in[0].v[i];
    }
    int64_t count = axis == GE2_AXIS_ALL ? n : in[0].shape.dim[axis];
    for (int64_t o = 0; node->op == GE2_OP_MEAN && o < numel(out[0].shape); o++)
        out[0].v[o] /= (double)count;
}

/* SLICE reads the window, SLICE_BACKWARD writes it into zeros; CONCAT stacks windows. */
static void ref_window(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    int64_t idx[GE2_MAX_DIMS];
    if (node->op == GE2_OP_CONCAT) {
        int axis = node->attrs.concat.axis;
        for (int64_t i = 0; i < numel(out[0].shape); i++) {
            unravel(i, out[0].shape, idx);
            int k = 0;
            while (idx[axis] >= in[k].shape.dim[axis])
                idx[axis] -= in[k++].shape.dim[axis];
            out[0].v[i] = in[k].v[ravel(idx, in[k].shape)];
        }
        return;
    }
    const ge2_slice_attrs *a = &node->attrs.slice;
    bool forward = node->op == GE2_OP_SLICE;
    ge2_shape whole = forward ? in[0].shape : out[0].shape;
    for (int64_t i = 0; i < numel(whole); i++) {
        unravel(i, whole, idx);
        bool inside = idx[a->axis] >= a->start && idx[a->axis] < a->end;
        idx[a->axis] -= a->start;
        if (forward && inside)
            out[0].v[ravel(idx, out[0].shape)] = in[0].v[i];
        else if (!forward)
            out[0].v[i] = inside ? in[0].v[ravel(idx, in[0].shape)] : 0;
    }
}

static void ref_broadcast(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    bool expand = node->op == GE2_OP_EXPAND;
    ge2_shape big = expand ? out[0].shape : in[0].shape, small = expand ? in[0].shape : out[0].shape;
    double scale = node->attrs.expand.scale;
    if (node->attrs.expand.mean)
        scale *= (double)numel(small) / (double)numel(big);
    int64_t idx[GE2_MAX_DIMS];
    memset(out[0].v, 0, sizeof(double) * (size_t)numel(out[0].shape));
    for (int64_t i = 0; i < numel(big); i++) {
        unravel(i, big, idx);
        int64_t j = broadcast_index(idx, big, small);
        if (expand)
            out[0].v[i] = in[0].v[j] * scale;
        else
            out[0].v[j] += in[0].v[i] * scale;
    }
}

static void ref_cross_entropy(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    int64_t B = in[0].shape.dim[0], C = in[0].shape.dim[1];
    double eps = node->attrs.loss.label_smoothing, total = 0;
    for (int64_t r = 0; r < B; r++) {
        const double *x = in[0].v + r * C;
        int64_t label = (int64_t)in[1].v[r];
        double z = 0;
        for (int64_t i = 0; i < C; i++)
            z += exp(x[i]);
        for (int64_t i = 0; i < C; i++) {
            double q = (i == label ? 1 - eps : 0) + eps / (double)C, p = exp(x[i]) / z;
            total -= q * log(p);
            if (node->n_outputs > 1)
                out[1].v[r * C + i] = (p - q) / (double)B;
        }
    }
    out[0].v[0] = total / (double)B;
}

static void ref_mse(const ref_tensor *in, ref_tensor *out)
{
    double s = 0;
    for (int64_t i = 0; i < numel(in[0].shape); i++)
        s += (in[0].v[i] - in[1].v[i]) * (in[0].v[i] - in[1].v[i]);
    out[0].v[0] = s / (double)numel(in[0].shape);
}

static void ref_accuracy(const ref_tensor *in, ref_tensor *out)
{
    int64_t B = in[0].shape.dim[0], C = in[0].shape.dim[1], hits = 0;
    for (int64_t r = 0; r < B; r++) {
        int64_t best = 0;
        for (int64_t i = 1; i < C; i++)
            if (in[0].v[r * C + i] > in[0].v[r * C + best])
                best = i;
        hits += best == (int64_t)in[1].v[r];
    }
    out[0].v[0] = (double)hits;
}

void ref_eval(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    int64_t n = numel(out[0].shape);
    switch (node->op) {
    case GE2_OP_LINEAR:
        ref_linear(node, in, out);
        break;
    case GE2_OP_MATMUL:
        ref_matmul(node, in, out);
        break;
    case GE2_OP_LINEAR_GRAD_INPUT:
        ref_linear_grad_input(node, in, out);
        break;
    case GE2_OP_LINEAR_GRAD_WEIGHT:
        ref_linear_grad_weight(node, in, out);
        break;
    case GE2_OP_ADD:
    case GE2_OP_SUB:
    case GE2_OP_MUL:
        ref_binary(node, in, out);
        break;
    case GE2_OP_SCALE:
        for (int64_t i = 0; i < n; i++)
            out[0].v[i] = node->attrs.scale.alpha * in[0].v[i];
        break;
    case GE2_OP_ACTIVATION:
        for (int64_t i = 0; i < n; i++)
            out[0].v[i] = ref_act(node->attrs.act.act, in[0].v[i], node->attrs.act.slope);
        break;
    case GE2_OP_ACTIVATION_BACKWARD:
        for (int64_t i = 0; i < n; i++)
            out[0].v[i] = in[0].v[i] * ref_act_grad(node->attrs.act.act, in[1].v[i], node->attrs.act.from_output,
                                                    node->attrs.act.slope);
        break;
    case GE2_OP_SOFTMAX:
    case GE2_OP_LOG_SOFTMAX:
        ref_softmax(node, in, out);
        break;
    case GE2_OP_SOFTMAX_BACKWARD:
    case GE2_OP_LOG_SOFTMAX_BACKWARD:
        ref_softmax_backward(node, in, out);
        break;
    case GE2_OP_SUM:
    case GE2_OP_MEAN:
        ref_reduce(node, in, out);
        break;
    case GE2_OP_RESHAPE:
        memcpy(out[0].v, in[0].v, sizeof(double) * (size_t)n);
        break;
    case GE2_OP_TRANSPOSE:
        for (int64_t i = 0; i < in[0].shape.dim[0]; i++)
            for (int64_t j = 0; j < in[0].shape.dim[1]; j++)
                out[0].v[j * in[0].shape.dim[0] + i] = in[0].v[i * in[0].shape.dim[1] + j];
        break;
    case GE2_OP_CONCAT:
    case GE2_OP_SLICE:
    case GE2_OP_SLICE_BACKWARD:
        ref_window(node, in, out);
        break;
    case GE2_OP_EXPAND:
    case GE2_OP_REDUCE_TO:
        ref_broadcast(node, in, out);
        break;
    case GE2_OP_CROSS_ENTROPY:
        ref_cross_entropy(node, in, out);
        break;
    case GE2_OP_MSE_LOSS:
        ref_mse(in, out);
        break;
    case GE2_OP_ACCURACY:
        ref_accuracy(in, out);
        break;
    default:
        assert(!"no reference for this op");
    }
}
