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
    GE2_ATTRS(ge2_attention_attrs, a)->causal = causal;
    GE2_ATTRS(ge2_attention_attrs, a)->heads_inner = heads_inner;
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
    GE2_ATTRS(ge2_attention_attrs, a)->causal = causal;
    GE2_ATTRS(ge2_attention_attrs, a)->heads_inner = true;
    GE2_ATTRS(ge2_attention_attrs, a)->packed = true;
    return ge2_graph_add_forward(graph, GE2_OP_ATTENTION, "ge2_attention_qkv", ts, what, 1, 2, &a, y);
}

ge2_status ge2_attention_dropout(ge2_graph *graph, ge2_tensor *y, double p)
{
    if (!graph || !y)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_attention_dropout: %s is NULL", graph ? "y" : "graph");
    if (y->graph != graph)
        return ge2_error(GE2_ERR_GRAPH, "ge2_attention_dropout: '%s' belongs to another graph", y->name);
    ge2_node *node = y->producer >= 0 ? &graph->nodes[y->producer] : NULL;
    if (!node || node->op != GE2_OP_ATTENTION || node->outputs[0] != y->id)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_attention_dropout: '%s' is not the output of ge2_attention, "
                         "ge2_attention_bthd or ge2_attention_qkv", y->name);
    if (!(p >= 0 && p < 1))
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_attention_dropout: '%s': p = %g; it must be in [0, 1)",
                         y->name, p);
    /* the backward copies the forward's attrs when it is built */
    if (graph->loss >= 0)
        return ge2_error(GE2_ERR_STATE, "ge2_attention_dropout: '%s': the graph already has its backward", y->name);
    GE2_ATTRS(ge2_attention_attrs, node->attrs)->dropout = p;
    GE2_ATTRS(ge2_attention_attrs, node->attrs)->stream = (uint32_t)node->id; /* unique in the graph, as a dropout's */
    return GE2_OK;
}
