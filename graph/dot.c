/* Viewing a graph: Graphviz DOT and a one-screen text summary. */
#include "graph/graph_internal.h"

static const char *const phase_colour[GE2_PHASE_COUNT] = {
    [GE2_PHASE_FORWARD] = "lightblue",
    [GE2_PHASE_BACKWARD] = "lightsalmon",
    [GE2_PHASE_OPTIMIZER] = "palegreen",
};

/* DOT strings: quotes and backslashes escaped. */
static void put_escaped(FILE *out, const char *s)
{
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', out);
        fputc(*s, out);
    }
}

static void put_tensor(FILE *out, const ge2_tensor *t)
{
    static const char *const shape_of_role[GE2_ROLE_COUNT] = {
        [GE2_ROLE_INPUT] = "invhouse",   [GE2_ROLE_LABEL] = "invhouse",  [GE2_ROLE_PARAMETER] = "box3d",
        [GE2_ROLE_CONSTANT] = "note",    [GE2_ROLE_ACTIVATION] = "ellipse", [GE2_ROLE_BUFFER] = "cylinder",
        [GE2_ROLE_PARAMETER_COPY] = "box3d",
    };
    fprintf(out, "  t%d [shape=%s, label=\"", t->id, shape_of_role[t->role]);
    put_escaped(out, t->name);
    fprintf(out, "\\n%s %s\"%s];\n", ge2_dtype_name(t->dtype), GE2_SHAPE_STR(t->shape),
            t->role == GE2_ROLE_PARAMETER ? ", style=filled, fillcolor=gold"
            : t->is_output                ? ", peripheries=2"
                                          : "");
}

ge2_status ge2_graph_dump_dot(const ge2_graph *graph, FILE *out)
{
    GE2_TRY(ge2_check_graph(graph, "ge2_graph_dump_dot"));
    if (!out)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_graph_dump_dot: out is NULL");
    fprintf(out, "digraph ge2 {\n  rankdir=TB;\n  node [fontname=\"monospace\", fontsize=10];\n");
    for (int i = 0; i < graph->n_tensors; i++)
        put_tensor(out, graph->tensors[i]);
    for (int n = 0; n < graph->n_nodes; n++) {
        const ge2_node *node = &graph->nodes[n];
        fprintf(out, "  n%d [shape=box, style=\"rounded,filled\", fillcolor=%s, label=\"%s\"];\n", n,
                phase_colour[node->phase], ge2_op_name(node->op));
        for (int i = 0; i < node->n_inputs; i++) {
            bool like = i == 1 && (ge2_op_flags(node->op) & GE2_OPF_LIKE1);
            fprintf(out, "  t%d -> n%d%s;\n", node->inputs[i], n, like ? " [style=dashed]" : "");
        }
        for (int i = 0; i < node->n_outputs; i++)
            fprintf(out, "  n%d -> t%d;\n", n, node->outputs[i]);
    }
    for (int i = 0; i < graph->n_tensors; i++)
        if (graph->tensors[i]->grad_of >= 0)
            fprintf(out, "  t%d -> t%d [style=dotted, color=gray, label=\"grad\"];\n", i, graph->tensors[i]->grad_of);
    fprintf(out, "}\n");
    return ferror(out) ? ge2_error(GE2_ERR_IO, "ge2_graph_dump_dot: write failed") : GE2_OK;
}

ge2_status ge2_graph_summary(const ge2_graph *graph, FILE *out)
{
    GE2_TRY(ge2_check_graph(graph, "ge2_graph_summary"));
    if (!out)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_graph_summary: out is NULL");
    int count[GE2_OP_MAX][GE2_PHASE_COUNT] = {{0}};
    int per_phase[GE2_PHASE_COUNT] = {0};
    for (int n = 0; n < graph->n_nodes; n++) {
        count[graph->nodes[n].op][graph->nodes[n].phase]++;
        per_phase[graph->nodes[n].phase]++;
    }
    fprintf(out, "graph: %d tensors, %d nodes (forward %d, backward %d, optimizer %d)\n", graph->n_tensors,
            graph->n_nodes, per_phase[GE2_PHASE_FORWARD], per_phase[GE2_PHASE_BACKWARD], per_phase[GE2_PHASE_OPTIMIZER]);
    fprintf(out, "ops:\n");
    for (int op = 0; op < ge2_op_count(); op++) {
        int total = 0;
        for (int p = 0; p < GE2_PHASE_COUNT; p++)
            total += count[op][p];
        if (total)
            fprintf(out, "  %-22s %4d  (forward %d, backward %d, optimizer %d)\n", ge2_op_name((ge2_op)op), total,
                    count[op][GE2_PHASE_FORWARD], count[op][GE2_PHASE_BACKWARD], count[op][GE2_PHASE_OPTIMIZER]);
    }
    fprintf(out, "parameters:\n");
    int64_t total = 0;
    for (int i = 0; i < graph->n_tensors; i++) {
        const ge2_tensor *t = graph->tensors[i];
        if (t->role != GE2_ROLE_PARAMETER)
            continue;
        fprintf(out, "  %-30s %s %-16s %lld\n", t->name, ge2_dtype_name(t->dtype), GE2_SHAPE_STR(t->shape),
                (long long)ge2_shape_numel(t->shape));
        total += ge2_shape_numel(t->shape);
    }
    fprintf(out, "parameter count: %lld\n", (long long)total);
    return ferror(out) ? ge2_error(GE2_ERR_IO, "ge2_graph_summary: write failed") : GE2_OK;
}
