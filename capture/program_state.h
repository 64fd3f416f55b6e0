/* The program's state as the modules beside capture/ reach it: checkpoint/
 * (saving and loading the pools, the buffers and the control block) and
 * dist/ (broadcasting rank 0's state). Its pools, their layout, the
 * persistent buffers, the backend that moves them, the graphs, the
 * optimizer's config and a host mirror of the control block; nothing of the
 * program's keys, plans or steps (capture/program_internal.h, private to
 * capture/). */
#ifndef GE2_CAPTURE_PROGRAM_STATE_H
#define GE2_CAPTURE_PROGRAM_STATE_H

#include <stdbool.h>

#include "capture/backend.h"
#include "ge2/ge2.h"
#include "graph/control.h"
#include "graph/ir.h"
#include "planner/plan.h"

/* The flat pools (device pointers on CUDA). */
ge2_flat_pools ge2_program_pools(const ge2_program *program);
/* After anything but the optimizer wrote the parameter pool (the initial
 * values, ge2_program_set_parameter, a checkpoint, a broadcast): rounds it
 * into the bf16 copies GEMMs read (pools.copies), ordered before the next
 * step. Nothing to do without copies. */
ge2_status ge2_program_parameters_written(ge2_program *program);
/* The persistent buffers' pool (device memory on CUDA): layout->buffer_bytes. */
void *ge2_program_buffers(const ge2_program *program);
/* The backend and its per-program context. */
const ge2_backend *ge2_program_backend(const ge2_program *program, ge2_backend_ctx **ctx);
const ge2_layout *ge2_program_layout(const ge2_program *program);
const ge2_graph *ge2_program_graph(const ge2_program *program);
/* The user's graph the program was compiled from (its parameters, buffers
 * and their checkpoint aliases, which a later ge2_checkpoint_alias sets
 * there): the same as ge2_program_graph but under precision BF16's storage
 * pass, whose copy keeps the ids. */
const ge2_graph *ge2_program_source_graph(const ge2_program *program);
/* Whether t is a tensor of the program's graph or of the user's graph it
 * was compiled from (same ids), so t->id names it in the program. */
bool ge2_program_has_tensor(const ge2_program *program, const ge2_tensor *t);
/* The optimizer's config, NULL when the graph has none. */
const ge2_optimizer_config *ge2_program_optimizer_config(const ge2_program *program);

/* Host mirror of the control block. Write it, then upload, between steps. */
ge2_control *ge2_program_control_host(ge2_program *program);
/* Copies the whole mirror to the device control block (checkpoint load). */
ge2_status ge2_program_upload_control(ge2_program *program);
/* Waits for the device, then refreshes the whole mirror from it. */
ge2_status ge2_program_download_control(ge2_program *program);

#endif /* GE2_CAPTURE_PROGRAM_STATE_H */
