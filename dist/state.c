/* Rank 0's state into every rank's program: the persistent memory a step
 * reads (parameters, optimizer state, persistent buffers), through host
 * copies and an MPI broadcast. Once, at the start: after it the ranks
 * apply the same averaged update each step and stay identical. */
#include <stdio.h>

#include "capture/program_state.h"
#include "dist/dist_internal.h"
#include "graph/alloc.h"
#include "graph/error.h"

static ge2_status broadcast_region(ge2_dist *dist, ge2_program *program, void *data, size_t bytes,
                                   const char *what)
{
    if (!data || bytes == 0)
        return GE2_OK;
    ge2_backend_ctx *bctx;
    const ge2_backend *b = ge2_program_backend(program, &bctx);
    void *host = ge2_malloc(bytes);
    if (!host)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_dist_broadcast_state: %zu bytes of %s", bytes, what);
    ge2_status st = dist->group.rank == 0 ? b->download(bctx, host, data, bytes) : GE2_OK;
    if (st == GE2_OK)
        st = ge2_dist_broadcast_bytes(dist, host, bytes);
    if (st == GE2_OK && dist->group.rank != 0)
        st = b->upload(bctx, data, host, bytes);
    if (st == GE2_OK)
        st = b->sync(bctx); /* the upload has read host */
    ge2_free(host);
    return st;
}

ge2_status ge2_dist_broadcast_state(ge2_dist *dist, ge2_program *program)
{
    if (!dist || !program)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_dist_broadcast_state: dist and program must not be NULL");
    if (dist->group.world <= 1)
        return GE2_OK;
    GE2_TRY(ge2_program_sync(program)); /* no step still writes them */
    const ge2_flat_pools pools = ge2_program_pools(program);
    /* the same pools everywhere, or the broadcasts below would not match */
    char params[32], slots[32], buffers[32];
    snprintf(params, sizeof params, "%lld", (long long)pools.n);
    snprintf(slots, sizeof slots, "%d", pools.slots);
    snprintf(buffers, sizeof buffers, "%zu", ge2_program_layout(program)->buffer_bytes);
    const char *const names[3] = {"the program's parameter count", "its optimizer state slots",
                                  "its persistent buffer bytes"};
    const char *const values[3] = {params, slots, buffers};
    GE2_TRY(ge2_dist_check_same(dist, names, values, 3));
    GE2_TRY(broadcast_region(dist, program, pools.params, (size_t)pools.n * sizeof(float), "parameters"));
    GE2_TRY(ge2_program_parameters_written(program));
    GE2_TRY(broadcast_region(dist, program, pools.state, (size_t)pools.slots * (size_t)pools.n * sizeof(float),
                             "optimizer state"));
    return broadcast_region(dist, program, ge2_program_buffers(program), ge2_program_layout(program)->buffer_bytes,
                            "persistent buffers");
}
