/* An MLP of any shape built from a spec through the public API: the cases
 * of the whole-step kernel's suites (mlp_step_match_test on the CPU in CI,
 * mlp_step_test CUDA vs CPU on the GPU). Data comes from a counter-based
 * stream, so batch i is the same on every backend and in every run.
 */
#ifndef GE2_TESTS_GPU_MLP_SPEC_H
#define GE2_TESTS_GPU_MLP_SPEC_H

#include <stdbool.h>
#include <stdint.h>

#include "ge2/ge2.h"

#define SPEC_MAX_LAYERS 6

typedef struct mlp_spec {
    const char *name;
    int n_layers;
    int64_t dims[SPEC_MAX_LAYERS + 1];          /* features, hidden..., classes */
    ge2_activation act[SPEC_MAX_LAYERS];        /* per layer; the last is the logits' */
    int batch;
    ge2_optimizer_config optimizer;
    float label_smoothing;
    bool accuracy; /* also an ACCURACY output */
} mlp_spec;

typedef struct spec_model {
    mlp_spec spec;
    ge2_graph *graph;
    ge2_tensor *x, *labels, *loss, *correct;
    ge2_tensor *params[2 * SPEC_MAX_LAYERS]; /* w0, b0, w1, b1, ... */
    ge2_context *ctx;
    ge2_program *program;
} spec_model;

/* dims[0 .. n_layers], relu on every layer but the last, the kind's default
 * optimizer, no smoothing, no accuracy. */
mlp_spec mlp_spec_of(const char *name, int n_layers, const int64_t *dims, int batch, ge2_optimizer_kind kind);

/* Builds and compiles; asserts (Check) on any failure. */
void spec_open(spec_model *m, const mlp_spec *spec, ge2_device device, uint64_t seed);
void spec_close(spec_model *m);
/* One training step on batch `index` of data stream `data_seed`; returns the loss (synchronizes). */
float spec_step(spec_model *m, uint64_t data_seed, int64_t index);
/* All parameters concatenated (caller frees); *n receives the count. */
float *spec_params(spec_model *m, int64_t *n);

#endif /* GE2_TESTS_GPU_MLP_SPEC_H */
