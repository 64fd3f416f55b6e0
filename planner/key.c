/* Graph keys: (mode, concrete shape of every input and label).
 *
 * Looked up on every step, so a key is built from the feeds alone (no walk
 * over nodes) and compared by a 64-bit hash first, fields second. The hash
 * takes a word at a time (FNV-1a's step on 64-bit words, then splitmix64's
 * finaliser for the avalanche): byte-wise FNV-1a was ~80 dependent
 * multiplies, half of ge2's own host time in a step (bench/step_overhead).
 */
#include <string.h>

#include "graph/error.h"
#include "graph/rng.h"
#include "planner/plan_internal.h"

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

static uint64_t mix_word(uint64_t h, int64_t v) { return (h ^ (uint64_t)v) * FNV_PRIME; }

void ge2_key_rehash(ge2_key *key)
{
    uint64_t h = mix_word(FNV_OFFSET, key->mode);
    h = mix_word(h, key->n_feeds);
    h = mix_word(h, key->fusions);
    for (int f = 0; f < key->n_feeds; f++) {
        const ge2_shape *s = &key->feed_shapes[f];
        h = mix_word(h, key->feed_ids[f]);
        h = mix_word(h, s->ndim);
        /* Only the dims in use: unused ones may hold garbage in a user's shape. */
        for (int d = 0; d < s->ndim; d++)
            h = mix_word(h, s->dim[d]);
    }
    key->hash = ge2_mix64(h);
}

static bool shape_equal(const ge2_shape *a, const ge2_shape *b)
{
    if (a->ndim != b->ndim)
        return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->dim[d] != b->dim[d])
            return false;
    return true;
}

bool ge2_key_equal(const ge2_key *a, const ge2_key *b)
{
    if (a->hash != b->hash || a->mode != b->mode || a->n_feeds != b->n_feeds || a->fusions != b->fusions)
        return false;
    for (int f = 0; f < a->n_feeds; f++)
        if (a->feed_ids[f] != b->feed_ids[f] || !shape_equal(&a->feed_shapes[f], &b->feed_shapes[f]))
            return false;
    return true;
}

ge2_status ge2_key_init(const ge2_graph *graph, ge2_mode mode, ge2_key *key)
{
    if (!graph || !key || (unsigned)mode >= GE2_MODE_COUNT)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_key_init: graph, key and a valid mode are required");
    memset(key, 0, sizeof *key);
    key->mode = mode;
    GE2_TRY(ge2_fusion_set_parse(NULL, &key->fusions));
    for (int i = 0; i < graph->n_tensors; i++) {
        const ge2_tensor *t = graph->tensors[i];
        if (t->role != GE2_ROLE_INPUT && t->role != GE2_ROLE_LABEL)
            continue;
        if (key->n_feeds == GE2_MAX_FEEDS)
            return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_compile: more than %d inputs and labels (at '%s')",
                             GE2_MAX_FEEDS, t->name);
        key->feed_ids[key->n_feeds] = i;
        key->feed_shapes[key->n_feeds] = t->shape;
        key->n_feeds++;
    }
    ge2_key_rehash(key);
    return GE2_OK;
}
