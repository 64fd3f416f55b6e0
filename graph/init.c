/* Counter-based initialisation: value i of a parameter is computed from
 * (key, i) alone with splitmix64's finaliser, so fills can be done in any
 * order, in parallel, or on another machine with the same result. */
#include <math.h>
#include <string.h>

#include "graph/init.h"
#include "graph/rng.h"

uint64_t ge2_init_key(uint64_t seed, const char *name)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    return ge2_mix64(ge2_mix64(seed + GE2_MIX64_GAMMA) ^ h);
}

double ge2_init_uniform01(uint64_t key, uint64_t counter)
{
    uint64_t bits = ge2_mix64(key ^ ge2_mix64(counter * GE2_MIX64_GAMMA + 1));
    return (double)(bits >> 11) * (1.0 / 9007199254740992.0); /* 53 bits */
}

static double init_value(const ge2_init *init, uint64_t key, int64_t i, double bound)
{
    switch (init->kind) {
    case GE2_INIT_CONSTANT:
        return init->a;
    case GE2_INIT_UNIFORM:
        return init->a + (init->b - init->a) * ge2_init_uniform01(key, (uint64_t)i);
    case GE2_INIT_NORMAL: {
        /* Box-Muller on counters 2i, 2i+1; 1-u keeps log away from 0. */
        double u1 = 1.0 - ge2_init_uniform01(key, 2 * (uint64_t)i);
        double u2 = ge2_init_uniform01(key, 2 * (uint64_t)i + 1);
        return init->a + init->b * sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
    }
    case GE2_INIT_LINEAR_DEFAULT:
        return bound * (2.0 * ge2_init_uniform01(key, (uint64_t)i) - 1.0);
    default:
        return 0.0;
    }
}

void ge2_init_fill(const ge2_graph *g, const ge2_tensor *param, void *dst)
{
    int64_t n = ge2_shape_numel(param->shape);
    uint64_t key = ge2_init_key(g->seed, param->name);
    double bound = 0.0;
    if (param->init.kind == GE2_INIT_LINEAR_DEFAULT) {
        /* fan_in 0 is only accepted for a 2-D weight [out, in] (ge2_parameter checks) */
        int64_t fan_in = param->init.fan_in > 0 ? param->init.fan_in : param->shape.dim[1];
        bound = 1.0 / sqrt((double)fan_in);
    }
    /* padding rows (ge2_parameter_padding) start at zero */
    const int64_t real = param->real_rows > 0 ? param->real_rows * (n / param->shape.dim[0]) : n;
    for (int64_t i = 0; i < n; i++) {
        double v = i < real ? init_value(&param->init, key, i, bound) : 0.0;
        if (param->dtype == GE2_F64)
            ((double *)dst)[i] = v;
        else if (param->dtype == GE2_I64)
            ((int64_t *)dst)[i] = (int64_t)v;
        else
            ((float *)dst)[i] = (float)v;
    }
}
