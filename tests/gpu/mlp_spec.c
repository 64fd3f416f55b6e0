/* Building and driving a spec'd MLP (mlp_spec.h). */
#include "tests/gpu/mlp_spec.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/rng.h"

#define API(call) ck_assert_msg((call) == GE2_OK, "%s: %s", #call, ge2_last_error())

mlp_spec mlp_spec_of(const char *name, int n_layers, const int64_t *dims, int batch, ge2_optimizer_kind kind)
{
    mlp_spec s;
    memset(&s, 0, sizeof s);
    ck_assert_int_le(n_layers, SPEC_MAX_LAYERS);
    s.name = name;
    s.n_layers = n_layers;
    for (int i = 0; i <= n_layers; i++)
        s.dims[i] = dims[i];
    for (int l = 0; l < n_layers; l++)
        s.act[l] = l + 1 < n_layers ? GE2_ACT_RELU : GE2_ACT_NONE;
    s.batch = batch;
    s.optimizer = ge2_optimizer_defaults(kind);
    return s;
}

void spec_open(spec_model *m, const mlp_spec *spec, ge2_device device, uint64_t seed)
{
    memset(m, 0, sizeof *m);
    m->spec = *spec;
    ck_assert_int_le(spec->n_layers, SPEC_MAX_LAYERS);
    API(ge2_graph_new(&m->graph));
    API(ge2_graph_set_seed(m->graph, seed));
    API(ge2_input(m->graph, "x", GE2_F32, ge2_shape2(spec->batch, spec->dims[0]), &m->x));
    API(ge2_label(m->graph, "labels", GE2_I32, ge2_shape1(spec->batch), &m->labels));
    ge2_tensor *h = m->x;
    for (int l = 0; l < spec->n_layers; l++) {
        int64_t in = spec->dims[l], out = spec->dims[l + 1];
        char wn[16], bn[16];
        snprintf(wn, sizeof wn, "w%d", l);
        snprintf(bn, sizeof bn, "b%d", l);
        ge2_init w_init = {GE2_INIT_LINEAR_DEFAULT, 0, 0, 0};
        ge2_init b_init = {GE2_INIT_LINEAR_DEFAULT, 0, 0, in};
        API(ge2_parameter(m->graph, wn, GE2_F32, ge2_shape2(out, in), w_init, &m->params[2 * l]));
        API(ge2_parameter(m->graph, bn, GE2_F32, ge2_shape1(out), b_init, &m->params[2 * l + 1]));
        API(ge2_linear(m->graph, h, m->params[2 * l], m->params[2 * l + 1], spec->act[l], 0.0f, &h));
    }
    API(ge2_cross_entropy(m->graph, h, m->labels, spec->label_smoothing, &m->loss));
    if (spec->accuracy) {
        API(ge2_accuracy(m->graph, h, m->labels, &m->correct));
        API(ge2_mark_output(m->graph, m->correct));
    }
    API(ge2_backward(m->graph, m->loss));
    API(ge2_optimizer(m->graph, &spec->optimizer));
    API(ge2_context_new(device, &m->ctx));
    ge2_compile_options options = ge2_compile_defaults();
    options.precision = GE2_PRECISION_FP32;
    API(ge2_compile(m->ctx, m->graph, &options, &m->program));
}

void spec_close(spec_model *m)
{
    ge2_program_free(m->program);
    ge2_context_free(m->ctx);
    ge2_graph_free(m->graph);
    memset(m, 0, sizeof *m);
}

float spec_step(spec_model *m, uint64_t data_seed, int64_t index)
{
    const mlp_spec *s = &m->spec;
    int64_t features = s->dims[0], classes = s->dims[s->n_layers];
    float *x = malloc((size_t)(s->batch * features) * sizeof *x);
    int32_t *labels = malloc((size_t)s->batch * sizeof *labels);
    ck_assert(x && labels);
    uint64_t base = ge2_splitmix64(data_seed ^ ge2_splitmix64((uint64_t)index));
    for (int64_t i = 0; i < s->batch * features; i++)
        x[i] = (float)(ge2_splitmix64(base + (uint64_t)i) >> 40) * (1.0f / 16777216.0f) - 0.25f;
    for (int i = 0; i < s->batch; i++)
        labels[i] = (int32_t)(ge2_splitmix64(~base + (uint64_t)i) % (uint64_t)classes);
    ge2_feed feeds[2] = {{m->x, x, ge2_shape2(s->batch, features)}, {m->labels, labels, ge2_shape1(s->batch)}};
    API(ge2_program_step(m->program, GE2_MODE_TRAIN, feeds, 2));
    float loss = 0.0f;
    API(ge2_program_read_output(m->program, GE2_MODE_TRAIN, m->loss, &loss, sizeof loss));
    free(x);
    free(labels);
    return loss;
}

float *spec_params(spec_model *m, int64_t *n)
{
    int64_t total = 0;
    for (int l = 0; l < m->spec.n_layers; l++)
        total += m->spec.dims[l + 1] * (m->spec.dims[l] + 1);
    float *all = malloc((size_t)total * sizeof *all), *p = all;
    ck_assert_ptr_nonnull(all);
    for (int l = 0; l < m->spec.n_layers; l++) {
        int64_t w = m->spec.dims[l + 1] * m->spec.dims[l], b = m->spec.dims[l + 1];
        API(ge2_program_get_parameter(m->program, m->params[2 * l], p, (size_t)w * sizeof *p));
        API(ge2_program_get_parameter(m->program, m->params[2 * l + 1], p + w, (size_t)b * sizeof *p));
        p += w + b;
    }
    *n = total;
    return all;
}
