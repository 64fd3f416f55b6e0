/* The character-level corpus: load, vocabulary, splits and batches. */
#include "examples/char_data.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/tokens.h" /* ge2_window_start */
#include "graph/error.h"
#include "graph/file.h"

ge2_status char_corpus_load(const char *path, char_corpus *out)
{
    memset(out, 0, sizeof *out);
    int fd;
    if (ge2_open_regular(path, "the corpus", &fd) != GE2_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", ge2_last_error());
        return ge2_error(GE2_ERR_IO, "%s (tools/setup.sh makes the default corpus; --data names another)", why);
    }
    struct stat sb;
    ge2_status st = fstat(fd, &sb) == 0 ? GE2_OK : ge2_error(GE2_ERR_IO, "cannot stat '%s'", path);
    const int64_t n = st == GE2_OK ? (int64_t)sb.st_size : 0;
    if (st == GE2_OK && n == 0)
        st = ge2_error(GE2_ERR_FORMAT, "the corpus '%s' is empty: it needs text to train on", path);
    if (st == GE2_OK && !(out->ids = malloc((size_t)n)))
        st = ge2_error(GE2_ERR_OUT_OF_MEMORY, "the corpus '%s': cannot allocate its %lld bytes", path, (long long)n);
    for (int64_t got = 0; st == GE2_OK && got < n;) {
        ssize_t r = read(fd, out->ids + got, (size_t)(n - got));
        if (r <= 0)
            st = ge2_error(GE2_ERR_IO, "cannot read the corpus '%s': %s", path, r < 0 ? strerror(errno) : "it shrank");
        got += r > 0 ? r : 0;
    }
    close(fd);
    if (st != GE2_OK) {
        char_corpus_free(out);
        return st;
    }
    bool seen[256] = {false};
    for (int64_t i = 0; i < n; i++)
        seen[out->ids[i]] = true;
    for (int b = 0; b < 256; b++) {
        out->stoi[b] = seen[b] ? out->vocab : -1;
        if (seen[b])
            out->itos[out->vocab++] = (uint8_t)b;
    }
    out->control_bytes = 0;
    for (int64_t i = 0; i < n; i++)
        out->control_bytes += out->ids[i] < 0x20 && out->ids[i] != '\n' && out->ids[i] != '\t' && out->ids[i] != '\r';
    for (int64_t i = 0; i < n; i++)
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
    const int64_t len = char_corpus_split_len(c, val);
    for (int64_t r = 0; r < b; r++) {
        const int64_t at = ge2_window_start(len, b, t, sequential, step, r, rng);
        for (int64_t i = 0; i < t; i++) {
            x[r * t + i] = data[at + i];
            y[r * t + i] = data[at + i + 1];
        }
    }
}
