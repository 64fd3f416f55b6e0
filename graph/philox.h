/* Philox4x32-10 (Salmon, Moraes, Dror & Shaw, SC 2011): the counter-based
 * generator behind ops that draw random numbers inside a step (dropout).
 * A draw is a pure function of (key, counter), so any element is drawn
 * without its neighbours, in any order, and a CPU kernel and a CUDA kernel
 * given the same key and counter get the same bits. For C and CUDA. */
#ifndef GE2_GRAPH_PHILOX_H
#define GE2_GRAPH_PHILOX_H

#include <stdint.h>

#include "graph/host_device.h"

typedef struct ge2_philox4 {
    uint32_t v[4];
} ge2_philox4;

static inline GE2_HD ge2_philox4 ge2_philox4x32_10(ge2_philox4 counter, uint32_t key0, uint32_t key1)
{
    uint32_t c0 = counter.v[0], c1 = counter.v[1], c2 = counter.v[2], c3 = counter.v[3];
    for (int round = 0; round < 10; round++) {
        const uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        const uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0, hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        c0 = hi1 ^ c1 ^ key0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ key1;
        c3 = lo0;
        key0 += 0x9E3779B9u;
        key1 += 0xBB67AE85u;
    }
    ge2_philox4 out = {{c0, c1, c2, c3}};
    return out;
}

/* Draw `group` of random stream `stream` in the step whose random offset
 * (ge2_control.rng_offset) is `offset`, under the graph's seed: the counter
 * layout every op drawing inside a step uses (dropout, attention's
 * dropout). A stream is an op's own (its node id when built), so two ops
 * never share a counter, and a new offset gives every stream new bits. */
static inline GE2_HD ge2_philox4 ge2_philox_step_draw(uint64_t seed, uint64_t offset, uint32_t stream, uint64_t group)
{
    ge2_philox4 counter = {{(uint32_t)group, (uint32_t)(group >> 32), stream, (uint32_t)offset}};
    return ge2_philox4x32_10(counter, (uint32_t)seed, (uint32_t)(seed >> 32) ^ (uint32_t)(offset >> 32));
}

/* A uniform float in [0, 1) from 24 random bits: exact in f32, so every
 * backend compares the same value. */
static inline GE2_HD float ge2_philox_uniform(uint32_t bits) { return (float)(bits >> 8) * (1.0f / 16777216.0f); }

#endif /* GE2_GRAPH_PHILOX_H */
