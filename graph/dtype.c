/* Names and sizes of the small enums, and shape arithmetic. */
#include <stdio.h>
#include <string.h>

#include "graph/graph_internal.h"

size_t ge2_dtype_size(ge2_dtype dtype)
{
    static const size_t sizes[GE2_DTYPE_COUNT] = {
        [GE2_F32] = 4, [GE2_F64] = 8, [GE2_BF16] = 2, [GE2_F16] = 2, [GE2_I32] = 4, [GE2_U8] = 1, [GE2_I64] = 8,
    };
    return (unsigned)dtype < GE2_DTYPE_COUNT ? sizes[dtype] : 0;
}

const char *ge2_dtype_name(ge2_dtype dtype)
{
    static const char *const names[GE2_DTYPE_COUNT] = {
        [GE2_F32] = "f32", [GE2_F64] = "f64", [GE2_BF16] = "bf16", [GE2_F16] = "f16", [GE2_I32] = "i32", [GE2_U8] = "u8", [GE2_I64] = "i64",
    };
    return (unsigned)dtype < GE2_DTYPE_COUNT ? names[dtype] : "?";
}

const char *ge2_role_name(ge2_role role)
{
    static const char *const names[GE2_ROLE_COUNT] = {
        [GE2_ROLE_INPUT] = "input",         [GE2_ROLE_LABEL] = "label",           [GE2_ROLE_PARAMETER] = "parameter",
        [GE2_ROLE_CONSTANT] = "constant",   [GE2_ROLE_ACTIVATION] = "activation", [GE2_ROLE_BUFFER] = "buffer",
        [GE2_ROLE_PARAMETER_COPY] = "parameter copy",
    };
    return (unsigned)role < GE2_ROLE_COUNT ? names[role] : "?";
}

/* The index of name in names[0, count) (entries may be NULL), or -1 */
static int name_index(const char *const *names, int count, const char *name)
{
    for (int i = 0; i < count; i++)
        if (names[i] && strcmp(name, names[i]) == 0)
            return i;
    return -1;
}

/* What every ge2_*_parse does: *out = the index of name in names, or an
 * error from fn naming what was asked and the choices */
static ge2_status parse_name(const char *fn, const char *what, const char *choices, const char *const *names,
                             int count, const char *name, int *out)
{
    if (!name || !out)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "%s: name and out must not be NULL", fn);
    const int i = name_index(names, count, name);
    if (i < 0)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "%s: unknown %s '%s' (%s)", fn, what, name, choices);
    *out = i;
    return GE2_OK;
}

static const char *const device_names[GE2_DEVICE_COUNT] = {
    [GE2_DEVICE_CPU] = "cpu", [GE2_DEVICE_CUDA] = "cuda", [GE2_DEVICE_AUTO] = "auto",
};

const char *ge2_device_name(ge2_device device)
{
    return (unsigned)device < GE2_DEVICE_COUNT ? device_names[device] : "?";
}

ge2_status ge2_device_parse(const char *name, ge2_device *out)
{
    int d;
    GE2_TRY(parse_name("ge2_device_parse", "device", "cpu, cuda, auto", device_names, GE2_DEVICE_COUNT, name, &d));
    *out = (ge2_device)d;
    return GE2_OK;
}

static const char *const activation_names[GE2_ACT_COUNT] = {
    [GE2_ACT_NONE] = "none",           [GE2_ACT_RELU] = "relu",         [GE2_ACT_LEAKY_RELU] = "leaky_relu",
    [GE2_ACT_GELU_TANH] = "gelu_tanh", [GE2_ACT_GELU_ERF] = "gelu_erf", [GE2_ACT_SIGMOID] = "sigmoid",
    [GE2_ACT_TANH] = "tanh",           [GE2_ACT_SILU] = "silu",
};

const char *ge2_activation_name(ge2_activation act)
{
    return (unsigned)act < GE2_ACT_COUNT ? activation_names[act] : "?";
}

ge2_status ge2_activation_parse(const char *name, ge2_activation *out)
{
    /* "gelu" alone means the tanh approximation, as most MLP code uses it. */
    if (name && out && strcmp(name, "gelu") == 0) {
        *out = GE2_ACT_GELU_TANH;
        return GE2_OK;
    }
    int a;
    GE2_TRY(parse_name("ge2_activation_parse", "activation",
                       "none, relu, leaky_relu, gelu, gelu_tanh, gelu_erf, sigmoid, tanh, silu", activation_names,
                       GE2_ACT_COUNT, name, &a));
    *out = (ge2_activation)a;
    return GE2_OK;
}

static const char *const precision_names[GE2_PRECISION_COUNT] = {
    [GE2_PRECISION_FP32] = "fp32", [GE2_PRECISION_TF32] = "tf32", [GE2_PRECISION_BF16] = "bf16",
    [GE2_PRECISION_FP16] = "fp16"};

const char *ge2_precision_name(ge2_precision precision)
{
    return (unsigned)precision < GE2_PRECISION_COUNT ? precision_names[precision] : "?";
}

ge2_status ge2_precision_parse(const char *name, ge2_precision *out)
{
    int p;
    GE2_TRY(parse_name("ge2_precision_parse", "precision", "fp32, tf32, bf16, fp16", precision_names, GE2_PRECISION_COUNT,
                       name, &p));
    *out = (ge2_precision)p;
    return GE2_OK;
}

int64_t ge2_shape_numel(ge2_shape shape)
{
    int64_t n = 1;
    for (int i = 0; i < shape.ndim; i++)
        n *= shape.dim[i];
    return n;
}

char *ge2_shape_str(ge2_shape shape, char *buf, size_t size)
{
    if (!buf || size == 0)
        return buf;
    size_t at = 0;
    buf[0] = '\0';
    at += (size_t)snprintf(buf + at, size - at, "[");
    for (int i = 0; i < shape.ndim && i < GE2_MAX_DIMS && at < size; i++)
        at += (size_t)snprintf(buf + at, size - at, i ? ",%lld" : "%lld", (long long)shape.dim[i]);
    if (at < size)
        snprintf(buf + at, size - at, "]");
    return buf;
}

bool ge2_shape_valid(ge2_shape shape)
{
    if (shape.ndim < 0 || shape.ndim > GE2_MAX_DIMS)
        return false;
    for (int i = 0; i < shape.ndim; i++)
        if (shape.dim[i] < 1)
            return false;
    return true;
}

bool ge2_shape_equal(ge2_shape a, ge2_shape b)
{
    if (a.ndim != b.ndim)
        return false;
    for (int i = 0; i < a.ndim; i++)
        if (a.dim[i] != b.dim[i])
            return false;
    return true;
}

bool ge2_shape_broadcast(ge2_shape a, ge2_shape b, ge2_shape *out)
{
    ge2_shape r = ge2_shape0();
    r.ndim = a.ndim > b.ndim ? a.ndim : b.ndim;
    for (int i = 0; i < r.ndim; i++) {
        /* walk from the right; a missing dim acts as 1 */
        int ia = a.ndim - 1 - i, ib = b.ndim - 1 - i;
        int64_t da = ia >= 0 ? a.dim[ia] : 1, db = ib >= 0 ? b.dim[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return false;
        r.dim[r.ndim - 1 - i] = da == 1 ? db : da;
    }
    *out = r;
    return true;
}

bool ge2_shape_broadcasts_to(ge2_shape small, ge2_shape big)
{
    ge2_shape r;
    return small.ndim <= big.ndim && ge2_shape_broadcast(small, big, &r) && ge2_shape_equal(r, big);
}
