/* nanoGPT's GPT (Karpathy's model.py) as a ge2 graph: token and position
 * embeddings, pre-LayerNorm blocks of causal self-attention and a 4x GELU
 * MLP (tanh's approximation, as GPT-2 and llm.c, or nanoGPT's exact erf
 * form) with residual adds, a final LayerNorm and an LM head tied to
 * the token embedding; biases on. Parameters carry nanoGPT's state_dict
 * names (transformer.wte.weight, transformer.h.{i}.attn.c_attn.weight, ...)
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
} gpt_config;

typedef struct gpt_model {
    ge2_graph *graph;
    ge2_tensor *idx;     /* [B, T] i32 */
    ge2_tensor *targets; /* [B·T] i32 */
    ge2_tensor *logits;  /* [B·T, V], marked as an output (sampling reads it) */
    ge2_tensor *loss;    /* mean cross-entropy */
    ge2_tensor *wte;     /* the tied token embedding and LM head */
    int64_t n_params;
} gpt_model;

/* Builds the forward graph and the loss (no backward, no optimizer). */
ge2_status gpt_build(const gpt_config *cfg, uint64_t seed, gpt_model *out);

#endif /* GE2_EXAMPLES_GPT_MODEL_H */
