/* corpus_text: the character vectors of an R lazy-load database (.rdb) as
 * plain text, one string per line (data/rdb.h). tools/setup.sh runs it on
 * r-cran-janeaustenr's data/Rdata.rdb to make the GPT trainer's corpus.
 *
 *   corpus_text IN.rdb OUT.txt
 *
 * Prints what it read: records, lines, bytes and distinct bytes (the
 * character-level vocabulary). Exit 0, or 1 with one line on stderr. */
#include <stdio.h>
#include <stdlib.h>

#include "data/rdb.h"
#include "graph/alloc.h"
#include "graph/error.h"

static int fail(const char *msg)
{
    fprintf(stderr, "corpus_text: %s\n", msg);
    return 1;
}

static ge2_status read_file(const char *path, uint8_t **data, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return ge2_error(GE2_ERR_IO, "cannot open '%s'", path);
    ge2_status st = GE2_OK;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n < 0 || fseek(f, 0, SEEK_SET) != 0)
        st = ge2_error(GE2_ERR_IO, "cannot size '%s'", path);
    *data = st == GE2_OK ? ge2_malloc(n > 0 ? (size_t)n : 1) : NULL;
    if (st == GE2_OK && !*data)
        st = ge2_error(GE2_ERR_OUT_OF_MEMORY, "'%s': %ld bytes", path, n);
    if (st == GE2_OK && fread(*data, 1, (size_t)n, f) != (size_t)n)
        st = ge2_error(GE2_ERR_IO, "cannot read '%s'", path);
    fclose(f);
    *size = (size_t)(n > 0 ? n : 0);
    return st;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return fail("usage: corpus_text IN.rdb OUT.txt");
    uint8_t *data = NULL;
    size_t size = 0;
    ge2_rdb_text t;
    if (read_file(argv[1], &data, &size) != GE2_OK || ge2_rdb_read_text(data, size, argv[1], &t) != GE2_OK) {
        ge2_free(data);
        return fail(ge2_last_error());
    }
    ge2_free(data);
    FILE *f = fopen(argv[2], "wb");
    int ok = f && fwrite(t.text, 1, t.len, f) == t.len;
    ok = f && fclose(f) == 0 && ok;
    if (!ok) {
        ge2_rdb_text_release(&t);
        fprintf(stderr, "corpus_text: cannot write '%s'\n", argv[2]);
        return 1;
    }
    int seen[256] = {0}, distinct = 0;
    for (size_t i = 0; i < t.len; i++)
        distinct += !seen[(unsigned char)t.text[i]]++;
    printf("corpus_text: %s: %d records, %lld lines, %zu bytes, %d distinct bytes -> %s\n", argv[1], t.records,
           (long long)t.lines, t.len, distinct, argv[2]);
    ge2_rdb_text_release(&t);
    return 0;
}
