/* The public builder of the key-value cache family. */
#include <string.h>

#include "ops/kv_cache/kv_cache.h"

ge2_status ge2_attention_cached(ge2_graph *graph, ge2_tensor *qkv, ge2_tensor *k_cache, ge2_tensor *v_cache,
                                ge2_tensor *positions, int n_head, ge2_tensor **y)
{
    static const char *const what[4] = {"qkv", "k_cache", "v_cache", "positions"};
    ge2_tensor *ts[4] = {qkv, k_cache, v_cache, positions};
    for (int i = 1; i < 3; i++) /* the op writes them: they must outlive the step, and nothing else may share them */
        if (ts[i] && ts[i]->role != GE2_ROLE_BUFFER)
            return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_attention_cached: %s '%s' is a %s; the caches are "
                             "persistent buffers (ge2_buffer)", what[i], ts[i]->name, ge2_role_name(ts[i]->role));
    if (k_cache && k_cache == v_cache)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_attention_cached: '%s' is both the k and the v cache; each "
                         "needs a buffer of its own", k_cache->name);
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    const ge2_attention_cached_attrs own = {n_head};
    memcpy(a.bytes, &own, sizeof own);
    return ge2_graph_add_forward(graph, GE2_OP_ATTENTION_CACHED, "ge2_attention_cached", ts, what, 4, 1, &a, y);
}
