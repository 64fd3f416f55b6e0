/* Token shards in llm.c's format, the form its data scripts (fineweb.py,
 * tinyshakespeare.py, ...) write GPT-2 tokens in: a header of 256
 * little-endian int32 (magic 20240520, version 1, the number of tokens N,
 * the rest unused), then N little-endian uint16 token ids; the file is
 * exactly 1024 + 2N bytes. A pattern may name several shards (a glob, in
 * sorted order), read as one sequence.
 *
 * Shards are untrusted: every header field, the file's size and every id
 * (below the vocabulary) are checked when they are opened, with messages
 * naming the file and the field, so a batch never indexes past an
 * embedding. The shards are mapped, not copied. */
#ifndef GE2_DATA_TOKENS_H
#define GE2_DATA_TOKENS_H

#include <stdbool.h>
#include <stdint.h>

#include "ge2/ge2.h"

#define GE2_TOKENS_MAGIC 20240520
#define GE2_TOKENS_VERSION 1
#define GE2_TOKENS_HEADER_BYTES 1024

typedef struct ge2_tokens ge2_tokens;

/* Opens every file pattern matches (glob(3), sorted), each checked; vocab:
 * ids must be below it (GPT-2: 50257). */
ge2_status ge2_tokens_open(const char *pattern, int64_t vocab, ge2_tokens **out);
/* One shard from memory (tests and the fuzz target): what is 'path' in
 * messages names it. The bytes must outlive the result. */
ge2_status ge2_tokens_from_memory(const void *bytes, size_t size, const char *path, int64_t vocab, ge2_tokens **out);
void ge2_tokens_free(ge2_tokens *t);

/* Tokens in all the shards together, and the shards. */
int64_t ge2_tokens_count(const ge2_tokens *t);
int ge2_tokens_shard_count(const ge2_tokens *t);
/* Token i of the sequence, 0 <= i < count (the batch continues across
 * shard boundaries). */
uint16_t ge2_tokens_at(const ge2_tokens *t, int64_t i);

/* Where row r of a batch of b windows of t + 1 tokens starts in a sequence
 * of len: sequential, ((step·b + r)·t) mod (len − t − 1); else a uniform
 * offset in [0, len − t) drawn from *rng (splitmix64), as nanoGPT's
 * randint(len − t). len > t + 1. The rule of every batch of a sequence
 * (the character corpus's too). */
int64_t ge2_window_start(int64_t len, int64_t b, int64_t t, bool sequential, int64_t step, int64_t r, uint64_t *rng);

/* b windows of t + 1 tokens: inputs x [b, t] and the next tokens y [b, t].
 * sequential: row r of step s starts at ((s·b + r)·t) mod (N − t − 1);
 * else at a uniform offset in [0, N − t) drawn from *rng (splitmix64).
 * The caller has checked N > t + 1 (ge2_tokens_count). */
void ge2_tokens_batch(const ge2_tokens *tokens, int64_t b, int64_t t, bool sequential, int64_t step, uint64_t *rng,
                      int32_t *x, int32_t *y);

#endif /* GE2_DATA_TOKENS_H */
