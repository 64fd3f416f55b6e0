/* nanoGPT's GPT as a ge2 graph (gpt_model.h). The residual stream is kept
 * as [B·T, C], the shape the LINEAR layers take; attention takes q, k, v
 * packed as the c_attn projection writes them ([B, T, 3H, D],
 * ge2_attention_qkv) and gives y with its heads inside the positions
 * ([B, T, H, D]), so splitting q, k, v and the heads, and merging them
 * back, are reshapes, which the planner makes views: no copies. */
#include "examples/gpt_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ge2/extension.h"

#define TRY(call)                        \
    do {                                 \
        ge2_status try_ = (call);        \
        if (try_ != GE2_OK)              \
            return try_;                 \
    } while (0)

typedef struct builder {
    ge2_graph *g;
    const gpt_config *cfg;
    int64_t n_params;
    /* the decoder: the tokens' places, and its parameters as they are made
     * (NULL: the training graph) */
    ge2_tensor *positions;
    gpt_decoder *decoder;
} builder;

/* the decoder's list of its parameters (the training graph keeps none) */
static ge2_status record(builder *b, ge2_tensor *p)
{
    gpt_decoder *d = b->decoder;
    if (!d)
        return GE2_OK;
    if (!p)
        return ge2_error(GE2_ERR_GRAPH, "gpt_build_decoder: a layer norm's parameter is missing");
    ge2_tensor **grown = realloc(d->params, sizeof *grown * (size_t)(d->n_params + 1));
    if (!grown)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "gpt_build_decoder: %d parameters", d->n_params + 1);
    d->params = grown;
    d->params[d->n_params++] = p;
    return GE2_OK;
}

static ge2_status param(builder *b, const char *name, ge2_shape shape, ge2_init init, ge2_tensor **out)
{
    TRY(ge2_parameter(b->g, name, GE2_F32, shape, init, out));
    TRY(record(b, *out));
    int64_t n = 1;
    for (int i = 0; i < shape.ndim; i++)
        n *= shape.dim[i];
    b->n_params += n;
    return GE2_OK;
}

/* y = x·wᵀ + b (act after), "<prefix>.weight" [out, in] N(0, std), ".bias" zeros */
static ge2_status linear(builder *b, const char *prefix, ge2_tensor *x, int64_t out, double std, ge2_activation act,
                         ge2_tensor **y)
{
    char wn[96], bn[96];
    snprintf(wn, sizeof wn, "%s.weight", prefix);
    snprintf(bn, sizeof bn, "%s.bias", prefix);
    ge2_tensor *w, *bias;
    const int64_t in = ge2_tensor_shape(x).dim[1];
    TRY(param(b, wn, ge2_shape2(out, in), (ge2_init){GE2_INIT_NORMAL, 0.0, std, 0}, &w));
    TRY(ge2_checkpoint_conv1d(b->g, w)); /* GPT-2's projections are Conv1D modules in transformers */
    TRY(param(b, bn, ge2_shape1(out), (ge2_init){GE2_INIT_ZEROS, 0, 0, 0}, &bias));
    return ge2_linear(b->g, x, w, bias, act, 0.0f, y);
}

static ge2_status layer_norm(builder *b, const char *prefix, ge2_tensor *x, ge2_tensor **y)
{
    TRY(ge2_layer_norm_layer(b->g, prefix, x, true, 1e-5, y));
    b->n_params += 2 * ge2_tensor_shape(x).dim[1];
    char name[96]; /* the layer's own parameters, by their names */
    snprintf(name, sizeof name, "%s.weight", prefix);
    TRY(record(b, ge2_graph_find(b->g, name)));
    snprintf(name, sizeof name, "%s.bias", prefix);
    return record(b, ge2_graph_find(b->g, name));
}

static ge2_status dropout(builder *b, ge2_tensor *x, ge2_tensor **y)
{
    if (b->cfg->dropout <= 0) {
        *y = x;
        return GE2_OK;
    }
    return ge2_dropout(b->g, x, b->cfg->dropout, y);
}

/* causal self-attention of block i on h [B·T, C]; the decoder's on h [B, C],
 * one token of each sequence, against its block's key-value cache */
static ge2_status attention(builder *b, int i, ge2_tensor *h, ge2_tensor **y)
{
    const gpt_config *c = b->cfg;
    const int64_t C = c->n_embd;
    char name[96];
    ge2_tensor *qkv, *a;
    snprintf(name, sizeof name, "transformer.h.%d.attn.c_attn", i);
    TRY(linear(b, name, h, 3 * C, 0.02, GE2_ACT_NONE, &qkv));
    if (b->decoder) {
        const ge2_shape cache = ge2_shape3(ge2_tensor_shape(h).dim[0], c->block_size, C);
        const ge2_init zeros = {GE2_INIT_ZEROS, 0, 0, 0};
        ge2_tensor *keys, *values;
        snprintf(name, sizeof name, "cache.h.%d.k", i);
        TRY(ge2_buffer(b->g, name, GE2_F32, cache, zeros, &keys));
        snprintf(name, sizeof name, "cache.h.%d.v", i);
        TRY(ge2_buffer(b->g, name, GE2_F32, cache, zeros, &values));
        TRY(ge2_attention_cached(b->g, qkv, keys, values, b->positions, (int)c->n_head, &a));
        snprintf(name, sizeof name, "transformer.h.%d.attn.c_proj", i);
        return linear(b, name, a, C, 0.02 / sqrt(2.0 * (double)c->n_layer), GE2_ACT_NONE, y);
    }
    /* [B·T, 3C] -> [B, T, 3H, D]: q's heads, k's, v's, as c_attn's rows are */
    TRY(ge2_reshape(b->g, qkv, ge2_shape4(-1, c->block_size, 3 * c->n_head, C / c->n_head), &qkv));
    TRY(ge2_attention_qkv(b->g, qkv, true, &a)); /* [B, T, H, D] */
    if (c->dropout > 0) /* nanoGPT's attn_dropout, on the attention weights */
        TRY(ge2_attention_dropout(b->g, a, c->dropout));
    TRY(ge2_reshape(b->g, a, ge2_shape2(-1, C), &a));
    snprintf(name, sizeof name, "transformer.h.%d.attn.c_proj", i);
    TRY(linear(b, name, a, C, 0.02 / sqrt(2.0 * (double)c->n_layer), GE2_ACT_NONE, &a));
    return dropout(b, a, y);
}

static ge2_status mlp(builder *b, int i, ge2_tensor *h, ge2_tensor **y)
{
    const int64_t C = b->cfg->n_embd;
    char name[96];
    snprintf(name, sizeof name, "transformer.h.%d.mlp.c_fc", i);
    TRY(linear(b, name, h, 4 * C, 0.02, b->cfg->gelu_erf ? GE2_ACT_GELU_ERF : GE2_ACT_GELU_TANH, &h));
    snprintf(name, sizeof name, "transformer.h.%d.mlp.c_proj", i);
    TRY(linear(b, name, h, C, 0.02 / sqrt(2.0 * (double)b->cfg->n_layer), GE2_ACT_NONE, &h));
    return dropout(b, h, y);
}

/* the blocks, the final LayerNorm and the tied head on the residual stream
 * x [rows, C]: the logits over the padded vocabulary [rows, padded V], which
 * the loss reads (ge2_cross_entropy_padded leaves the padding out), and the
 * real ones [rows, V] (the padding's columns sliced off), an output where the
 * decoder or --no-kv-cache's sampler reads them */
static ge2_status blocks_and_head(builder *b, ge2_tensor *x, ge2_tensor *wte, ge2_tensor **padded_logits,
                                  ge2_tensor **logits)
{
    const gpt_config *c = b->cfg;
    ge2_tensor *h, *a;
    for (int i = 0; i < (int)c->n_layer; i++) {
        char name[96];
        snprintf(name, sizeof name, "transformer.h.%d.ln_1", i);
        TRY(layer_norm(b, name, x, &h));
        TRY(attention(b, i, h, &a));
        TRY(ge2_add(b->g, x, a, &x));
        snprintf(name, sizeof name, "transformer.h.%d.ln_2", i);
        TRY(layer_norm(b, name, x, &h));
        TRY(mlp(b, i, h, &a));
        TRY(ge2_add(b->g, x, a, &x));
    }
    TRY(layer_norm(b, "transformer.ln_f", x, &x));
    TRY(ge2_matmul(b->g, x, wte, false, true, padded_logits)); /* the LM head: wte, tied */
    *logits = *padded_logits;
    if (!b->decoder && !c->logits_output)
        return GE2_OK;
    if (ge2_tensor_shape(wte).dim[0] > c->vocab) /* the padding's logits never reach the sampler */
        TRY(ge2_slice(b->g, *padded_logits, 1, 0, c->vocab, logits));
    return ge2_mark_output(b->g, *logits);
}

/* the token embedding [padded vocabulary, C] (its padding zero, never
 * indexed) and the position embedding [T, C] */
static ge2_status embeddings(builder *b, ge2_tensor **wte, ge2_tensor **wpe)
{
    const gpt_config *c = b->cfg;
    const int64_t V = c->vocab, padded = c->padded_vocab > V ? c->padded_vocab : V;
    TRY(param(b, "transformer.wte.weight", ge2_shape2(padded, c->n_embd), (ge2_init){GE2_INIT_NORMAL, 0, 0.02, 0}, wte));
    if (padded > V)
        TRY(ge2_parameter_padding(b->g, *wte, V));
    return param(b, "transformer.wpe.weight", ge2_shape2(c->block_size, c->n_embd),
                 (ge2_init){GE2_INIT_NORMAL, 0, 0.02, 0}, wpe);
}

static ge2_status build(builder *b, gpt_model *m)
{
    const gpt_config *c = b->cfg;
    const int64_t T = c->block_size, C = c->n_embd;
    ge2_tensor *wpe, *pos, *tok, *pe, *x;
    TRY(ge2_input(b->g, "idx", GE2_I32, ge2_shape2(c->batch, T), &m->idx));
    TRY(ge2_label(b->g, "targets", GE2_I32, ge2_shape1(c->batch * T), &m->targets));
    TRY(embeddings(b, &m->wte, &wpe));
    TRY(ge2_checkpoint_alias(b->g, m->wte, "lm_head.weight")); /* nanoGPT's state_dict has both, tied */
    int32_t positions[4096];
    if (T > (int64_t)(sizeof positions / sizeof positions[0]))
        return GE2_ERR_INVALID_ARGUMENT;
    for (int64_t t = 0; t < T; t++)
        positions[t] = (int32_t)t;
    TRY(ge2_constant(b->g, "positions", GE2_I32, ge2_shape1(T), positions, &pos));
    TRY(ge2_embedding(b->g, m->idx, m->wte, &tok)); /* [B, T, C] */
    TRY(ge2_embedding(b->g, pos, wpe, &pe));        /* [T, C] */
    TRY(ge2_add(b->g, tok, pe, &x));
    TRY(dropout(b, x, &x));
    TRY(ge2_reshape(b->g, x, ge2_shape2(-1, C), &x)); /* the residual stream [B·T, C] */
    ge2_tensor *padded_logits;
    TRY(blocks_and_head(b, x, m->wte, &padded_logits, &m->logits));
    return ge2_cross_entropy_padded(b->g, padded_logits, m->targets, 0.0f, c->vocab, &m->loss);
}

static ge2_status build_decoder(builder *b, int64_t batch, gpt_decoder *d)
{
    ge2_tensor *wte, *wpe, *tok, *pe, *x;
    TRY(ge2_input(b->g, "token", GE2_I32, ge2_shape1(batch), &d->token));
    TRY(ge2_input(b->g, "position", GE2_I32, ge2_shape1(batch), &d->position));
    b->positions = d->position;
    TRY(embeddings(b, &wte, &wpe));
    TRY(ge2_embedding(b->g, d->token, wte, &tok));   /* [B, C] */
    TRY(ge2_embedding(b->g, d->position, wpe, &pe)); /* [B, C] */
    TRY(ge2_add(b->g, tok, pe, &x));
    ge2_tensor *padded_logits;
    return blocks_and_head(b, x, wte, &padded_logits, &d->logits);
}

ge2_status gpt_build(const gpt_config *cfg, uint64_t seed, gpt_model *out)
{
    memset(out, 0, sizeof *out);
    if (cfg->n_embd % cfg->n_head != 0)
        return GE2_ERR_INVALID_ARGUMENT;
    builder b = {NULL, cfg, 0, NULL, NULL};
    TRY(ge2_graph_new(&b.g));
    ge2_status st = ge2_graph_set_seed(b.g, seed);
    if (st == GE2_OK)
        st = build(&b, out);
    if (st != GE2_OK) {
        ge2_graph_free(b.g);
        memset(out, 0, sizeof *out);
        return st;
    }
    out->graph = b.g;
    out->n_params = b.n_params;
    return GE2_OK;
}

ge2_status gpt_build_decoder(const gpt_config *cfg, int64_t batch, gpt_decoder *out)
{
    memset(out, 0, sizeof *out);
    if (cfg->n_embd % cfg->n_head != 0 || batch < 1)
        return GE2_ERR_INVALID_ARGUMENT;
    gpt_config inference = *cfg;
    inference.dropout = 0;
    builder b = {NULL, &inference, 0, NULL, out};
    TRY(ge2_graph_new(&b.g));
    out->graph = b.g;
    ge2_status st = build_decoder(&b, batch, out);
    if (st != GE2_OK)
        gpt_decoder_free(out);
    return st;
}

void gpt_decoder_free(gpt_decoder *d)
{
    ge2_graph_free(d->graph);
    free(d->params);
    memset(d, 0, sizeof *d);
}

ge2_status gpt_decoder_copy_parameters(ge2_program *decoder, const gpt_decoder *d, ge2_program *model,
                                       const ge2_graph *model_graph)
{
    ge2_status st = GE2_OK;
    float *values = NULL;
    size_t have = 0;
    for (int i = 0; st == GE2_OK && i < d->n_params; i++) {
        const ge2_tensor *p = d->params[i], *from = ge2_graph_find(model_graph, ge2_tensor_name(p));
        const ge2_shape s = ge2_tensor_shape(p);
        size_t bytes = sizeof(float);
        for (int k = 0; k < s.ndim; k++)
            bytes *= (size_t)s.dim[k];
        if (bytes > have) {
            float *grown = realloc(values, bytes);
            if (!grown) {
                st = ge2_error(GE2_ERR_OUT_OF_MEMORY, "the decoder's parameters: %zu bytes", bytes);
                break;
            }
            values = grown;
            have = bytes;
        }
        st = from ? ge2_program_get_parameter(model, from, values, bytes)
                  : ge2_error(GE2_ERR_GRAPH, "the model has no parameter '%s' for the decoder", ge2_tensor_name(p));
        if (st == GE2_OK)
            st = ge2_program_set_parameter(decoder, p, values, bytes);
    }
    free(values);
    return st;
}
