/* Text from a GPT: nanoGPT's sampling (logits / temperature, the top k
 * kept, a draw from their softmax), one token per step. Two ways: with the
 * decoder's key-value caches (gpt_decoder: a step is one token's work), or
 * by running the model's eval key over the whole window for each token (the
 * check of the caches: the two give the same tokens while the prompt and
 * the text fit in a block). Draws come from a splitmix64 stream of the seed
 * on the host, so a seed gives the same text on every backend whose logits
 * agree. */
#ifndef GE2_EXAMPLES_GPT_GENERATE_H
#define GE2_EXAMPLES_GPT_GENERATE_H

#include <stdbool.h>
#include <stdint.h>

#include "examples/gpt_model.h"

typedef struct gpt_sampling {
    int64_t tokens;     /* to generate */
    double temperature; /* > 0: the logits are divided by it */
    int64_t top_k;      /* keep the k most likely tokens (ties with the k-th too); 0: all */
    uint64_t seed;
} gpt_sampling;

/* tokens new ids after prompt [n_prompt] (at least one) into out, through
 * the decoder's program: the prompt fed a token per step, then each drawn
 * token. When the caches are full the last half of the text is fed again
 * from position 0 (so past a block the context is not the sliding window
 * the recomputing way keeps). *seconds: the time the tokens took after a
 * first step, which captures the key (both ways). */
ge2_status gpt_generate_cached(ge2_program *program, const gpt_decoder *d, const gpt_config *cfg,
                               const int32_t *prompt, int64_t n_prompt, const gpt_sampling *s, int32_t *out,
                               double *seconds);

/* The same through the model's program, whose eval key of batch 1 runs the
 * last block_size tokens (left-aligned) for each new one. */
ge2_status gpt_generate_recompute(ge2_program *program, const gpt_model *m, const gpt_config *cfg,
                                  const int32_t *prompt, int64_t n_prompt, const gpt_sampling *s, int32_t *out,
                                  double *seconds);

#endif /* GE2_EXAMPLES_GPT_GENERATE_H */
