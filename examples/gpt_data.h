/* What the GPT trainer trains on: a character corpus (char_data.h, one
 * token a byte of the file) or token shards in llm.c's format
 * (data/tokens.h: --train-tokens, --val-tokens, --vocab-size), with a
 * SentencePiece .vocab file to print samples as text. One interface for
 * batches, split sizes and decoding, so the trainer does not care which. */
#ifndef GE2_EXAMPLES_GPT_DATA_H
#define GE2_EXAMPLES_GPT_DATA_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "data/tokens.h"
#include "examples/char_data.h"

typedef struct gpt_data {
    bool tokens;              /* shards, else the character corpus */
    char_corpus corpus;       /* !tokens */
    ge2_tokens *train, *val;  /* tokens */
    int vocab;                /* ids are in [0, vocab) */
    char **pieces;            /* [vocab] each id's text (a tokenizer's pieces), or NULL: samples print ids */
    const char *source;       /* for messages and the banner */
} gpt_data;

/* The character corpus at path. */
ge2_status gpt_data_load_text(const char *path, gpt_data *d);
/* Token shards: train and val patterns (glob), ids below vocab; pieces_path
 * (a SentencePiece .vocab file, NULL for none) decodes samples. */
ge2_status gpt_data_load_tokens(const char *train, const char *val, int64_t vocab, const char *pieces_path,
                                gpt_data *d);
void gpt_data_free(gpt_data *d);

/* Tokens in a split. */
int64_t gpt_data_split_len(const gpt_data *d, bool val);
/* A batch of split val: x [b, t] and y [b, t] (char_corpus_batch's and
 * ge2_tokens_batch's rule). */
void gpt_data_batch(const gpt_data *d, bool val, int64_t b, int64_t t, bool sequential, int64_t step, uint64_t *rng,
                    int32_t *x, int32_t *y);
/* The id a sample starts from: a newline. */
int32_t gpt_data_start(const gpt_data *d);
/* text as ids, at most cap of them, *n: how many. The character corpus's
 * bytes each; token shards through the .vocab pieces (--tokenizer): at each
 * place the longest piece that matches (a space is SentencePiece's U+2581,
 * and the text starts with one, as spm_encode's dummy prefix), else the
 * byte's "<0xNN>" piece: a valid segmentation of the text, not always the
 * one spm_encode chooses. Errors name the byte and its place. At most
 * 3·strlen(text) + 3 ids (every byte of the text and of the prefix its
 * own). */
ge2_status gpt_data_encode(const gpt_data *d, const char *text, int32_t *ids, int64_t cap, int64_t *n);
/* Writes token id as text (its byte, its piece, or "<id>"). */
void gpt_data_print(const gpt_data *d, int32_t id, FILE *out);

#endif /* GE2_EXAMPLES_GPT_DATA_H */
