/* A probe of attention's dropout masks through the public API: two
 * attentions over q = k = 0 (every weight 1/T) and v [1, H, T, D] with key
 * j's row 1 at column j (j < D) or 2 at column j - D (T = 2·D), so y's
 * element (h, t, d) is (m_td + 2·m_t(d+D)) / T with m the weights' dropout
 * factors: 0 or 1/(1-p), telling both masks apart. v passes through a
 * parameter of ones that SGD at lr 1e-30 leaves be, so a train step runs
 * the backward and the optimizer's commit (which moves the random offset
 * on). T = 128 and D = 64: the tiled kernels take it (D <= 64), and cuDNN's
 * attention under bf16. Used by the CPU suite
 * (tests/ops/attention_dropout_test) and the GPU one
 * (tests/gpu/op_agreement_test). */
#ifndef GE2_TESTS_SUPPORT_ATTENTION_PROBE_H
#define GE2_TESTS_SUPPORT_ATTENTION_PROBE_H

#include <stdbool.h>
#include <stdint.h>

#include "ge2/ge2.h"

#define GE2_PROBE_HEADS 2
#define GE2_PROBE_T 128
#define GE2_PROBE_D 64
#define GE2_PROBE_P 0.2
/* weights a step's mask has: two layers of H heads of T x T */
#define GE2_PROBE_WEIGHTS (2 * GE2_PROBE_HEADS * GE2_PROBE_T * GE2_PROBE_T)

typedef struct ge2_attn_probe {
    ge2_context *ctx;
    ge2_graph *g;
    ge2_program *prog;
    ge2_tensor *qk, *v, *target, *y[2];
} ge2_attn_probe;

/* Compiles the probe for device and precision (disable_capture: every step
 * eager), the graph seeded with seed. */
ge2_status ge2_attn_probe_open(ge2_attn_probe *p, ge2_device device, ge2_precision precision, bool disable_capture,
                               uint64_t seed);
/* Runs one step of mode and classifies each weight of both layers:
 * kept[i] = 1 kept, 0 dropped ([layer][head][t][j]); *unclear counts
 * outputs that are no sum of kept weights (none within 1e-3 of T·y·(1-p)). */
ge2_status ge2_attn_probe_step(ge2_attn_probe *p, ge2_mode mode, unsigned char *kept, int64_t *unclear);
/* `steps` train steps: step s's classes into kept + s·GE2_PROBE_WEIGHTS,
 * *unclear the sum of theirs */
ge2_status ge2_attn_probe_train(ge2_attn_probe *p, int steps, unsigned char *kept, int64_t *unclear);
/* Weights of one head's mask (GE2_PROBE_T² long) that a and b class alike */
int ge2_attn_probe_agree(const unsigned char *a, const unsigned char *b);
void ge2_attn_probe_close(ge2_attn_probe *p);

#endif /* GE2_TESTS_SUPPORT_ATTENTION_PROBE_H */
