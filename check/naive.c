#include "check/naive.h"

#include <string.h>

#include "graph/alloc.h"
#include "graph/error.h"
#include "graph/init.h"
#include "graph/specialize.h"

void ge2_naive_free(ge2_naive *n)
{
    if (!n)
        return;
    for (int i = 0; n->data && i < n->n_tensors; i++)
        ge2_free(n->data[i]);
    ge2_free(n->data);
    ge2_free(n->shape);
    ge2_free(n);
}

static size_t tensor_bytes(const ge2_naive *n, const ge2_tensor *t)
{
    return (size_t)ge2_shape_numel(n->shape[t->id]) * ge2_dtype_size(t->dtype);
}

static ge2_status fill(ge2_naive *n, const ge2_feed *feeds, int n_feeds)
{
    const ge2_graph *g = n->graph;
    for (int i = 0; i < g->n_tensors; i++) {
        const ge2_tensor *t = g->tensors[i];
        n->data[i] = ge2_calloc(1, tensor_bytes(n, t) + 1);
        if (!n->data[i])
            return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_naive: out of memory for '%s'", t->name);
        if (t->role == GE2_ROLE_PARAMETER || t->role == GE2_ROLE_BUFFER)
            ge2_init_fill(g, t, n->data[i]);
        else if (t->role == GE2_ROLE_CONSTANT)
            memcpy(n->data[i], t->constant_data, tensor_bytes(n, t));
    }
    for (int f = 0; f < n_feeds; f++)
        memcpy(n->data[feeds[f].tensor->id], feeds[f].data, tensor_bytes(n, feeds[f].tensor));
    return GE2_OK;
}

ge2_status ge2_naive_new(const ge2_graph *g, const ge2_feed *feeds, int n_feeds, ge2_naive **out)
{
    ge2_naive *n = ge2_calloc(1, sizeof *n);
    ge2_shape *feed_shapes = ge2_calloc((size_t)g->n_tensors + 1, sizeof *feed_shapes);
    ge2_status st = GE2_OK;
    if (!n || !feed_shapes) {
        st = ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_naive_new: out of memory");
        goto fail;
    }
    n->graph = g;
    n->n_tensors = g->n_tensors;
    n->shape = ge2_calloc((size_t)g->n_tensors + 1, sizeof *n->shape);
    n->data = ge2_calloc((size_t)g->n_tensors + 1, sizeof *n->data);
    if (!n->shape || !n->data) {
        st = ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_naive_new: out of memory");
        goto fail;
    }
    for (int f = 0; f < n_feeds; f++) {
        if (!feeds[f].tensor || feeds[f].tensor->graph != g || !feeds[f].data) {
            st = ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_naive_new: feed %d is not a tensor of this graph with data", f);
            goto fail;
        }
        feed_shapes[feeds[f].tensor->id] = feeds[f].shape;
    }
    if ((st = ge2_graph_infer_shapes(g, feed_shapes, n->shape)) != GE2_OK || (st = fill(n, feeds, n_feeds)) != GE2_OK)
        goto fail;
    n->mode = GE2_MODE_TRAIN;
    n->control.loss_scale = 1.0f;
    n->control.clip_factor = 1.0f;
    n->control.rng_seed = g->seed; /* as a program's: ops that draw (dropout) draw the same */
    ge2_free(feed_shapes);
    *out = n;
    return GE2_OK;
fail:
    ge2_free(feed_shapes);
    ge2_naive_free(n);
    return st;
}

ge2_status ge2_naive_exec(ge2_naive *n, bool backward)
{
    const ge2_graph *g = n->graph;
    for (int i = 0; i < g->n_nodes; i++) {
        const ge2_node *node = &g->nodes[i];
        if (node->phase == GE2_PHASE_OPTIMIZER || (node->phase == GE2_PHASE_BACKWARD && !backward))
            continue;
        ge2_launch l;
        memset(&l, 0, sizeof l);
        l.node = node;
        l.n_in = node->n_inputs;
        l.n_out = node->n_outputs;
        for (int k = 0; k < node->n_inputs; k++) {
            int id = node->inputs[k];
            l.in[k] = (ge2_view){n->data[id], g->tensors[id]->dtype, n->shape[id]};
        }
        for (int k = 0; k < node->n_outputs; k++) {
            int id = node->outputs[k];
            l.out[k] = (ge2_view){n->data[id], g->tensors[id]->dtype, n->shape[id]};
        }
        l.control = &n->control;
        static const ge2_kernel_settings defaults = GE2_KERNEL_SETTINGS_DEFAULTS;
        l.settings = &defaults;
        l.training = n->mode == GE2_MODE_TRAIN;
        GE2_TRY(ge2_op_run_cpu(&l));
    }
    return GE2_OK;
}

ge2_status ge2_naive_run(const ge2_graph *g, const ge2_feed *feeds, int n_feeds, ge2_naive **out)
{
    GE2_TRY(ge2_naive_new(g, feeds, n_feeds, out));
    ge2_status st = ge2_naive_exec(*out, true);
    if (st != GE2_OK) {
        ge2_naive_free(*out);
        *out = NULL;
    }
    return st;
}
