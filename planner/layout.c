/* The persistent layout: where each parameter (and so its gradient and its
 * optimizer state) sits in the flat pools, and each constant and persistent
 * buffer in its pool.
 * Computed once per graph; every key shares it. */
#include "graph/alloc.h"
#include "graph/error.h"
#include "graph/control.h"
#include "graph/ir.h"
#include "planner/plan_internal.h"

const char *ge2_pool_name(ge2_pool pool)
{
    static const char *const names[GE2_POOL_COUNT] = {"none", "params", "grads", "constants", "inputs", "arena", "buffers", "param copies"};
    return (unsigned)pool < GE2_POOL_COUNT ? names[pool] : "?";
}

ge2_status ge2_layout_new(const ge2_graph *graph, ge2_layout **out)
{
    if (!graph || !out)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_layout_new: graph and out must not be NULL");
    *out = NULL;
    ge2_layout *layout = ge2_calloc(1, sizeof *layout);
    size_t *offset = ge2_calloc(graph->n_tensors > 0 ? (size_t)graph->n_tensors : 1, sizeof *offset);
    if (!layout || !offset) {
        ge2_free(layout);
        ge2_free(offset);
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_layout_new: %d tensors", graph->n_tensors);
    }
    layout->offset = offset;
    layout->n_tensors = graph->n_tensors;

    /* Parameter padding is whole f32 elements so a kernel may treat the
     * pools as one [n] array; constants only need the arena's alignment. */
    const size_t param_align = GE2_PARAM_ALIGN_ELEMS * sizeof(float);
    /* parameters that take weight decay first, then those that do not: one
     * boundary tells the optimizer's sweep which is which */
    for (int group = 0; group < 2; group++) {
        for (int i = 0; i < graph->n_tensors; i++) {
            const ge2_tensor *t = graph->tensors[i];
            if (t->role != GE2_ROLE_PARAMETER || t->no_weight_decay != (group == 1))
                continue;
            if (t->dtype != GE2_F32) {
                char s[64];
                ge2_layout_free(layout);
                return ge2_error(GE2_ERR_DTYPE, "ge2_compile: parameter '%s' %s is %s; the parameter pool holds f32",
                                 t->name, ge2_shape_str(t->shape, s, sizeof s), ge2_dtype_name(t->dtype));
            }
            offset[i] = layout->param_bytes;
            layout->param_bytes += ge2_plan_align(ge2_plan_bytes(t->dtype, t->shape), param_align);
        }
        if (group == 0)
            layout->param_decay_bytes = layout->param_bytes;
    }
    for (int i = 0; i < graph->n_tensors; i++) {
        const ge2_tensor *t = graph->tensors[i];
        size_t bytes = ge2_plan_bytes(t->dtype, t->shape);
        if (t->role == GE2_ROLE_CONSTANT) {
            offset[i] = layout->constant_bytes;
            layout->constant_bytes += ge2_plan_align(bytes, GE2_ARENA_ALIGN);
        } else if (t->role == GE2_ROLE_BUFFER) {
            offset[i] = layout->buffer_bytes;
            layout->buffer_bytes += ge2_plan_align(bytes, GE2_ARENA_ALIGN);
        } else if (t->role == GE2_ROLE_PARAMETER_COPY) {
            /* bf16 element i of the copies pool is f32 element i of the parameters */
            offset[i] = offset[t->copy_of] / 2;
            layout->param_copy_bytes = layout->param_bytes / 2;
        }
    }
    *out = layout;
    return GE2_OK;
}

void ge2_layout_free(ge2_layout *layout)
{
    if (!layout)
        return;
    ge2_free(layout->offset);
    ge2_free(layout);
}
