/* The CNN the capture stability suites train: conv -> batch norm -> ReLU ->
 * max pool, twice, then two linear layers and mean cross-entropy, Adam, on
 * capture_mlp.c's random data seen as [B, 1, 28, 28], through the public
 * API only. Its train steps move batch norm's running statistics, so eval
 * steps (a graph key of their own) read state the train key writes.
 *
 * Like capture_mlp.h: every function makes its CUDA state itself, so
 * suites call them inside Check test functions only. */
#ifndef GE2_TESTS_GPU_CAPTURE_CNN_H
#define GE2_TESTS_GPU_CAPTURE_CNN_H

#include <stdbool.h>
#include <stdint.h>

#include "ge2/ge2.h"

typedef struct cnn {
    ge2_graph *graph;
    ge2_tensor *x;      /* [B, 1, 28, 28] */
    ge2_tensor *labels; /* [B] i32 */
    ge2_tensor *loss;   /* [] */
    ge2_context *ctx;
    ge2_program *program;
} cnn;

/* Builds (conv channels 8 and 16, fc 32, built batch `batch`, parameter
 * seed `seed`) and compiles for CUDA in `precision`; disable_capture runs
 * every step eagerly. */
void cnn_open(cnn *m, int batch, uint64_t seed, bool disable_capture, ge2_precision precision);
void cnn_close(cnn *m);
/* One step of mode on capture_mlp's batch `index` of stream `data_seed`;
 * the loss when read_loss (synchronizes), else 0. */
float cnn_step(cnn *m, ge2_mode mode, uint64_t data_seed, int64_t index, int batch, bool read_loss);
/* Every parameter, then every persistent buffer (running statistics and
 * the i64 counters as their bytes), concatenated: the state a step leaves.
 * *bytes gets the size; free() it. */
unsigned char *cnn_state(cnn *m, size_t *bytes);

#endif /* GE2_TESTS_GPU_CAPTURE_CNN_H */
