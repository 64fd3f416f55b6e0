/* The CUDA backend's device loop (ge2_backend.exec_loop): a key's steps in
 * one graph launch.
 *
 * The loop's graph is one WHILE conditional node. Its body is captured
 * from the stream (cudaStreamBeginCaptureToGraph) with the same enqueue
 * code a step's graph comes from: the gather kernel, the slot's launches,
 * the advance kernel, which sets the node's condition from the counters.
 * The condition's default is 1 at every launch, and the program asks for
 * at least one step, so the body runs at least once; how many times is
 * the counters' `remaining`, a value in device memory, so a launch of any
 * length replays the same graph and nothing is captured again.
 */
#include <string.h>

#include "capture/backends/backend_cuda_internal.h"
#include "graph/error.h"
#include "kernels/cuda/step_loop.h"

void ge2_cuda_loop_release(ge2_cuda_exec *ce)
{
    if (ce && ce->loop) {
        cudaGraphExecDestroy(ce->loop);
        ce->loop = NULL;
    }
}

/* The body: what one iteration enqueues on the capturing stream. */
static ge2_status enqueue_iteration(ge2_backend_ctx *ctx, ge2_exec *exec, int slot, const ge2_step_loop *loop,
                                    cudaGraphConditionalHandle handle)
{
    GE2_TRY(ge2_cuda_loop_gather(loop, ctx->stream));
    int broke = -1;
    ge2_status st = ge2_cuda_enqueue_body(ctx, exec, slot, true, &broke);
    if (st != GE2_OK) {
        if (broke < 0)
            return st;
        char why[512];
        snprintf(why, sizeof why, "%s", ge2_last_error());
        const ge2_launch *l = &exec->launches[broke];
        return ge2_error(GE2_ERR_CUDA, "ge2 cuda backend: the device loop's capture broken by node %d (%s): %s",
                         l->node->id,
                         ge2_op_name(l->node->op), why);
    }
    return ge2_cuda_loop_advance(loop, handle, ctx->stream);
}

/* The WHILE node in a new graph, its body captured; instantiated and
 * uploaded into *out. Nothing runs. */
static ge2_status capture_loop(ge2_backend_ctx *ctx, ge2_exec *exec, int slot, const ge2_step_loop *loop,
                               cudaGraphExec_t *out)
{
    cudaGraph_t graph = NULL;
    *out = NULL;
    CUDA_TRY(cudaGraphCreate(&graph, 0));
    ge2_status st = GE2_OK;
    cudaGraphConditionalHandle handle;
    cudaError_t e = cudaGraphConditionalHandleCreate(&handle, graph, 1, cudaGraphCondAssignDefault);
    struct cudaGraphNodeParams params;
    memset(&params, 0, sizeof params);
    params.type = cudaGraphNodeTypeConditional;
    params.conditional.handle = handle;
    params.conditional.type = cudaGraphCondTypeWhile;
    params.conditional.size = 1;
    cudaGraphNode_t node;
    if (e == cudaSuccess)
        e = cudaGraphAddNode(&node, graph, NULL, NULL, 0, &params);
    if (e == cudaSuccess)
        e = cudaStreamBeginCaptureToGraph(ctx->stream, params.conditional.phGraph_out[0], NULL, NULL, 0,
                                          cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess) {
        cudaGraphDestroy(graph);
        return cuda_fail(e, "making the loop's WHILE node");
    }
    st = enqueue_iteration(ctx, exec, slot, loop, handle);
    char why[512] = "";
    if (st != GE2_OK)
        snprintf(why, sizeof why, "%s", ge2_last_error());
    cudaGraph_t body = NULL;
    e = cudaStreamEndCapture(ctx->stream, &body); /* always, so the stream is usable again */
    cudaGetLastError();
    if (st == GE2_OK && e != cudaSuccess)
        st = cuda_fail(e, "cudaStreamEndCapture (the loop's body)");
    else if (st != GE2_OK)
        st = ge2_error(st, "%s", why);
    if (st == GE2_OK) {
        e = cudaGraphInstantiate(out, graph, 0);
        if (e != cudaSuccess) {
            *out = NULL;
            cudaGetLastError();
            st = cuda_fail(e, "cudaGraphInstantiate (the loop)");
        }
    }
    cudaGraphDestroy(graph);
    if (st == GE2_OK && (e = cudaGraphUpload(*out, ctx->stream)) != cudaSuccess) {
        cudaGraphExecDestroy(*out);
        *out = NULL;
        st = cuda_fail(e, "cudaGraphUpload (the loop)");
    }
    return st;
}

bool ge2_cuda_loop_ready(const ge2_backend_ctx *ctx, const ge2_exec *exec)
{
    if (!exec)
        return ctx->device_loop && !ctx->time_launches && !ctx->disable_capture;
    const ge2_cuda_exec *ce = exec->backend_data;
    return ctx->device_loop && ce && exec->captured && !ce->eager && !ce->timing;
}

ge2_status ge2_cuda_exec_loop(ge2_backend_ctx *ctx, ge2_exec *exec, const ge2_step_loop *loop, uint64_t generation)
{
    const int slot = 0; /* the loop's feeds are slot 0's (capture/program_loop.c) */
    ge2_cuda_exec *ce = exec->backend_data;
    if (!ge2_cuda_loop_ready(ctx, exec))
        return ge2_error(GE2_ERR_STATE, "ge2 cuda backend: a device loop needs device_loop and a key whose steps "
                         "replay a graph");
    if (ce->loop && ce->loop_generation != generation)
        ge2_cuda_loop_release(ce);
    if (!ce->loop) {
        GE2_TRY(capture_loop(ctx, exec, slot, loop, &ce->loop));
        ce->loop_generation = generation;
    }
    CUDA_TRY(cudaGraphLaunch(ce->loop, ctx->stream));
    return GE2_OK;
}
