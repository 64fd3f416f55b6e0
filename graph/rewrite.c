/* Node replacement and compaction for the fuse pass's graph rewrites. */
#include <stdio.h>
#include <string.h>

#include "graph/alloc.h"
#include "graph/graph_internal.h"
#include "graph/rewrite.h"

ge2_status ge2_graph_replace_node(ge2_graph *g, int at, ge2_op op, const int *inputs, int n_inputs,
                                  const int *outputs, int n_outputs, const ge2_attrs *attrs)
{
    const ge2_op_def *def = ge2_op_def_of(op);
    if (at < 0 || at >= g->n_nodes || !def || n_inputs < def->min_inputs || n_inputs > def->max_inputs ||
        n_outputs < 1 || n_outputs > def->max_outputs)
        return ge2_error(GE2_ERR_GRAPH, "ge2 rewrite: node %d cannot become %s with %d inputs, %d outputs", at,
                         def ? def->name : "?", n_inputs, n_outputs);
    ge2_node node = g->nodes[at];
    node.op = op;
    node.n_inputs = n_inputs;
    node.n_outputs = n_outputs;
    memcpy(node.inputs, inputs, sizeof(int) * (size_t)n_inputs);
    memcpy(node.outputs, outputs, sizeof(int) * (size_t)n_outputs);
    if (attrs)
        node.attrs = *attrs;
    else
        memset(&node.attrs, 0, sizeof node.attrs);
    ge2_desc in[GE2_MAX_INPUTS], out[GE2_MAX_OUTPUTS];
    for (int i = 0; i < n_inputs; i++) {
        const ge2_tensor *t = g->tensors[inputs[i]];
        if (t->producer >= at)
            return ge2_error(GE2_ERR_GRAPH, "ge2 rewrite: %s at node %d would read '%s', produced later (node %d)",
                             def->name, at, t->name, t->producer);
        in[i] = ge2_infer_input_desc(&node, i, t, t->shape);
    }
    GE2_TRY(def->infer(&node, in, out));
    for (int i = 0; i < n_outputs; i++) {
        const ge2_tensor *t = g->tensors[outputs[i]];
        if (t->dtype != out[i].dtype || !ge2_shape_equal(t->shape, out[i].shape))
            return ge2_error(GE2_ERR_GRAPH, "ge2 rewrite: %s at node %d: output '%s' is %s %s, the op makes %s %s",
                             def->name, at, t->name, ge2_dtype_name(t->dtype), GE2_SHAPE_STR(t->shape),
                             ge2_dtype_name(out[i].dtype), GE2_SHAPE_STR(out[i].shape));
    }
    g->nodes[at] = node;
    for (int i = 0; i < n_outputs; i++)
        g->tensors[outputs[i]]->producer = at;
    g->changes++;
    return GE2_OK;
}

static int remap(const int *map, int id) { return id < 0 ? id : map[id]; }

ge2_status ge2_rewrite_scan_begin(ge2_graph *g, const char *who, ge2_rewrite_scan *s)
{
    const size_t nt = (size_t)(g->n_tensors > 0 ? g->n_tensors : 1), nn = (size_t)(g->n_nodes > 0 ? g->n_nodes : 1);
    *s = (ge2_rewrite_scan){g, ge2_malloc(nt * sizeof(int)), ge2_malloc(nt * sizeof(int)), ge2_calloc(nn, sizeof(bool)),
                            ge2_calloc(nt, sizeof(bool))};
    if (!s->readers || !s->last_reader || !s->drop_node || !s->drop_tensor)
        return ge2_rewrite_scan_end(s, ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2 fusion: %s: %d nodes, %d tensors", who,
                                                 g->n_nodes, g->n_tensors));
    ge2_rewrite_scan_count(s);
    return GE2_OK;
}

void ge2_rewrite_scan_count(ge2_rewrite_scan *s)
{
    const ge2_graph *g = s->graph;
    for (int i = 0; i < g->n_tensors; i++) {
        s->readers[i] = 0;
        s->last_reader[i] = -1;
    }
    for (int n = 0; n < g->n_nodes; n++)
        for (int i = 0; !s->drop_node[n] && i < g->nodes[n].n_inputs; i++) {
            s->readers[g->nodes[n].inputs[i]]++;
            s->last_reader[g->nodes[n].inputs[i]] = n;
        }
}

void ge2_rewrite_redirect(ge2_rewrite_scan *s, int from, int to)
{
    ge2_graph *g = s->graph;
    for (int n = 0; n < g->n_nodes; n++)
        for (int i = 0; !s->drop_node[n] && i < g->nodes[n].n_inputs; i++)
            if (g->nodes[n].inputs[i] == from)
                g->nodes[n].inputs[i] = to;
}

ge2_status ge2_rewrite_scan_end(ge2_rewrite_scan *s, ge2_status st)
{
    bool any = false;
    for (int n = 0; st == GE2_OK && s->drop_node && n < s->graph->n_nodes; n++)
        any = any || s->drop_node[n];
    for (int t = 0; st == GE2_OK && s->drop_tensor && t < s->graph->n_tensors; t++)
        any = any || s->drop_tensor[t];
    if (st == GE2_OK && any)
        st = ge2_graph_compact(s->graph, s->drop_node, s->drop_tensor);
    ge2_free(s->readers);
    ge2_free(s->last_reader);
    ge2_free(s->drop_node);
    ge2_free(s->drop_tensor);
    memset(s, 0, sizeof *s);
    return st;
}

void ge2_graph_move_node(ge2_graph *g, int from, int to)
{
    if (to >= from)
        return;
    const ge2_node moved = g->nodes[from];
    memmove(&g->nodes[to + 1], &g->nodes[to], sizeof *g->nodes * (size_t)(from - to));
    g->nodes[to] = moved;
    for (int n = to; n <= from; n++)
        g->nodes[n].id = n;
    for (int i = 0; i < g->n_tensors; i++) {
        int *p = &g->tensors[i]->producer;
        if (*p == from)
            *p = to;
        else if (*p >= to && *p < from)
            (*p)++;
    }
    g->changes++;
}

ge2_status ge2_graph_new_like(ge2_graph *g, int like, const char *suffix, int *id)
{
    const ge2_tensor *l = g->tensors[like];
    char name[GE2_NAME_MAX];
    const int room = GE2_NAME_MAX - 2 - (int)strlen(suffix);
    snprintf(name, sizeof name, "%.*s.%s", room > 0 ? room : 0, l->name, suffix);
    ge2_tensor *t;
    GE2_TRY(ge2_graph_new_tensor(g, name, NULL, l->dtype, l->shape, GE2_ROLE_ACTIVATION, &t));
    *id = t->id;
    g->changes++;
    return GE2_OK;
}

ge2_status ge2_graph_parameter_copy(ge2_graph *g, int param, int *copy)
{
    const ge2_tensor *p = g->tensors[param];
    if (p->role != GE2_ROLE_PARAMETER || p->dtype != GE2_F32)
        return ge2_error(GE2_ERR_GRAPH, "ge2_compile: '%s' (%s %s) has no bf16 copy: only f32 parameters have one",
                         p->name, ge2_role_name(p->role), ge2_dtype_name(p->dtype));
    for (int i = 0; i < g->n_tensors; i++)
        if (g->tensors[i]->copy_of == param) {
            *copy = i;
            return GE2_OK;
        }
    char name[GE2_NAME_MAX];
    snprintf(name, sizeof name, "%.*s.bf16", GE2_NAME_MAX - 6, p->name);
    ge2_tensor *t;
    GE2_TRY(ge2_graph_new_tensor(g, name, NULL, GE2_BF16, p->shape, GE2_ROLE_PARAMETER_COPY, &t));
    t->copy_of = param;
    *copy = t->id;
    g->changes++;
    return GE2_OK;
}

ge2_status ge2_graph_compact(ge2_graph *g, const bool *drop_node, const bool *drop_tensor)
{
    int *node_map = ge2_malloc(sizeof(int) * (size_t)(g->n_nodes + 1));
    int *tensor_map = ge2_malloc(sizeof(int) * (size_t)(g->n_tensors + 1));
    if (!node_map || !tensor_map) {
        ge2_free(node_map);
        ge2_free(tensor_map);
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2 rewrite: %d nodes, %d tensors", g->n_nodes, g->n_tensors);
    }
    int kept_nodes = 0, kept_tensors = 0;
    for (int n = 0; n < g->n_nodes; n++)
        node_map[n] = drop_node && drop_node[n] ? -1 : kept_nodes++;
    for (int i = 0; i < g->n_tensors; i++)
        tensor_map[i] = drop_tensor && drop_tensor[i] ? -1 : kept_tensors++;
    /* check before changing anything */
    for (int n = 0; n < g->n_nodes; n++) {
        const ge2_node *node = &g->nodes[n];
        if (node_map[n] < 0)
            continue;
        for (int k = 0; k < node->n_inputs + node->n_outputs; k++) {
            int id = k < node->n_inputs ? node->inputs[k] : node->outputs[k - node->n_inputs];
            if (tensor_map[id] < 0) {
                ge2_status st = ge2_error(GE2_ERR_GRAPH, "ge2 rewrite: node %d (%s) still uses dropped tensor '%s'", n,
                                          ge2_op_name(node->op), g->tensors[id]->name);
                ge2_free(node_map);
                ge2_free(tensor_map);
                return st;
            }
        }
    }
    for (int n = 0; n < g->n_nodes; n++) {
        if (node_map[n] < 0)
            continue;
        ge2_node node = g->nodes[n];
        node.id = node_map[n];
        for (int i = 0; i < node.n_inputs; i++)
            node.inputs[i] = tensor_map[node.inputs[i]];
        for (int i = 0; i < node.n_outputs; i++)
            node.outputs[i] = tensor_map[node.outputs[i]];
        g->nodes[node_map[n]] = node;
    }
    g->n_nodes = kept_nodes;
    for (int i = 0; i < g->n_tensors; i++) {
        ge2_tensor *t = g->tensors[i];
        if (tensor_map[i] < 0) {
            ge2_free(t->constant_data);
            ge2_free(t);
            continue;
        }
        t->id = tensor_map[i];
        t->producer = t->producer >= 0 ? node_map[t->producer] : -1;
        t->grad = remap(tensor_map, t->grad);
        t->grad_of = remap(tensor_map, t->grad_of);
        t->copy_of = remap(tensor_map, t->copy_of);
        g->tensors[t->id] = t;
    }
    g->n_tensors = kept_tensors;
    g->loss = remap(tensor_map, g->loss);
    g->changes++;
    ge2_free(node_map);
    ge2_free(tensor_map);
    return GE2_OK;
}
