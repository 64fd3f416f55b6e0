/* The attention dropout probe (attention_probe.h). */
#include "tests/support/attention_probe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/error.h"

#define H GE2_PROBE_HEADS
#define T GE2_PROBE_T
#define D GE2_PROBE_D

_Static_assert(GE2_PROBE_T == 2 * GE2_PROBE_D, "the probe's v tells two keys a column apart");

static ge2_shape probe_shape(void) { return ge2_shape4(1, H, T, D); }

ge2_status ge2_attn_probe_open(ge2_attn_probe *p, ge2_device device, ge2_precision precision, bool disable_capture,
                               uint64_t seed)
{
    memset(p, 0, sizeof *p);
    const ge2_shape s = probe_shape();
    ge2_tensor *w, *v, *sum, *loss;
    GE2_TRY(ge2_context_new(device, &p->ctx));
    GE2_TRY(ge2_graph_new(&p->g));
    GE2_TRY(ge2_graph_set_seed(p->g, seed));
    GE2_TRY(ge2_input(p->g, "qk", GE2_F32, s, &p->qk));
    GE2_TRY(ge2_input(p->g, "v", GE2_F32, s, &p->v));
    GE2_TRY(ge2_label(p->g, "target", GE2_F32, s, &p->target));
    GE2_TRY(ge2_parameter(p->g, "w", GE2_F32, s, (ge2_init){GE2_INIT_CONSTANT, 1, 0, 0}, &w));
    GE2_TRY(ge2_mul(p->g, p->v, w, &v));
    for (int layer = 0; layer < 2; layer++) {
        GE2_TRY(ge2_attention(p->g, p->qk, p->qk, v, false, &p->y[layer]));
        GE2_TRY(ge2_attention_dropout(p->g, p->y[layer], GE2_PROBE_P));
        GE2_TRY(ge2_mark_output(p->g, p->y[layer]));
    }
    GE2_TRY(ge2_add(p->g, p->y[0], p->y[1], &sum));
    GE2_TRY(ge2_mse_loss(p->g, sum, p->target, &loss));
    GE2_TRY(ge2_backward(p->g, loss));
    ge2_optimizer_config sgd = ge2_optimizer_defaults(GE2_OPT_SGD);
    sgd.lr = 1e-30; /* w stays 1 in f32 */
    GE2_TRY(ge2_optimizer(p->g, &sgd));
    ge2_compile_options o = ge2_compile_defaults();
    o.precision = precision;
    o.disable_capture = disable_capture;
    return ge2_compile(p->ctx, p->g, &o, &p->prog);
}

ge2_status ge2_attn_probe_step(ge2_attn_probe *p, ge2_mode mode, unsigned char *kept, int64_t *unclear)
{
    const size_t n = (size_t)H * T * D;
    float *qk = calloc(n, sizeof(float)), *v = calloc(n, sizeof(float)), *y = malloc(n * sizeof(float));
    ge2_status st = qk && v && y ? GE2_OK : ge2_error(GE2_ERR_OUT_OF_MEMORY, "attention probe: %zu values", n);
    for (size_t h = 0; st == GE2_OK && h < H; h++)
        for (size_t j = 0; j < T; j++)
            v[(h * T + j) * D + j % D] = j < D ? 1.0f : 2.0f;
    ge2_feed f[3] = {{p->qk, qk, probe_shape()}, {p->v, v, probe_shape()}, {p->target, qk, probe_shape()}};
    if (st == GE2_OK)
        st = ge2_program_step(p->prog, mode, f, 3);
    *unclear = 0;
    for (int layer = 0; st == GE2_OK && layer < 2; layer++) {
        st = ge2_program_read_output(p->prog, mode, p->y[layer], y, n * sizeof(float));
        unsigned char *mask = kept + (size_t)layer * H * T * T; /* [head][t][j] */
        for (size_t i = 0; st == GE2_OK && i < n; i++) {
            /* m_td + 2·m_t(d+D) over 1/(1-p): 0 to 3 (1/(1-p') of ge2's masks is within 2e-5 of it) */
            const double units = (double)T * y[i] * (1.0 - GE2_PROBE_P), whole = round(units);
            const size_t h = i / ((size_t)T * D), t = i / D % T, d = i % D;
            const int bits = whole >= 0 && whole <= 3 && fabs(units - whole) < 1e-3 ? (int)whole : 0;
            *unclear += bits != whole || fabs(units - whole) >= 1e-3;
            mask[(h * T + t) * T + d] = bits & 1;
            mask[(h * T + t) * T + d + D] = bits >> 1;
        }
    }
    free(qk);
    free(v);
    free(y);
    return st;
}

ge2_status ge2_attn_probe_train(ge2_attn_probe *p, int steps, unsigned char *kept, int64_t *unclear)
{
    *unclear = 0;
    for (int s = 0; s < steps; s++) {
        int64_t u;
        GE2_TRY(ge2_attn_probe_step(p, GE2_MODE_TRAIN, kept + (size_t)s * GE2_PROBE_WEIGHTS, &u));
        *unclear += u;
    }
    return GE2_OK;
}

int ge2_attn_probe_agree(const unsigned char *a, const unsigned char *b)
{
    int same = 0;
    for (int i = 0; i < T * T; i++)
        same += a[i] == b[i];
    return same;
}

void ge2_attn_probe_close(ge2_attn_probe *p)
{
    ge2_program_free(p->prog);
    ge2_graph_free(p->g);
    ge2_context_free(p->ctx);
    memset(p, 0, sizeof *p);
}
