/* capture/program_inspect.h: the tests' and benchmarks' views of a program. */
#include "capture/program_inspect.h"

#include "capture/program_internal.h"

ge2_key_view ge2_program_key_view(const ge2_program *program, int index)
{
    ge2_key_view v = {0};
    if (index < 0 || index >= program->n_keys)
        return v;
    const ge2_program_key *pk = program->keys[index];
    v.key = &pk->key;
    v.plan = pk->plan;
    v.exec = &pk->exec;
    v.staging = pk->staging;
    v.fence = pk->fence;
    v.in_flight = pk->in_flight;
    v.next_staging = pk->next_staging;
    return v;
}

int ge2_program_last_key(const ge2_program *program, ge2_mode mode)
{
    return mode >= 0 && mode < GE2_MODE_COUNT ? program->last_key[mode] : -1;
}

void *ge2_program_arena(const ge2_program *program, size_t *bytes)
{
    if (bytes)
        *bytes = program->arena_bytes;
    return program->arena;
}

const ge2_program_options *ge2_program_options_of(const ge2_program *program) { return &program->options; }

int ge2_program_rewritten(const ge2_program *program, int pattern)
{
    const int rows = (int)(sizeof program->rewritten / sizeof program->rewritten[0]);
    return pattern >= 0 && pattern < rows ? program->rewritten[pattern] : 0;
}

const ge2_backend *ge2_program_swap_backend(ge2_program *program, const ge2_backend *backend)
{
    const ge2_backend *had = program->backend;
    program->backend = backend;
    return had;
}
