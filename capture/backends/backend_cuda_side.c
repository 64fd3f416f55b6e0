/* The CUDA backend's side stream: in-place launches (the data-parallel
 * all-reduce) run on it beside the step's stream, and a launch that reads
 * what one writes waits for that one alone (backend_cuda.c enqueues them). */
#include "capture/backends/backend_cuda_internal.h"

void ge2_cuda_side_free(ge2_cuda_exec *ce, int n_launches)
{
    destroy_events(ce->side_after, n_launches);
    ge2_free(ce->side_wait);
    ce->side_after = NULL;
    ce->side_wait = NULL;
}

int ge2_cuda_side_wait_of(const ge2_exec *exec, int i)
{
    const ge2_cuda_exec *ce = exec->backend_data;
    return ce->side_wait ? ce->side_wait[i] : SIDE_NONE;
}

/* Whether launch l runs on the side stream: an in-place op (it reads and
 * writes only its inputs, which nothing writes after their producers), so
 * the step goes on while it runs; what reads its inputs waits for it. */
bool ge2_cuda_runs_beside(const ge2_launch *l)
{
    return (ge2_op_flags(l->node->op) & GE2_OPF_IN_PLACE) != 0;
}

/* Whether launch i of a prepared key goes on the side stream: ge2_cuda_runs_beside,
 * and not taken into a fused group */
bool ge2_cuda_goes_beside(const ge2_exec *exec, int i)
{
    const ge2_cuda_exec *ce = exec->backend_data;
    return ce->group_at[i] < 0 && ge2_cuda_runs_beside(&exec->launches[i]);
}

ge2_status ge2_cuda_side_open(ge2_backend_ctx *ctx)
{
    if (ctx->side_stream)
        return GE2_OK;
    CUDA_TRY(cudaStreamCreateWithFlags(&ctx->side_stream, cudaStreamNonBlocking));
    CUDA_TRY(cudaEventCreateWithFlags(&ctx->side_fork, cudaEventDisableTiming));
    CUDA_TRY(cudaEventCreateWithFlags(&ctx->side_done, cudaEventDisableTiming));
    return GE2_OK;
}

/* ce->side_wait and side_after of a prepared key that has side launches,
 * walking its launches and groups as enqueue_all does. A launch that reads
 * what a side launch not yet waited for writes waits for the last such
 * side launch; an optimizer op without inputs reads every gradient through
 * the pools, so it waits for the last side launch so far. A per-parameter
 * update reads only its inputs, so it waits for its own bucket's
 * all-reduce and runs while later buckets are still summed. */
ge2_status ge2_cuda_side_find_waits(const ge2_exec *exec, ge2_cuda_exec *ce)
{
    const int n = exec->n_launches;
    bool any = false;
    for (int i = 0; i < n && !any; i += ce->group_at[i] < 0 ? 1 : ce->groups[ce->group_at[i]].count)
        any = ge2_cuda_goes_beside(exec, i);
    if (!any)
        return GE2_OK;
    ce->side_after = ge2_calloc((size_t)n, sizeof *ce->side_after);
    ce->side_wait = ge2_malloc(sizeof *ce->side_wait * (size_t)n);
    if (!ce->side_after || !ce->side_wait)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2 cuda backend: out of host memory");
    int joined = SIDE_NONE, last_side = SIDE_NONE; /* side launches up to `joined` are waited for */
    for (int i = 0, count = 1; i < n; i += count) {
        count = ce->group_at[i] < 0 ? 1 : ce->groups[ce->group_at[i]].count;
        ce->side_wait[i] = SIDE_NONE;
        if (ge2_cuda_goes_beside(exec, i)) {
            GE2_TRY(new_event(&ce->side_after[i]));
            last_side = i;
            continue;
        }
        int wait = SIDE_NONE;
        for (int k = i; k < i + count; k++) {
            const ge2_node *node = exec->launches[k].node;
            if ((ge2_op_flags(node->op) & GE2_OPF_OPTIMIZER) && node->n_inputs == 0)
                wait = last_side;
            for (int j = last_side; j > joined && j > wait; j--)
                if (ce->side_after[j] && ge2_nodes_share_input(node, exec->launches[j].node)) /* reads what j writes */
                    wait = j;
        }
        if (wait > joined) {
            ce->side_wait[i] = wait;
            joined = wait;
        }
    }
    return GE2_OK;
}

/* The step's stream waits for everything on the side stream so far. */
ge2_status ge2_cuda_side_join(ge2_backend_ctx *ctx)
{
    CUDA_TRY(cudaEventRecord(ctx->side_done, ctx->side_stream));
    CUDA_TRY(cudaStreamWaitEvent(ctx->stream, ctx->side_done, 0));
    return GE2_OK;
}
