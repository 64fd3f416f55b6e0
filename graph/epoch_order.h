/* The order of an epoch's examples: a permutation of [0, n) that is a pure
 * function of (seed, epoch), computed one position at a time, so the host's
 * batcher and a device kernel gathering a batch take the same examples
 * without building (or sharing) an order array. For C and CUDA.
 *
 * Definition (documented so a test or another runtime can reproduce it):
 * with h the smallest integer >= 1 such that 4^h >= n, a position p < n is
 * enciphered by a balanced Feistel network on 2h bits, and enciphered again
 * while the result is >= n (cycle walking, which keeps it a bijection on
 * [0, n); fewer than four rounds of it on average, as 4^h < 4n). The
 * network: x = (L, R), the h high and h low bits; four rounds of
 *     (L, R) <- (R, L xor (mix64(R xor k_r) mod 2^h)),
 * mix64 being splitmix64's finaliser (graph/rng.h), and the round keys
 * k_0..k_3 the four words of Philox4x32-10 (graph/philox.h) at counter
 * (epoch low 32 bits, epoch high 32 bits, 0x6f726472 "ordr", 0) under key
 * (seed low 32 bits, seed high 32 bits). */
#ifndef GE2_GRAPH_EPOCH_ORDER_H
#define GE2_GRAPH_EPOCH_ORDER_H

#include <stdint.h>

#include "graph/philox.h"
#include "graph/rng.h"

/* The round keys of an epoch's order: the same for every position. */
typedef struct ge2_epoch_order {
    uint64_t n;
    int half_bits; /* h */
    uint32_t key[4];
} ge2_epoch_order;

static inline GE2_HD ge2_epoch_order ge2_epoch_order_of(uint64_t seed, uint64_t epoch, uint64_t n)
{
    ge2_epoch_order o;
    o.n = n;
    o.half_bits = 1;
    while (o.half_bits < 32 && ((uint64_t)1 << (2 * o.half_bits)) < n)
        o.half_bits++;
    ge2_philox4 counter = {{(uint32_t)epoch, (uint32_t)(epoch >> 32), 0x6f726472u, 0u}};
    const ge2_philox4 k = ge2_philox4x32_10(counter, (uint32_t)seed, (uint32_t)(seed >> 32));
    for (int r = 0; r < 4; r++)
        o.key[r] = k.v[r];
    return o;
}

/* The example at `position` (< o->n) of the epoch's order. */
static inline GE2_HD uint64_t ge2_epoch_order_at(const ge2_epoch_order *o, uint64_t position)
{
    const int h = o->half_bits;
    const uint64_t mask = h >= 32 ? 0xffffffffull : ((uint64_t)1 << h) - 1;
    uint64_t x = position;
    do {
        uint64_t left = x >> h, right = x & mask;
        for (int r = 0; r < 4; r++) {
            const uint64_t f = ge2_mix64(right ^ o->key[r]) & mask;
            const uint64_t next = left ^ f;
            left = right;
            right = next;
        }
        x = (left << h) | right;
    } while (x >= o->n);
    return x;
}

/* The example at position k of rank `rank`'s shard of the epoch among
 * `world` ranks (PyTorch's DistributedSampler): positions rank, rank +
 * world, ... of the order (the examples themselves, 0, 1, ..., without
 * shuffle), past its end the order's first examples again (the padding
 * that makes every shard as long; fewer than world of them). One process
 * is rank 0 of 1: the order itself. */
static inline GE2_HD uint64_t ge2_epoch_shard_at(const ge2_epoch_order *o, int shuffle, int rank, int world,
                                                 uint64_t k)
{
    uint64_t at = (uint64_t)rank + k * (uint64_t)world;
    if (at >= o->n)
        at -= o->n;
    return shuffle ? ge2_epoch_order_at(o, at) : at;
}

#endif /* GE2_GRAPH_EPOCH_ORDER_H */
