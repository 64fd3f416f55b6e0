/* nanoGPT's GPT as a ge2 graph (gpt_model.h). The residual stream is kept
 * as [B·T, C], the shape the LINEAR layers take; attention takes q, k, v
 * packed as the c_attn projection writes them ([B, T, 3H, D],
 * ge2_attention_qkv) and gives y with its heads inside the positions
 * ([B, T, H, D]), so splitting q, k, v and the heads, and merging them
 * back, are reshapes, which the planner makes views: no copies. */
#include "examples/gpt_model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

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
} builder;

static ge2_status param(builder *b, const char *name, ge2_shape shape, ge2_init init, ge2_tensor **out)
{
    TRY(ge2_parameter(b->g, name, GE2_F32, shape, init, out));
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
    TRY(param(b, bn, ge2_shape1(out), (ge2_init){GE2_INIT_ZEROS, 0, 0, 0}, &bias));
    return ge2_linear(b->g, x, w, bias, act, 0.0f, y);
}

static ge2_status layer_norm(builder *b, const char *prefix, ge2_tensor *x, ge2_tensor **y)
{
    TRY(ge2_layer_norm_layer(b->g, prefix, x, true, 1e-5, y));
    b->n_params += 2 * ge2_tensor_shape(x).dim[1];
    return GE2_OK;
}

static ge2_status dropout(builder *b, ge2_tensor *x, ge2_tensor **y)
{
    if (b->cfg->dropout <= 0) {
        *y = x;
        return GE2_OK;
    }
    return ge2_dropout(b->g, x, b->cfg->dropout, y);
}

/* causal self-attention of block i on h [B·T, C] */
static ge2_status attention(builder *b, int i, ge2_tensor *h, ge2_tensor **y)
{
    const gpt_config *c = b->cfg;
    const int64_t C = c->n_embd;
    char name[96];
    ge2_tensor *qkv, *a;
    snprintf(name, sizeof name, "transformer.h.%d.attn.c_attn", i);
    TRY(linear(b, name, h, 3 * C, 0.02, GE2_ACT_NONE, &qkv));
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

static ge2_status build(builder *b, gpt_model *m)
{
    const gpt_config *c = b->cfg;
    const int64_t T = c->block_size, C = c->n_embd;
    ge2_tensor *wpe, *pos, *tok, *pe, *x, *h, *a;
    TRY(ge2_input(b->g, "idx", GE2_I32, ge2_shape2(c->batch, T), &m->idx));
    TRY(ge2_label(b->g, "targets", GE2_I32, ge2_shape1(c->batch * T), &m->targets));
    TRY(param(b, "transformer.wte.weight", ge2_shape2(c->vocab, C), (ge2_init){GE2_INIT_NORMAL, 0, 0.02, 0}, &m->wte));
    TRY(ge2_checkpoint_alias(b->g, m->wte, "lm_head.weight")); /* nanoGPT's state_dict has both, tied */
    TRY(param(b, "transformer.wpe.weight", ge2_shape2(T, C), (ge2_init){GE2_INIT_NORMAL, 0, 0.02, 0}, &wpe));
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
    TRY(ge2_matmul(b->g, x, m->wte, false, true, &m->logits)); /* the LM head: wte, tied */
    TRY(ge2_mark_output(b->g, m->logits));
    return ge2_cross_entropy(b->g, m->logits, m->targets, 0.0f, &m->loss);
}

ge2_status gpt_build(const gpt_config *cfg, uint64_t seed, gpt_model *out)
{
    memset(out, 0, sizeof *out);
    if (cfg->n_embd % cfg->n_head != 0)
        return GE2_ERR_INVALID_ARGUMENT;
    builder b = {NULL, cfg, 0};
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
