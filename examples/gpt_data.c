/* The GPT trainer's data (gpt_data.h). */
#include "examples/gpt_data.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graph/error.h"
#include "graph/file.h"

ge2_status gpt_data_load_text(const char *path, gpt_data *d)
{
    memset(d, 0, sizeof *d);
    GE2_TRY(char_corpus_load(path, &d->corpus));
    d->vocab = d->corpus.vocab;
    d->source = path;
    return GE2_OK;
}

/* A SentencePiece .vocab file: line i is "piece<TAB>score", the text of id
 * i ('\xe2\x96\x81' stands for a space; "<0xNN>" is a byte). Untrusted:
 * lines without a tab, or too long, are refused by number. */
static ge2_status load_pieces(const char *path, int vocab, char ***out)
{
    int fd;
    GE2_TRY(ge2_open_regular(path, "--tokenizer", &fd));
    FILE *f = fdopen(fd, "r");
    char **pieces = calloc((size_t)vocab, sizeof *pieces);
    ge2_status st = f && pieces ? GE2_OK : ge2_error(GE2_ERR_OUT_OF_MEMORY, "%s: %d pieces", path, vocab);
    char *line = NULL;
    size_t cap = 0;
    int n = 0;
    while (st == GE2_OK && getline(&line, &cap, f) > 0) {
        char *tab = strchr(line, '\t');
        if (!tab)
            st = ge2_error(GE2_ERR_FORMAT, "%s: line %d is not 'piece<TAB>score'", path, n + 1);
        else if (n >= vocab)
            st = ge2_error(GE2_ERR_FORMAT, "%s: more than the %d pieces of --vocab-size", path, vocab);
        else if (!(pieces[n] = strndup(line, (size_t)(tab - line))))
            st = ge2_error(GE2_ERR_OUT_OF_MEMORY, "%s: piece %d", path, n);
        n += st == GE2_OK;
    }
    free(line);
    if (st == GE2_OK && n != vocab)
        st = ge2_error(GE2_ERR_FORMAT, "%s: %d pieces, but --vocab-size is %d", path, n, vocab);
    if (f)
        fclose(f);
    else
        close(fd);
    if (st != GE2_OK) {
        for (int i = 0; pieces && i < vocab; i++)
            free(pieces[i]);
        free(pieces);
        return st;
    }
    *out = pieces;
    return GE2_OK;
}

ge2_status gpt_data_load_tokens(const char *train, const char *val, int64_t vocab, const char *pieces_path,
                                gpt_data *d)
{
    memset(d, 0, sizeof *d);
    d->tokens = true;
    d->vocab = (int)vocab;
    d->source = train;
    ge2_status st = ge2_tokens_open(train, vocab, &d->train);
    if (st == GE2_OK)
        st = ge2_tokens_open(val, vocab, &d->val);
    if (st == GE2_OK && pieces_path)
        st = load_pieces(pieces_path, d->vocab, &d->pieces);
    if (st != GE2_OK)
        gpt_data_free(d);
    return st;
}

void gpt_data_free(gpt_data *d)
{
    char_corpus_free(&d->corpus);
    ge2_tokens_free(d->train);
    ge2_tokens_free(d->val);
    for (int i = 0; d->pieces && i < d->vocab; i++)
        free(d->pieces[i]);
    free(d->pieces);
    memset(d, 0, sizeof *d);
}

int64_t gpt_data_split_len(const gpt_data *d, bool val)
{
    return d->tokens ? ge2_tokens_count(val ? d->val : d->train) : char_corpus_split_len(&d->corpus, val);
}

void gpt_data_batch(const gpt_data *d, bool val, int64_t b, int64_t t, bool sequential, int64_t step, uint64_t *rng,
                    int32_t *x, int32_t *y)
{
    if (d->tokens)
        ge2_tokens_batch(val ? d->val : d->train, b, t, sequential, step, rng, x, y);
    else
        char_corpus_batch(&d->corpus, val, b, t, sequential, step, rng, x, y);
}

int32_t gpt_data_start(const gpt_data *d)
{
    if (!d->tokens)
        return d->corpus.stoi['\n'] >= 0 ? d->corpus.stoi['\n'] : 0;
    for (int i = 0; d->pieces && i < d->vocab; i++)
        if (!strcmp(d->pieces[i], "<0x0A>"))
            return i;
    return 0;
}

ge2_status gpt_data_encode(const gpt_data *d, const char *text, int32_t *ids, int64_t cap, int64_t *n)
{
    *n = 0;
    if (!d->tokens) {
        for (const char *p = text; *p; p++) {
            const int id = d->corpus.stoi[(unsigned char)*p];
            if (id < 0)
                return ge2_error(GE2_ERR_INVALID_ARGUMENT, "the prompt's byte %d (0x%02x, at %d) is not in %s", (int)*p,
                                 (unsigned char)*p, (int)(p - text), d->source);
            if (*n >= cap)
                return ge2_error(GE2_ERR_INVALID_ARGUMENT, "the prompt is longer than %lld tokens", (long long)cap);
            ids[(*n)++] = id;
        }
        return GE2_OK;
    }
    if (!d->pieces)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "a prompt on token shards needs the tokenizer's pieces (--tokenizer)");
    /* the text as SentencePiece sees it: a space before it, each space U+2581 */
    const size_t len = strlen(text);
    char *spm = malloc(3 * len + 4), *w = spm;
    if (!spm)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "the prompt's %zu bytes", len);
    if (len) /* the dummy prefix */
        w += sprintf(w, "\xe2\x96\x81");
    for (const char *p = text; *p; p++)
        w += *p == ' ' ? sprintf(w, "\xe2\x96\x81") : sprintf(w, "%c", *p);
    ge2_status st = GE2_OK;
    for (const char *p = spm; *p && st == GE2_OK;) {
        int best = -1;
        size_t best_len = 0;
        for (int i = 0; i < d->vocab; i++) {
            const size_t l = strlen(d->pieces[i]);
            const bool control = l > 2 && d->pieces[i][0] == '<' && d->pieces[i][l - 1] == '>'; /* <unk>, <0x41> */
            if (l > best_len && !strncmp(p, d->pieces[i], l) && !control)
                best = i, best_len = l;
        }
        if (best < 0) { /* byte fallback */
            char piece[8];
            snprintf(piece, sizeof piece, "<0x%02X>", (unsigned char)*p);
            for (int i = 0; i < d->vocab && best < 0; i++)
                best = strcmp(d->pieces[i], piece) ? -1 : i;
            best_len = 1;
        }
        if (best < 0)
            st = ge2_error(GE2_ERR_INVALID_ARGUMENT, "the prompt's byte 0x%02x has no piece in the tokenizer",
                           (unsigned char)*p);
        else if (*n >= cap)
            st = ge2_error(GE2_ERR_INVALID_ARGUMENT, "the prompt is longer than %lld tokens", (long long)cap);
        else
            ids[(*n)++] = best;
        p += best_len;
    }
    free(spm);
    return st;
}

void gpt_data_print(const gpt_data *d, int32_t id, FILE *out)
{
    if (!d->tokens) {
        fputc(d->corpus.itos[id], out);
        return;
    }
    if (!d->pieces) {
        fprintf(out, "<%d>", id);
        return;
    }
    const char *p = d->pieces[id];
    unsigned byte;
    char end;
    if (sscanf(p, "<0x%2X%c", &byte, &end) == 2 && end == '>' && strlen(p) == 6) {
        fputc((int)byte, out);
        return;
    }
    for (; *p; p++) {
        if (!strncmp(p, "\xe2\x96\x81", 3)) { /* SentencePiece's space */
            fputc(' ', out);
            p += 2;
        } else {
            fputc(*p, out);
        }
    }
}
