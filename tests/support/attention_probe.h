/* A probe of attention's dropout masks through the public API: two
 * attentions over q = k = 0 (every weight 1/T) and v = the identity per
 * head ([1, H, T, T]), so y's element (h, t, j) is weight (t, j)'s
 * dropout factor over T: 1/(1-p)/T where kept, 0 where dropped. v passes
 * through a parameter of ones that SGD at lr 1e-30 leaves be, so a train
 * step runs the backward and the optimizer's commit (which moves the
 * random offset on). T is 128 and D = T, shapes cuDNN's attention takes
 * under bf16. Used by the CPU suite (tests/ops/attention_dropout_test) and
 * the GPU one (tests/gpu/op_agreement_test). */
#ifndef GE2_TESTS_SUPPORT_ATTENTION_PROBE_H
#define GE2_TESTS_SUPPORT_ATTENTION_PROBE_H

#include <stdbool.h>
#include <stdint.h>

#include "ge2/ge2.h"

#define GE2_PROBE_HEADS 2
#define GE2_PROBE_T 128
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
 * outputs that are neither (within 1e-3 of T·y). */
ge2_status ge2_attn_probe_step(ge2_attn_probe *p, ge2_mode mode, unsigned char *kept, int64_t *unclear);
/* `steps` train steps: step s's classes into kept + s·GE2_PROBE_WEIGHTS,
 * *unclear the sum of theirs */
ge2_status ge2_attn_probe_train(ge2_attn_probe *p, int steps, unsigned char *kept, int64_t *unclear);
/* Weights of one head's mask (GE2_PROBE_T² long) that a and b class alike */
int ge2_attn_probe_agree(const unsigned char *a, const unsigned char *b);
void ge2_attn_probe_close(ge2_attn_probe *p);

#endif /* GE2_TESTS_SUPPORT_ATTENTION_PROBE_H */
