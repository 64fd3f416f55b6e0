/* The stability suites' model, built and driven through the public API. */
#include "tests/gpu/capture_mlp.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/rng.h"

/* Test-side buffers for the largest batch a suite feeds. */
#define MLP_MAX_BATCH 256

static float mlp_x_buf[MLP_MAX_BATCH * MLP_IN];
static int32_t mlp_label_buf[MLP_MAX_BATCH];

#define API(call) ck_assert_msg((call) == GE2_OK, "%s: %s", #call, ge2_last_error())

static const char *const param_names[MLP_N_PARAMS] = {"w1", "b1", "w2", "b2", "w3", "b3"};
static const int64_t param_rows[MLP_N_PARAMS] = {MLP_H1, MLP_H1, MLP_H2, MLP_H2, MLP_OUT, MLP_OUT};
static const int64_t param_cols[MLP_N_PARAMS] = {MLP_IN, 1, MLP_H1, 1, MLP_H2, 1};

int64_t mlp_param_numel(int i)
{
    return param_rows[i] * param_cols[i];
}

int64_t mlp_total_numel(void)
{
    int64_t n = 0;
    for (int i = 0; i < MLP_N_PARAMS; i++)
        n += mlp_param_numel(i);
    return n;
}

static ge2_tensor *dense(mlp *m, ge2_tensor *x, int layer, int64_t in, int64_t out, ge2_activation act)
{
    ge2_init w_init = {GE2_INIT_LINEAR_DEFAULT, 0, 0, 0};
    ge2_init b_init = {GE2_INIT_LINEAR_DEFAULT, 0, 0, in};
    ge2_tensor *w, *b, *y;
    API(ge2_parameter(m->graph, param_names[2 * layer], GE2_F32, ge2_shape2(out, in), w_init, &w));
    API(ge2_parameter(m->graph, param_names[2 * layer + 1], GE2_F32, ge2_shape1(out), b_init, &b));
    m->params[2 * layer] = w;
    m->params[2 * layer + 1] = b;
    API(ge2_linear(m->graph, x, w, b, act, 0.0f, &y));
    return y;
}

void mlp_open(mlp *m, ge2_device device, int batch, uint64_t seed, double lr, bool disable_capture)
{
    mlp_open_mode(m, device, batch, seed, lr, disable_capture, GE2_UPDATE_AUTO);
}

static void open_model(mlp *m, ge2_device device, int batch, uint64_t seed, double lr,
                       const ge2_compile_options *options, ge2_update_mode update_mode);

void mlp_open_mode(mlp *m, ge2_device device, int batch, uint64_t seed, double lr, bool disable_capture,
                   ge2_update_mode update_mode)
{
    ge2_compile_options options = ge2_compile_defaults();
    options.precision = GE2_PRECISION_FP32;
    options.disable_capture = disable_capture;
    open_model(m, device, batch, seed, lr, &options, update_mode);
}

void mlp_open_with(mlp *m, ge2_device device, int batch, uint64_t seed, double lr,
                   const ge2_compile_options *options)
{
    open_model(m, device, batch, seed, lr, options, GE2_UPDATE_AUTO);
}

static void open_model(mlp *m, ge2_device device, int batch, uint64_t seed, double lr,
                       const ge2_compile_options *options, ge2_update_mode update_mode)
{
    memset(m, 0, sizeof *m);
    API(ge2_graph_new(&m->graph));
    API(ge2_graph_set_seed(m->graph, seed));
    API(ge2_input(m->graph, "x", GE2_F32, ge2_shape2(batch, MLP_IN), &m->x));
    API(ge2_label(m->graph, "labels", GE2_I32, ge2_shape1(batch), &m->labels));
    ge2_tensor *h = dense(m, m->x, 0, MLP_IN, MLP_H1, GE2_ACT_RELU);
    h = dense(m, h, 1, MLP_H1, MLP_H2, GE2_ACT_RELU);
    ge2_tensor *logits = dense(m, h, 2, MLP_H2, MLP_OUT, GE2_ACT_NONE);
    API(ge2_cross_entropy(m->graph, logits, m->labels, 0.0f, &m->loss));
    API(ge2_backward(m->graph, m->loss));
    ge2_optimizer_config opt = ge2_optimizer_defaults(GE2_OPT_ADAM);
    opt.lr = lr;
    opt.update_mode = update_mode;
    API(ge2_optimizer(m->graph, &opt));

    API(ge2_context_new(device, &m->ctx));
    API(ge2_compile(m->ctx, m->graph, options, &m->program));
}

void mlp_close(mlp *m)
{
    ge2_program_free(m->program);
    ge2_context_free(m->ctx);
    ge2_graph_free(m->graph);
    memset(m, 0, sizeof *m);
}

/* splitmix64 as a counter-based stream: batch `index` needs no earlier batches. */
void mlp_batch(uint64_t data_seed, int64_t index, int batch, float *x, int32_t *labels)
{
    uint64_t base = ge2_splitmix64(data_seed ^ ge2_splitmix64((uint64_t)index));
    for (int64_t i = 0; i < (int64_t)batch * MLP_IN; i++)
        x[i] = (float)(ge2_splitmix64(base + (uint64_t)i) >> 40) * (1.0f / 16777216.0f);
    for (int i = 0; i < batch; i++)
        labels[i] = (int32_t)(ge2_splitmix64(~base + (uint64_t)i) % MLP_OUT);
}

/* Batch `index` written into x and labels, then one step on it. */
static float step_on(mlp *m, uint64_t data_seed, int64_t index, int batch, bool read_loss, float *x,
                     int32_t *labels)
{
    mlp_batch(data_seed, index, batch, x, labels);
    ge2_feed feeds[2] = {
        {m->x, x, ge2_shape2(batch, MLP_IN)},
        {m->labels, labels, ge2_shape1(batch)},
    };
    API(ge2_program_step(m->program, GE2_MODE_TRAIN, feeds, 2));
    float loss = 0.0f;
    if (read_loss)
        API(ge2_program_read_output(m->program, GE2_MODE_TRAIN, m->loss, &loss, sizeof loss));
    return loss;
}

float mlp_step(mlp *m, uint64_t data_seed, int64_t index, int batch, bool read_loss)
{
    ck_assert_int_le(batch, MLP_MAX_BATCH);
    return step_on(m, data_seed, index, batch, read_loss, mlp_x_buf, mlp_label_buf);
}

float mlp_step_in_place(mlp *m, uint64_t data_seed, int64_t index, int batch, bool read_loss)
{
    ge2_feed feeds[2] = {{m->x, NULL, ge2_shape2(batch, MLP_IN)}, {m->labels, NULL, ge2_shape1(batch)}};
    void *buf[2];
    API(ge2_program_feed_buffers(m->program, GE2_MODE_TRAIN, feeds, 2, buf));
    return step_on(m, data_seed, index, batch, read_loss, buf[0], buf[1]);
}

float *mlp_get_params(mlp *m)
{
    float *all = malloc((size_t)mlp_total_numel() * sizeof(float));
    ck_assert_ptr_nonnull(all);
    float *p = all;
    for (int i = 0; i < MLP_N_PARAMS; i++) {
        size_t bytes = (size_t)mlp_param_numel(i) * sizeof(float);
        API(ge2_program_get_parameter(m->program, m->params[i], p, bytes));
        p += mlp_param_numel(i);
    }
    return all;
}

double mlp_rel_diff(const float *a, const float *b)
{
    double worst = 0.0;
    for (int i = 0; i < MLP_N_PARAMS; i++) {
        double diff = 0.0, norm = 0.0;
        for (int64_t j = 0; j < mlp_param_numel(i); j++) {
            ck_assert_msg(isfinite(a[j]) && isfinite(b[j]), "%s[%lld] is not finite", param_names[i],
                          (long long)j);
            double d = (double)a[j] - (double)b[j];
            diff += d * d;
            norm += (double)b[j] * b[j];
        }
        worst = fmax(worst, norm > 0.0 ? sqrt(diff / norm) : sqrt(diff));
        a += mlp_param_numel(i);
        b += mlp_param_numel(i);
    }
    return worst;
}

const char *mlp_worst_element(const float *a, const float *b, const float *base, char *buf, size_t size)
{
    double worst = -1.0;
    int64_t at = 0;
    for (int64_t j = 0; j < mlp_total_numel(); j++) {
        double d = fabs((double)a[j] - (double)b[j]);
        if (d > worst)
            worst = d, at = j;
    }
    int i = 0;
    int64_t local = at;
    while (i < MLP_N_PARAMS - 1 && local >= mlp_param_numel(i))
        local -= mlp_param_numel(i++);
    snprintf(buf, size, "worst element %s[%lld]: %.9g vs %.9g (from %.9g)", param_names[i], (long long)local,
             a[at], b[at], base ? base[at] : 0.0f);
    return buf;
}
