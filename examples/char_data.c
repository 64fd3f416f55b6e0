/* The character-level corpus: load, vocabulary, splits and batches. */
#include "examples/char_data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/error.h"
#include "graph/rng.h"

ge2_status char_corpus_load(const char *path, char_corpus *out)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f)
        return ge2_error(GE2_ERR_IO, "cannot open the corpus '%s' (tools/setup.sh makes it; --data names another)",
                         path);
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    ge2_status st = n > 0 && fseek(f, 0, SEEK_SET) == 0 ? GE2_OK : ge2_error(GE2_ERR_IO, "cannot size '%s'", path);
    if (st == GE2_OK && !(out->ids = malloc((size_t)n)))
        st = ge2_error(GE2_ERR_OUT_OF_MEMORY, "'%s': %ld bytes", path, n);
    if (st == GE2_OK && fread(out->ids, 1, (size_t)n, f) != (size_t)n)
        st = ge2_error(GE2_ERR_IO, "cannot read '%s'", path);
    fclose(f);
    if (st != GE2_OK) {
        char_corpus_free(out);
        return st;
    }
    bool seen[256] = {false};
    for (long i = 0; i < n; i++)
        seen[out->ids[i]] = true;
    for (int b = 0; b < 256; b++) {
        out->stoi[b] = seen[b] ? out->vocab : -1;
        if (seen[b])
            out->itos[out->vocab++] = (uint8_t)b;
    }
    for (long i = 0; i < n; i++)
        out->ids[i] = (uint8_t)out->stoi[out->ids[i]];
    out->n = n;
    out->n_train = (int64_t)(0.9 * (double)n);
    return GE2_OK;
}

void char_corpus_free(char_corpus *c)
{
    free(c->ids);
    memset(c, 0, sizeof *c);
}

int64_t char_corpus_split_len(const char_corpus *c, bool val) { return val ? c->n - c->n_train : c->n_train; }

void char_corpus_batch(const char_corpus *c, bool val, int64_t b, int64_t t, bool sequential, int64_t step,
                       uint64_t *rng, int32_t *x, int32_t *y)
{
    const uint8_t *data = c->ids + (val ? c->n_train : 0);
    /* a window of t + 1 starts at most at len - t - 1: nanoGPT's randint(len - t) */
    const int64_t len = char_corpus_split_len(c, val);
    for (int64_t r = 0; r < b; r++) {
        const int64_t at = sequential ? ((step * b + r) * t) % (len - t - 1)
                                      : (int64_t)(ge2_splitmix64_next(rng) % (uint64_t)(len - t));
        for (int64_t i = 0; i < t; i++) {
            x[r * t + i] = data[at + i];
            y[r * t + i] = data[at + i + 1];
        }
    }
}
