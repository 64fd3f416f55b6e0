/* The GPT the capture stability suites train: train_gpt's model
 * (examples/gpt_model.h) at a tiny size, dropout on, AdamW with
 * matrices-only decay and clipping, on random token ids. Three graph keys:
 * train at the built batch, eval at the built batch, and generate (eval at
 * batch 1, as train_gpt samples). Through the public API only; every
 * function makes its CUDA state itself, so suites call them inside Check
 * test functions only. */
#ifndef GE2_TESTS_GPU_CAPTURE_GPT_H
#define GE2_TESTS_GPU_CAPTURE_GPT_H

#include <stdbool.h>
#include <stdint.h>

#include "examples/gpt_model.h"
#include "ge2/ge2.h"

#define GPT_VOCAB 20
#define GPT_BLOCK 16

typedef struct gpt {
    gpt_model model;
    ge2_context *ctx;
    ge2_program *program;
    int batch;
} gpt;

/* Builds (2 layers, 2 heads, 32 wide, block 16, vocab 20, dropout 0.1) at
 * `batch` with parameter seed `seed`, and compiles for CUDA;
 * disable_capture runs every step eagerly. */
void gpt_open(gpt *m, int batch, uint64_t seed, bool disable_capture);
void gpt_close(gpt *m);

typedef enum gpt_key { GPT_TRAIN, GPT_EVAL, GPT_GENERATE } gpt_key;

/* The suites' interleaving of the three keys: generate every seventh step,
 * eval every fifth, train otherwise. */
static inline gpt_key gpt_key_at(int i) { return i % 7 == 6 ? GPT_GENERATE : i % 5 == 4 ? GPT_EVAL : GPT_TRAIN; }

/* One step of key on random ids drawn from (data_seed, index); the loss
 * when read_loss (synchronizes), else 0. */
float gpt_step(gpt *m, gpt_key key, uint64_t data_seed, int64_t index, bool read_loss);
/* Every parameter, concatenated; *bytes gets the size; free() it. */
unsigned char *gpt_state(gpt *m, size_t *bytes);

#endif /* GE2_TESTS_GPU_CAPTURE_GPT_H */
