/* A character-level corpus for the GPT trainer, as nanoGPT's
 * shakespeare_char prepares one: the vocabulary is the file's distinct
 * bytes in order, the first 90% of the file is the training split and the
 * rest validation, and a batch is B windows of T + 1 characters (inputs and
 * the next characters as targets). */
#ifndef GE2_EXAMPLES_CHAR_DATA_H
#define GE2_EXAMPLES_CHAR_DATA_H

#include <stdbool.h>
#include <stdint.h>

#include "ge2/ge2.h"

typedef struct char_corpus {
    uint8_t *ids;      /* the file encoded, [n] */
    int64_t n, n_train; /* the training split is ids[0, n_train), validation the rest */
    int vocab;         /* distinct bytes */
    uint8_t itos[256]; /* id -> byte */
    int stoi[256];     /* byte -> id, -1 for bytes not in the file */
    int64_t control_bytes; /* bytes below 0x20 other than newline, tab and CR: many mean it is not text */
} char_corpus;

/* Reads path (a regular file, not empty); errors name the file. */
ge2_status char_corpus_load(const char *path, char_corpus *out);
void char_corpus_free(char_corpus *c);

/* One batch of split `val` (false: train): x [b, t] and y [b, t] ids, the
 * windows starting where ge2_window_start (data/tokens.h) says: with
 * sequential, row r of step s at ((s·b + r)·t) mod (len - t - 1) of the
 * split; else at nanoGPT's randint(len - t) from *rng. */
void char_corpus_batch(const char_corpus *c, bool val, int64_t b, int64_t t, bool sequential, int64_t step,
                       uint64_t *rng, int32_t *x, int32_t *y);

/* The split's length, which must exceed t + 1 for batches. */
int64_t char_corpus_split_len(const char_corpus *c, bool val);

#endif /* GE2_EXAMPLES_CHAR_DATA_H */
