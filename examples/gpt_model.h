/* nanoGPT's GPT (Karpathy's model.py) as a ge2 graph: token and position
 * embeddings, pre-LayerNorm blocks of causal self-attention and a 4x GELU
 * MLP (tanh's approximation, as GPT-2 and llm.c, or nanoGPT's exact erf
 * form) with residual adds, a final LayerNorm and an LM head tied to
 * the token embedding; biases on. Parameters carry nanoGPT's state_dict
 * names (transformer.wte.weight, transformer.h.{i}.attn.c_attn.weight, ...)
 * (the projections also read and written in Hugging Face GPT2LMHeadModel's
 * layout, Conv1D weights [in, out]: ge2_checkpoint_conv1d)
 * and its initialisation: N(0, 0.02), the residual projections (c_proj)
 * N(0, 0.02/sqrt(2·n_layer)), zero biases, LayerNorm gains 1. Dropout
 * where nanoGPT has it: the embeddings, the attention weights
 * (ge2_attention_dropout) and the residual branches. */
#ifndef GE2_EXAMPLES_GPT_MODEL_H
#define GE2_EXAMPLES_GPT_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "ge2/ge2.h"

typedef struct gpt_config {
    int64_t n_layer, n_head, n_embd, block_size, vocab;
    int64_t batch; /* the training batch the graph is built with (keys re-specialize other batches) */
    double dropout;
    bool gelu_erf; /* the MLP's GELU: false tanh's approximation, true the exact erf form (nn.GELU()) */
    /* the rows of the embedding and the logits' columns, vocab rounded up
     * for the GEMMs (llm.c's 50304 for 50257): the padding is zero, the
     * loss leaves its logits out (ge2_cross_entropy_padded), the sampler's
     * logits have them sliced off, and checkpoints hold vocab rows;
     * at most vocab: no padding */
    int64_t padded_vocab;
    /* the logits a step output, read back by ge2_program_read_output (the
     * sampler that runs the whole window), at the cost of a [B·T, V]
     * buffer of their own in every key (GPT-2 at batch 8: 1.6 GB); false:
     * they live in the arena while the loss needs them */
    bool logits_output;
} gpt_config;

typedef struct gpt_model {
    ge2_graph *graph;
    ge2_tensor *idx;     /* [B, T] i32 */
    ge2_tensor *targets; /* [B·T] i32 */
    ge2_tensor *logits;  /* [B·T, V] (the padding's columns sliced off) with cfg->logits_output, an output;
                          * else the padded [B·T, padded V] the loss reads */
    ge2_tensor *loss;    /* mean cross-entropy */
    ge2_tensor *wte;     /* the tied token embedding and LM head */
    int64_t n_params;
} gpt_model;

/* Builds the forward graph and the loss (no backward, no optimizer). */
ge2_status gpt_build(const gpt_config *cfg, uint64_t seed, gpt_model *out);

/* The same model for generation, one token of each of batch sequences per
 * step: each block's attention keeps the keys and values of the tokens
 * before (ge2_attention_cached, buffers cache.h.{i}.k and .v [batch,
 * block_size, C]), so a step is one token's work. Token t of a sequence is
 * fed at position t; the caches hold up to block_size tokens. No dropout. */
typedef struct gpt_decoder {
    ge2_graph *graph;
    ge2_tensor *token, *position; /* [batch] i32: each sequence's newest token and its place */
    ge2_tensor *logits;           /* [batch, V], marked as an output */
    ge2_tensor **params;          /* [n_params] the parameters, named as gpt_build's */
    int n_params;
} gpt_decoder;

ge2_status gpt_build_decoder(const gpt_config *cfg, int64_t batch, gpt_decoder *out);
void gpt_decoder_free(gpt_decoder *d);
/* The trained values into the decoder's program: each of its parameters
 * from the parameter of the same name in model (compiled from model_graph). */
ge2_status gpt_decoder_copy_parameters(ge2_program *decoder, const gpt_decoder *d, ge2_program *model,
                                       const ge2_graph *model_graph);

#endif /* GE2_EXAMPLES_GPT_MODEL_H */
