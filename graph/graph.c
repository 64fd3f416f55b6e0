/* The graph builder: leaves (inputs, labels, constants, parameters), nodes,
 * and the checks every public entry point makes on its handles. */
#include <string.h>

#include "graph/alloc.h"
#include "graph/graph_internal.h"

ge2_status ge2_graph_new(ge2_graph **out)
{
    if (!out)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_graph_new: out is NULL");
    ge2_graph *g = ge2_calloc(1, sizeof *g);
    if (!g)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_graph_new: out of memory");
    g->loss = -1;
    *out = g;
    return GE2_OK;
}

void ge2_graph_free(ge2_graph *graph)
{
    if (!graph)
        return;
    for (int i = 0; i < graph->n_tensors; i++) {
        ge2_free(graph->tensors[i]->constant_data);
        ge2_free(graph->tensors[i]);
    }
    ge2_free(graph->tensors);
    ge2_free(graph->nodes);
    ge2_free(graph);
}

ge2_status ge2_graph_set_seed(ge2_graph *graph, uint64_t seed)
{
    GE2_TRY(ge2_check_graph(graph, "ge2_graph_set_seed"));
    graph->seed = seed;
    return GE2_OK;
}

ge2_status ge2_check_graph(const ge2_graph *graph, const char *fn)
{
    if (!graph)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "%s: graph is NULL", fn);
    return GE2_OK;
}

ge2_status ge2_check_tensor(const ge2_graph *graph, const ge2_tensor *t, const char *fn, const char *what)
{
    if (!t)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, what);
    if (t->graph != graph)
        return ge2_error(GE2_ERR_GRAPH, "%s: %s '%s' belongs to another graph", fn, what, t->name);
    return GE2_OK;
}

ge2_tensor *ge2_graph_find(const ge2_graph *graph, const char *name)
{
    if (!graph || !name)
        return NULL;
    for (int i = 0; i < graph->n_tensors; i++)
        if (strcmp(graph->tensors[i]->name, name) == 0)
            return graph->tensors[i];
    return NULL;
}

static ge2_status reserve_tensors(ge2_graph *g, int extra)
{
    if (g->n_tensors + extra <= g->cap_tensors)
        return GE2_OK;
    int cap = g->cap_tensors ? g->cap_tensors : 64;
    while (cap < g->n_tensors + extra)
        cap *= 2;
    ge2_tensor **t = ge2_realloc(g->tensors, (size_t)cap * sizeof *t);
    if (!t)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_graph: out of memory growing to %d tensors", cap);
    g->tensors = t;
    g->cap_tensors = cap;
    return GE2_OK;
}

static ge2_status reserve_nodes(ge2_graph *g)
{
    if (!ge2_reserve((void **)&g->nodes, &g->cap_nodes, g->n_nodes, sizeof *g->nodes, 64))
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_graph: out of memory growing past %d nodes", g->n_nodes);
    return GE2_OK;
}

ge2_status ge2_graph_new_tensor(ge2_graph *g, const char *name, const char *prefix, ge2_dtype dtype, ge2_shape shape,
                                ge2_role role, ge2_tensor **out)
{
    GE2_TRY(reserve_tensors(g, 1));
    char auto_name[GE2_NAME_MAX];
    if (!name) {
        /* "<op>_<id>" is unique unless a user took that name; then add a suffix until it is */
        snprintf(auto_name, sizeof auto_name, "%s_%d", prefix, g->n_tensors);
        for (int k = 1; ge2_graph_find(g, auto_name); k++)
            snprintf(auto_name, sizeof auto_name, "%s_%d_%d", prefix, g->n_tensors, k);
        name = auto_name;
    }
    if (name[0] == '\0' || strlen(name) >= GE2_NAME_MAX)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_graph: tensor name '%s' must have 1..%d characters", name,
                         GE2_NAME_MAX - 1);
    if (ge2_graph_find(g, name))
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_graph: a tensor named '%s' already exists", name);
    ge2_tensor *t = ge2_calloc(1, sizeof *t);
    if (!t)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_graph: out of memory creating tensor '%s'", name);
    t->graph = g;
    t->id = g->n_tensors;
    strcpy(t->name, name);
    t->dtype = dtype;
    t->shape = shape;
    t->role = role;
    t->producer = -1;
    t->grad = -1;
    t->grad_of = -1;
    t->copy_of = -1;
    g->tensors[g->n_tensors++] = t;
    *out = t;
    return GE2_OK;
}

/* Shared checks of the leaf constructors; fn names the public function. */
static ge2_status new_leaf(ge2_graph *g, const char *fn, const char *name, ge2_dtype dtype, ge2_shape shape,
                           ge2_role role, ge2_tensor **out)
{
    GE2_TRY(ge2_check_graph(g, fn));
    if (!out)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    if (!name)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "%s: name is NULL", fn);
    if ((unsigned)dtype >= GE2_DTYPE_COUNT)
        return ge2_error(GE2_ERR_DTYPE, "%s: '%s' has unknown dtype %d", fn, name, (int)dtype);
    if (!ge2_shape_valid(shape))
        return ge2_error(GE2_ERR_SHAPE, "%s: '%s' has invalid shape (ndim %d, each dim >= 1, at most %d dims)", fn,
                         name, shape.ndim, GE2_MAX_DIMS);
    ge2_status st = ge2_graph_new_tensor(g, name, NULL, dtype, shape, role, out);
    if (st != GE2_OK) {
        /* re-attribute the builder's message to the public function (copied: ge2_error writes the same buffer) */
        char why[512];
        snprintf(why, sizeof why, "%s", ge2_last_error() + strlen("ge2_graph: "));
        return ge2_error(st, "%s: %s", fn, why);
    }
    return GE2_OK;
}

ge2_status ge2_input(ge2_graph *graph, const char *name, ge2_dtype dtype, ge2_shape shape, ge2_tensor **out)
{
    return new_leaf(graph, "ge2_input", name, dtype, shape, GE2_ROLE_INPUT, out);
}

ge2_status ge2_label(ge2_graph *graph, const char *name, ge2_dtype dtype, ge2_shape shape, ge2_tensor **out)
{
    return new_leaf(graph, "ge2_label", name, dtype, shape, GE2_ROLE_LABEL, out);
}

ge2_status ge2_constant(ge2_graph *graph, const char *name, ge2_dtype dtype, ge2_shape shape, const void *data,
                        ge2_tensor **out)
{
    ge2_tensor *t;
    if (!data || !out)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_constant: %s of '%s' is NULL", data ? "out" : "data",
                         name ? name : "?");
    GE2_TRY(new_leaf(graph, "ge2_constant", name, dtype, shape, GE2_ROLE_CONSTANT, &t));
    size_t bytes = (size_t)ge2_shape_numel(shape) * ge2_dtype_size(dtype);
    t->constant_data = ge2_malloc(bytes);
    if (!t->constant_data) {
        /* the tensor is the graph's last: take it back so a failure leaves no half-made constant */
        ge2_free(graph->tensors[--graph->n_tensors]);
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_constant: out of memory for '%s' (%zu bytes)", name, bytes);
    }
    memcpy(t->constant_data, data, bytes);
    *out = t;
    return GE2_OK;
}

static ge2_status check_init(const char *fn, const char *name, ge2_shape shape, ge2_init init)
{
    switch (init.kind) {
    case GE2_INIT_ZEROS:
    case GE2_INIT_CONSTANT:
        return GE2_OK;
    case GE2_INIT_UNIFORM:
        if (!(init.a < init.b))
            return ge2_error(GE2_ERR_INVALID_ARGUMENT, "%s: '%s': uniform init needs a < b (a=%g, b=%g)",
                             fn, name, init.a, init.b);
        return GE2_OK;
    case GE2_INIT_NORMAL:
        if (!(init.b >= 0))
            return ge2_error(GE2_ERR_INVALID_ARGUMENT, "%s: '%s': normal init needs std b >= 0 (b=%g)",
                             fn, name, init.b);
        return GE2_OK;
    case GE2_INIT_LINEAR_DEFAULT:
        if (init.fan_in < 0 || (init.fan_in == 0 && shape.ndim != 2))
            return ge2_error(GE2_ERR_INVALID_ARGUMENT,
                             "%s: '%s' %s: linear_default init needs fan_in > 0 unless the weight is "
                             "2-D [out, in] (fan_in=%lld)",
                             fn, name, GE2_SHAPE_STR(shape), (long long)init.fan_in);
        return GE2_OK;
    default:
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "%s: '%s': unknown init kind %d", fn, name, (int)init.kind);
    }
}

ge2_status ge2_parameter(ge2_graph *graph, const char *name, ge2_dtype dtype, ge2_shape shape, ge2_init init,
                         ge2_tensor **out)
{
    if (name && !ge2_dtype_is_float(dtype))
        return ge2_error(GE2_ERR_DTYPE, "ge2_parameter: '%s' is %s; parameters are f32 (or f64 on the CPU)", name,
                         ge2_dtype_name(dtype));
    if (name)
        GE2_TRY(check_init("ge2_parameter", name, shape, init));
    ge2_tensor *t;
    GE2_TRY(new_leaf(graph, "ge2_parameter", name, dtype, shape, GE2_ROLE_PARAMETER, &t));
    t->init = init;
    graph->n_parameters++;
    *out = t;
    return GE2_OK;
}

ge2_status ge2_buffer(ge2_graph *graph, const char *name, ge2_dtype dtype, ge2_shape shape, ge2_init init,
                      ge2_tensor **out)
{
    if (name && !ge2_dtype_is_float(dtype) && dtype != GE2_I64)
        return ge2_error(GE2_ERR_DTYPE, "ge2_buffer: '%s' is %s; buffers are f32 (or f64 on the CPU) or i64", name,
                         ge2_dtype_name(dtype));
    if (name)
        GE2_TRY(check_init("ge2_buffer", name, shape, init));
    ge2_tensor *t;
    GE2_TRY(new_leaf(graph, "ge2_buffer", name, dtype, shape, GE2_ROLE_BUFFER, &t));
    t->init = init;
    *out = t;
    return GE2_OK;
}

ge2_status ge2_parameter_padding(ge2_graph *graph, ge2_tensor *param, int64_t real_rows)
{
    GE2_TRY(ge2_check_graph(graph, "ge2_parameter_padding"));
    GE2_TRY(ge2_check_tensor(graph, param, "ge2_parameter_padding", "param"));
    if (param->role != GE2_ROLE_PARAMETER || param->shape.ndim < 1)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_parameter_padding: '%s' is not a parameter with rows (its role: "
                         "%s, %d dims)", param->name, ge2_role_name(param->role), param->shape.ndim);
    if (real_rows < 1 || real_rows > param->shape.dim[0])
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_parameter_padding: '%s' has %lld rows; %lld real ones is not "
                         "in [1, %lld]", param->name, (long long)param->shape.dim[0], (long long)real_rows,
                         (long long)param->shape.dim[0]);
    param->real_rows = real_rows == param->shape.dim[0] ? 0 : real_rows;
    graph->changes++;
    return GE2_OK;
}

ge2_shape ge2_tensor_shape(const ge2_tensor *t) { return t ? t->shape : ge2_shape0(); }
ge2_dtype ge2_tensor_dtype(const ge2_tensor *t) { return t ? t->dtype : GE2_DTYPE_COUNT; }
const char *ge2_tensor_name(const ge2_tensor *t) { return t ? t->name : NULL; }
ge2_role ge2_tensor_role(const ge2_tensor *t) { return t ? t->role : GE2_ROLE_COUNT; }

ge2_status ge2_mark_output(ge2_graph *graph, ge2_tensor *t)
{
    GE2_TRY(ge2_check_graph(graph, "ge2_mark_output"));
    GE2_TRY(ge2_check_tensor(graph, t, "ge2_mark_output", "tensor"));
    t->is_output = true;
    return GE2_OK;
}

ge2_status ge2_graph_add_node(ge2_graph *graph, ge2_op op, ge2_phase phase, const int *inputs, int n_inputs,
                              int n_outputs, const ge2_attrs *attrs, int *node_id)
{
    GE2_TRY(ge2_check_graph(graph, "ge2_graph_add_node"));
    if (!ge2_op_def_of(op) || (unsigned)phase >= GE2_PHASE_COUNT)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_graph_add_node: unknown op %d or phase %d", (int)op,
                         (int)phase);
    const ge2_op_def *info = ge2_op_def_of(op);
    if (n_inputs < info->min_inputs || n_inputs > info->max_inputs || (n_inputs > 0 && !inputs))
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, GE2_OP_PREFIX "%s: takes %d..%d inputs, got %d", info->name,
                         info->min_inputs, info->max_inputs, n_inputs);
    if (n_outputs < (info->max_outputs ? 1 : 0) || n_outputs > info->max_outputs)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, GE2_OP_PREFIX "%s: makes 1..%d outputs, asked for %d", info->name,
                         info->max_outputs, n_outputs);

    ge2_node node;
    memset(&node, 0, sizeof node);
    node.id = graph->n_nodes;
    node.op = op;
    node.phase = phase;
    node.n_inputs = n_inputs;
    node.n_outputs = n_outputs;
    if (attrs)
        node.attrs = *attrs;
    ge2_desc in[GE2_MAX_INPUTS], out[GE2_MAX_OUTPUTS];
    for (int i = 0; i < n_inputs; i++) {
        if (inputs[i] < 0 || inputs[i] >= graph->n_tensors)
            return ge2_error(GE2_ERR_GRAPH, GE2_OP_PREFIX "%s: input %d is tensor id %d, not in this graph",
                             info->name, i, inputs[i]);
        const ge2_tensor *t = graph->tensors[inputs[i]];
        node.inputs[i] = inputs[i];
        in[i] = ge2_infer_input_desc(&node, i, t, t->shape);
    }
    for (int i = 0; i < n_outputs; i++)
        out[i] = (ge2_desc){GE2_F32, ge2_shape0(), NULL};
    GE2_TRY(info->infer(&node, in, out));

    /* Reserve everything before creating anything: a failure leaves the graph as it was. */
    GE2_TRY(reserve_tensors(graph, n_outputs));
    GE2_TRY(reserve_nodes(graph));
    for (int i = 0; i < n_outputs; i++) {
        ge2_tensor *t;
        ge2_status st = ge2_graph_new_tensor(graph, NULL, info->name, out[i].dtype, out[i].shape,
                                             GE2_ROLE_ACTIVATION, &t);
        if (st != GE2_OK) {
            while (i-- > 0)
                ge2_free(graph->tensors[--graph->n_tensors]);
            return st;
        }
        t->producer = node.id;
        node.outputs[i] = t->id;
    }
    graph->nodes[graph->n_nodes++] = node;
    if (node_id)
        *node_id = node.id;
    return GE2_OK;
}

/* A forward node of op over ts[0, n) (named what[i] in messages, or
 * "inputs[i]" when what is NULL), its id in *node. */
static ge2_status add_forward(ge2_graph *g, ge2_op op, const char *fn, ge2_tensor *const *ts,
                              const char *const *what, int n, int n_out, const ge2_attrs *attrs, int *node)
{
    GE2_TRY(ge2_check_graph(g, fn));
    int ids[GE2_MAX_INPUTS];
    if (n < 0 || n > GE2_MAX_INPUTS || (n > 0 && !ts))
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "%s: %d inputs, 0..%d", fn, n, GE2_MAX_INPUTS);
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "inputs[%d]", i);
        GE2_TRY(ge2_check_tensor(g, ts[i], fn, what ? what[i] : name));
        ids[i] = ts[i]->id;
    }
    return ge2_graph_add_node(g, op, GE2_PHASE_FORWARD, ids, n, n_out, attrs, node);
}

ge2_status ge2_graph_add_forward(ge2_graph *g, ge2_op op, const char *fn, ge2_tensor *const *ts, const char *const *what,
                                 int n, int n_out, const ge2_attrs *attrs, ge2_tensor **y)
{
    if (!y)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "%s: output pointer is NULL", fn);
    int node;
    GE2_TRY(add_forward(g, op, fn, ts, what, n, n_out, attrs, &node));
    *y = g->tensors[g->nodes[node].outputs[0]];
    return GE2_OK;
}

ge2_status ge2_attrs_from_bytes(const char *op_name, const void *attrs, size_t attrs_bytes, ge2_attrs *out)
{
    memset(out, 0, sizeof *out);
    if (attrs_bytes > GE2_OP_ATTRS_BYTES || (attrs_bytes > 0 && !attrs))
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, GE2_OP_PREFIX "%s: %zu bytes of attrs%s; at most %d", op_name,
                         attrs_bytes, attrs ? "" : " from NULL", GE2_OP_ATTRS_BYTES);
    if (attrs_bytes)
        memcpy(out->bytes, attrs, attrs_bytes);
    return GE2_OK;
}

ge2_status ge2_apply(ge2_graph *graph, ge2_op op, ge2_tensor *const *inputs, int n_inputs, const void *attrs,
                     size_t attrs_bytes, int n_outputs, ge2_tensor **outputs)
{
    const ge2_op_def *def = ge2_op_def_of(op);
    if (!def)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_apply: op %d is not registered", (int)op);
    if (!outputs)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_apply: " GE2_OP_PREFIX "%s: outputs is NULL", def->name);
    ge2_attrs a;
    GE2_TRY(ge2_attrs_from_bytes(def->name, attrs, attrs_bytes, &a));
    char fn[GE2_NAME_MAX + 8];
    snprintf(fn, sizeof fn, GE2_OP_PREFIX "%s", def->name);
    int node;
    GE2_TRY(add_forward(graph, op, fn, inputs, NULL, n_inputs, n_outputs, &a, &node));
    for (int i = 0; i < n_outputs; i++)
        outputs[i] = graph->tensors[graph->nodes[node].outputs[i]];
    return GE2_OK;
}
