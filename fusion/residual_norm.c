/* The residual-add + norm rewrite (residual_norm.h). */
#include "fusion/residual_norm.h"

#include "graph/alloc.h"
#include "graph/error.h"
#include "graph/op_support.h"
#include "graph/rewrite.h"
#include "ops/ops.h"

/* The ADD node the norm's x comes from when the fused op can replace the
 * pair; else -1 with the reason in why */
static int fusable_add(const ge2_graph *g, const ge2_node *norm, const ge2_residual_norm *r, const char **why)
{
    const int x = norm->inputs[0], at = g->tensors[x]->producer;
    const ge2_node *add = at >= 0 ? &g->nodes[at] : NULL;
    if (!add || add->op != GE2_OP_ADD || add->phase != GE2_PHASE_FORWARD || add->n_inputs != 2 ||
        add->n_outputs != 1) {
        *why = "its x is not the sum of a forward ADD";
        return -1;
    }
    const ge2_tensor *a = g->tensors[add->inputs[0]], *b = g->tensors[add->inputs[1]], *s = g->tensors[x];
    if (!ge2_shape_equal(a->shape, s->shape) || !ge2_shape_equal(b->shape, s->shape) || a->dtype != s->dtype ||
        b->dtype != s->dtype) {
        *why = "the ADD broadcasts or converts";
        return -1;
    }
    if (norm->n_outputs != ge2_op_def_of(r->norm)->max_outputs) {
        *why = "it keeps no statistics";
        return -1;
    }
    for (int i = 1; i < norm->n_inputs; i++)
        if (g->tensors[norm->inputs[i]]->producer >= at) {
            *why = "its weight or bias is made after the ADD";
            return -1;
        }
    if (r->takes && !r->takes(g, norm, why))
        return -1;
    return at;
}

ge2_status ge2_residual_norm_rewrite(ge2_graph *g, const ge2_residual_norm *r, FILE *log, int *n_fused)
{
    *n_fused = 0;
    if (r->fused < 0)
        return ge2_error(GE2_ERR_STATE, "fusion %s: its op did not register when the library loaded", r->pattern);
    ge2_rewrite_scan s;
    GE2_TRY(ge2_rewrite_scan_begin(g, r->pattern, &s));
    ge2_status st = GE2_OK;
    for (int n = 0; st == GE2_OK && n < g->n_nodes; n++) {
        const ge2_node *norm = &g->nodes[n];
        if (norm->op != r->norm || norm->phase != GE2_PHASE_FORWARD)
            continue;
        const char *why = NULL;
        const int at = fusable_add(g, norm, r, &why);
        if (at < 0) {
            if (log)
                fprintf(log, "fuse: %s: %s %d not fused: %s\n", r->pattern, ge2_op_name(r->norm), n, why);
            continue;
        }
        const ge2_node *add = &g->nodes[at];
        int in[GE2_MAX_INPUTS], out[GE2_MAX_OUTPUTS];
        in[0] = add->inputs[0];
        in[1] = add->inputs[1];
        for (int i = 1; i < norm->n_inputs; i++)
            in[i + 1] = norm->inputs[i];
        out[0] = add->outputs[0];
        for (int i = 0; i < norm->n_outputs; i++)
            out[i + 1] = norm->outputs[i];
        const ge2_attrs attrs = norm->attrs;
        st = ge2_graph_replace_node(g, at, r->fused, in, norm->n_inputs + 1, out, norm->n_outputs + 1, &attrs);
        if (st != GE2_OK)
            break;
        s.drop_node[n] = true;
        ++*n_fused;
        if (log)
            fprintf(log, "fuse: %s: add %d + %s %d -> %s\n", r->pattern, at, ge2_op_name(r->norm), n,
                    ge2_op_name(r->fused));
    }
    if (st == GE2_OK && log && *n_fused == 0)
        fprintf(log, "fuse: %s: nothing fused (no %s of a residual sum)\n", r->pattern, ge2_op_name(r->norm));
    return ge2_rewrite_scan_end(&s, st);
}

ge2_status ge2_residual_norm_cpu(const ge2_launch *l, ge2_status (*norm_cpu)(const ge2_launch *l))
{
    const ge2_dtype dtype = l->in[0].dtype;
    if (dtype != GE2_F32 && dtype != GE2_F64)
        return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_%s: the CPU kernel has no %s version", ge2_op_name(l->node->op),
                         ge2_dtype_name(dtype));
    const int64_t n = ge2_shape_numel(l->in[0].shape);
    const size_t size = ge2_dtype_size(dtype);
    void *s = l->out[0].data ? l->out[0].data : l->out[1].data, *temporary = NULL;
    if (!s && !(s = temporary = ge2_malloc(size * (size_t)(n ? n : 1))))
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_%s (node %d): %lld values of the sum", ge2_op_name(l->node->op),
                         l->node->id, (long long)n);
    if (dtype == GE2_F32)
        for (int64_t i = 0; i < n; i++)
            ((float *)s)[i] = ((const float *)l->in[0].data)[i] + ((const float *)l->in[1].data)[i];
    else
        for (int64_t i = 0; i < n; i++)
            ((double *)s)[i] = ((const double *)l->in[0].data)[i] + ((const double *)l->in[1].data)[i];
    ge2_launch norm = *l;
    norm.n_in = l->n_in - 1;
    norm.in[0] = l->in[0];
    norm.in[0].data = s;
    for (int i = 1; i < norm.n_in; i++)
        norm.in[i] = l->in[i + 1];
    norm.n_out = l->n_out - 1;
    for (int i = 0; i < norm.n_out; i++)
        norm.out[i] = l->out[i + 1];
    const ge2_status st = norm_cpu(&norm);
    ge2_free(temporary);
    return st;
}
