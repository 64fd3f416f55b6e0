/* The stability suites' GPT, built with train_gpt's model builder. */
#include "tests/gpu/capture_gpt.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ir.h"
#include "graph/rng.h"

#define API(call) ck_assert_msg((call) == GE2_OK, "%s: %s", #call, ge2_last_error())
#define GPT_MAX_BATCH 32

static int32_t ids[GPT_MAX_BATCH * GPT_BLOCK], targets[GPT_MAX_BATCH * GPT_BLOCK];

void gpt_open(gpt *m, int batch, uint64_t seed, bool disable_capture)
{
    memset(m, 0, sizeof *m);
    ck_assert_int_le(batch, GPT_MAX_BATCH);
    m->batch = batch;
    const gpt_config cfg = {2, 2, 32, GPT_BLOCK, GPT_VOCAB, batch, 0.1, false, 0, true};
    API(gpt_build(&cfg, seed, &m->model));
    API(ge2_backward(m->model.graph, m->model.loss));
    ge2_optimizer_config adamw = ge2_optimizer_defaults(GE2_OPT_ADAMW);
    adamw.lr = 3e-3;
    adamw.weight_decay = 0.1;
    adamw.decay_matrices_only = true;
    adamw.clip_norm = 1.0;
    API(ge2_optimizer(m->model.graph, &adamw));
    API(ge2_context_new(GE2_DEVICE_CUDA, &m->ctx));
    ge2_compile_options options = ge2_compile_defaults();
    options.disable_capture = disable_capture;
    API(ge2_compile(m->ctx, m->model.graph, &options, &m->program));
}

void gpt_close(gpt *m)
{
    ge2_program_free(m->program);
    ge2_context_free(m->ctx);
    ge2_graph_free(m->model.graph);
    memset(m, 0, sizeof *m);
}

float gpt_step(gpt *m, gpt_key key, uint64_t data_seed, int64_t index, bool read_loss)
{
    const int b = key == GPT_GENERATE ? 1 : m->batch, n = b * GPT_BLOCK;
    const uint64_t base = ge2_splitmix64(data_seed ^ ge2_splitmix64((uint64_t)index));
    for (int i = 0; i < n; i++) {
        ids[i] = (int32_t)(ge2_splitmix64(base + (uint64_t)i) % GPT_VOCAB);
        targets[i] = (int32_t)(ge2_splitmix64(~base + (uint64_t)i) % GPT_VOCAB);
    }
    const ge2_mode mode = key == GPT_TRAIN ? GE2_MODE_TRAIN : GE2_MODE_EVAL;
    ge2_feed feeds[2] = {{m->model.idx, ids, ge2_shape2(b, GPT_BLOCK)}, {m->model.targets, targets, ge2_shape1(n)}};
    API(ge2_program_step(m->program, mode, feeds, 2));
    float loss = 0.0f;
    if (read_loss)
        API(ge2_program_read_output(m->program, mode, m->model.loss, &loss, sizeof loss));
    return loss;
}

unsigned char *gpt_state(gpt *m, size_t *bytes)
{
    const ge2_graph *g = m->model.graph;
    size_t total = 0;
    for (int i = 0; i < g->n_tensors; i++)
        if (g->tensors[i]->role == GE2_ROLE_PARAMETER)
            total += (size_t)ge2_shape_numel(g->tensors[i]->shape) * sizeof(float);
    unsigned char *out = malloc(total ? total : 1);
    ck_assert_ptr_nonnull(out);
    size_t at = 0;
    for (int i = 0; i < g->n_tensors; i++) {
        const ge2_tensor *t = g->tensors[i];
        if (t->role != GE2_ROLE_PARAMETER)
            continue;
        const size_t n = (size_t)ge2_shape_numel(t->shape) * sizeof(float);
        API(ge2_program_get_parameter(m->program, t, out + at, n));
        at += n;
    }
    *bytes = total;
    return out;
}
