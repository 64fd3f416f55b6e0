/* splitmix64 (Steele, Lea & Flood, OOPSLA 2014): the one mixing function
 * behind ge2's counter-based random streams (initialisers, data shuffling)
 * and the tests' generators, so a value is f(key, counter) everywhere. */
#ifndef GE2_GRAPH_RNG_H
#define GE2_GRAPH_RNG_H

#include <stdint.h>

#include "graph/host_device.h"

/* splitmix64's increment, 2^64 / golden ratio: consecutive counters land far apart. */
#define GE2_MIX64_GAMMA 0x9e3779b97f4a7c15ull

/* splitmix64's finaliser: a bijection on 64 bits with full avalanche. */
static inline GE2_HD uint64_t ge2_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* splitmix64's output for state x (the stream's value at counter x / gamma). */
static inline uint64_t ge2_splitmix64(uint64_t x) { return ge2_mix64(x + GE2_MIX64_GAMMA); }

/* The sequential form: advances *state and returns the next value. */
static inline uint64_t ge2_splitmix64_next(uint64_t *state) { return ge2_mix64(*state += GE2_MIX64_GAMMA); }

#endif /* GE2_GRAPH_RNG_H */
