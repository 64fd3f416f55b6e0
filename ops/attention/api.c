/* The public builder of the attention family. */
#include <string.h>

#include "ops/attention/attention.h"

static ge2_status attention(ge2_graph *graph, const char *api, ge2_tensor *q, ge2_tensor *k, ge2_tensor *v,
                            bool causal, bool heads_inner, ge2_tensor **y)
{
    static const char *const what[3] = {"q", "k", "v"};
    ge2_tensor *ts[3] = {q, k, v};
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    a.attention.causal = causal;
    a.attention.heads_inner = heads_inner;
    return ge2_graph_add_forward(graph, GE2_OP_ATTENTION, api, ts, what, 3, 2, &a, y);
}

ge2_status ge2_attention(ge2_graph *graph, ge2_tensor *q, ge2_tensor *k, ge2_tensor *v, bool causal, ge2_tensor **y)
{
    return attention(graph, "ge2_attention", q, k, v, causal, false, y);
}

ge2_status ge2_attention_bthd(ge2_graph *graph, ge2_tensor *q, ge2_tensor *k, ge2_tensor *v, bool causal,
                              ge2_tensor **y)
{
    return attention(graph, "ge2_attention_bthd", q, k, v, causal, true, y);
}

ge2_status ge2_attention_qkv(ge2_graph *graph, ge2_tensor *qkv, bool causal, ge2_tensor **y)
{
    static const char *const what[1] = {"qkv"};
    ge2_tensor *ts[1] = {qkv};
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    a.attention.causal = causal;
    a.attention.heads_inner = true;
    a.attention.packed = true;
    return ge2_graph_add_forward(graph, GE2_OP_ATTENTION, "ge2_attention_qkv", ts, what, 1, 2, &a, y);
}
