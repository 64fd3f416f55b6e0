/* The stability suites' CNN, built and driven through the public API. */
#include "tests/gpu/capture_cnn.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ir.h"
#include "tests/gpu/capture_mlp.h"

#define API(call) ck_assert_msg((call) == GE2_OK, "%s: %s", #call, ge2_last_error())
#define CNN_MAX_BATCH 256

static float x_buf[CNN_MAX_BATCH * MLP_IN];
static int32_t label_buf[CNN_MAX_BATCH];

static ge2_tensor *block(cnn *m, ge2_tensor *x, int index, int64_t out)
{
    int64_t in = ge2_tensor_shape(x).dim[1];
    char name[32];
    snprintf(name, sizeof name, "conv%d.weight", index);
    ge2_tensor *w, *h;
    API(ge2_parameter(m->graph, name, GE2_F32, ge2_shape4(out, in, 3, 3),
                      (ge2_init){GE2_INIT_LINEAR_DEFAULT, 0, 0, in * 9}, &w));
    ge2_conv2d_params conv = ge2_conv2d_defaults();
    conv.padding[0] = conv.padding[1] = 1;
    API(ge2_conv2d(m->graph, x, w, NULL, &conv, &h));
    snprintf(name, sizeof name, "bn%d", index);
    API(ge2_batch_norm_layer(m->graph, name, h, 0.1, 1e-5, &h));
    API(ge2_activate(m->graph, h, GE2_ACT_RELU, 0.0f, &h));
    ge2_pool2d_params pool = ge2_pool2d_square(2, 2, 0);
    API(ge2_max_pool2d(m->graph, h, &pool, &h));
    return h;
}

static ge2_tensor *dense(cnn *m, ge2_tensor *x, int index, int64_t out, ge2_activation act)
{
    int64_t in = ge2_tensor_shape(x).dim[1];
    char wname[32], bname[32];
    snprintf(wname, sizeof wname, "fc%d.weight", index);
    snprintf(bname, sizeof bname, "fc%d.bias", index);
    ge2_tensor *w, *b, *y;
    ge2_init init = {GE2_INIT_LINEAR_DEFAULT, 0, 0, in};
    API(ge2_parameter(m->graph, wname, GE2_F32, ge2_shape2(out, in), init, &w));
    API(ge2_parameter(m->graph, bname, GE2_F32, ge2_shape1(out), init, &b));
    API(ge2_linear(m->graph, x, w, b, act, 0.0f, &y));
    return y;
}

void cnn_open(cnn *m, int batch, uint64_t seed, bool disable_capture, ge2_precision precision)
{
    memset(m, 0, sizeof *m);
    API(ge2_graph_new(&m->graph));
    API(ge2_graph_set_seed(m->graph, seed));
    API(ge2_input(m->graph, "x", GE2_F32, ge2_shape4(batch, 1, 28, 28), &m->x));
    API(ge2_label(m->graph, "labels", GE2_I32, ge2_shape1(batch), &m->labels));
    ge2_tensor *h = block(m, m->x, 1, 8);
    h = block(m, h, 2, 16);
    API(ge2_flatten(m->graph, h, &h));
    h = dense(m, h, 1, 32, GE2_ACT_RELU);
    h = dense(m, h, 2, MLP_OUT, GE2_ACT_NONE);
    API(ge2_cross_entropy(m->graph, h, m->labels, 0.0f, &m->loss));
    API(ge2_backward(m->graph, m->loss));
    ge2_optimizer_config adam = ge2_optimizer_defaults(GE2_OPT_ADAM);
    API(ge2_optimizer(m->graph, &adam));
    API(ge2_context_new(GE2_DEVICE_CUDA, &m->ctx));
    ge2_compile_options options = ge2_compile_defaults();
    options.disable_capture = disable_capture;
    options.precision = precision;
    API(ge2_compile(m->ctx, m->graph, &options, &m->program));
}

void cnn_close(cnn *m)
{
    ge2_program_free(m->program);
    ge2_context_free(m->ctx);
    ge2_graph_free(m->graph);
    memset(m, 0, sizeof *m);
}

float cnn_step(cnn *m, ge2_mode mode, uint64_t data_seed, int64_t index, int batch, bool read_loss)
{
    ck_assert_int_le(batch, CNN_MAX_BATCH);
    mlp_batch(data_seed, index, batch, x_buf, label_buf);
    ge2_feed feeds[2] = {{m->x, x_buf, ge2_shape4(batch, 1, 28, 28)}, {m->labels, label_buf, ge2_shape1(batch)}};
    API(ge2_program_step(m->program, mode, feeds, 2));
    float loss = 0.0f;
    if (read_loss)
        API(ge2_program_read_output(m->program, mode, m->loss, &loss, sizeof loss));
    return loss;
}

unsigned char *cnn_state(cnn *m, size_t *bytes)
{
    const ge2_graph *g = m->graph;
    size_t total = 0;
    for (int i = 0; i < g->n_tensors; i++) {
        const ge2_tensor *t = g->tensors[i];
        if (t->role == GE2_ROLE_PARAMETER || t->role == GE2_ROLE_BUFFER)
            total += (size_t)ge2_shape_numel(t->shape) * ge2_dtype_size(t->dtype);
    }
    unsigned char *out = malloc(total ? total : 1);
    ck_assert_ptr_nonnull(out);
    size_t at = 0;
    for (int role = GE2_ROLE_PARAMETER; role <= GE2_ROLE_BUFFER; role += GE2_ROLE_BUFFER - GE2_ROLE_PARAMETER)
        for (int i = 0; i < g->n_tensors; i++) {
            const ge2_tensor *t = g->tensors[i];
            if ((int)t->role != role)
                continue;
            size_t n = (size_t)ge2_shape_numel(t->shape) * ge2_dtype_size(t->dtype);
            API(role == GE2_ROLE_BUFFER ? ge2_program_get_buffer(m->program, t, out + at, n)
                                        : ge2_program_get_parameter(m->program, t, out + at, n));
            at += n;
        }
    *bytes = total;
    return out;
}
