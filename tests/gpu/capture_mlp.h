/* The model the capture stability suites train: an MLP 784-256-128-10 with
 * ReLU, mean cross-entropy and Adam, on random data from a fixed seed, run
 * through the public API only.
 *
 * Every function creates its CUDA state (context, program) itself, so a
 * suite calls them inside Check test functions only, never from main().
 */
#ifndef GE2_TESTS_GPU_CAPTURE_MLP_H
#define GE2_TESTS_GPU_CAPTURE_MLP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ge2/ge2.h"

#define MLP_IN 784
#define MLP_H1 256
#define MLP_H2 128
#define MLP_OUT 10
#define MLP_N_PARAMS 6

typedef struct mlp {
    ge2_graph *graph;
    ge2_tensor *x;                      /* [B, 784] input */
    ge2_tensor *labels;                 /* [B] i32 */
    ge2_tensor *loss;                   /* [] */
    ge2_tensor *params[MLP_N_PARAMS];   /* w1 [256,784], b1 [256], w2, b2, w3, b3 */
    ge2_context *ctx;
    ge2_program *program;
} mlp;

/* Builds the graph (built batch `batch`, parameter seed `seed`, Adam at
 * `lr`) and compiles it for `device`. disable_capture: run CUDA eagerly. */
void mlp_open(mlp *m, ge2_device device, int batch, uint64_t seed, double lr, bool disable_capture);
/* The same with the caller's compile options. */
void mlp_open_with(mlp *m, ge2_device device, int batch, uint64_t seed, double lr,
                   const ge2_compile_options *options);
/* The same with Adam's update_mode given (mlp_open: AUTO, which is flat for this small MLP). */
void mlp_open_mode(mlp *m, ge2_device device, int batch, uint64_t seed, double lr, bool disable_capture,
                   ge2_update_mode update_mode);
void mlp_close(mlp *m);

/* Batch number `index` of the data stream `data_seed`: x in [0, 1), labels in [0, 10). */
void mlp_batch(uint64_t data_seed, int64_t index, int batch, float *x /* [batch, 784] */,
               int32_t *labels /* [batch] */);

/* One training step on batch `index`; returns the loss when read_loss (synchronizes), else 0. */
float mlp_step(mlp *m, uint64_t data_seed, int64_t index, int batch, bool read_loss);
/* The same step with the batch written straight into the program's pinned
 * feed buffers (ge2_program_feed_buffers): the step copies nothing. */
float mlp_step_in_place(mlp *m, uint64_t data_seed, int64_t index, int batch, bool read_loss);

/* Elements of parameter i, and all of them concatenated (caller frees with free()). */
int64_t mlp_param_numel(int i);
int64_t mlp_total_numel(void);
float *mlp_get_params(mlp *m);

/* ||a - b||_2 / ||b||_2 per parameter; the worst over all. Normwise, since
 * Adam's first steps divide by sqrt(v) + eps: the few elements whose gradient
 * is near eps (cancellation) amplify last-bit differences elementwise. */
double mlp_rel_diff(const float *a, const float *b);
/* "worst element w1[123]: a vs b (from base)" for failure messages; base may be NULL. */
const char *mlp_worst_element(const float *a, const float *b, const float *base, char *buf, size_t size);

#endif /* GE2_TESTS_GPU_CAPTURE_MLP_H */
