/* llm.c's token shards (tokens.h): checked when opened, then mapped. */
#include "data/tokens.h"

#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "graph/alloc.h"
#include "graph/error.h"
#include "graph/file.h"
#include "graph/rng.h"

typedef struct shard {
    const uint8_t *ids; /* [2 n] little-endian uint16 */
    int64_t n, first;   /* its tokens, and the sequence position of its first */
    void *map;          /* the mapping to unmap, or NULL (from memory) */
    size_t map_bytes;
} shard;

struct ge2_tokens {
    shard *shards;
    int n_shards;
    int64_t count;
};

static uint32_t le32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* The header, the size and every id of one shard's bytes. */
static ge2_status check_shard(const uint8_t *bytes, size_t size, const char *path, int64_t vocab, int64_t *n)
{
    if (size < GE2_TOKENS_HEADER_BYTES)
        return ge2_error(GE2_ERR_FORMAT, "%s: %zu bytes, shorter than the %d-byte header of a token shard", path, size,
                         GE2_TOKENS_HEADER_BYTES);
    const uint32_t magic = le32(bytes), version = le32(bytes + 4), count = le32(bytes + 8);
    if (magic != GE2_TOKENS_MAGIC)
        return ge2_error(GE2_ERR_FORMAT, "%s: header magic is %u, not %d (llm.c's token shards)", path, magic,
                         GE2_TOKENS_MAGIC);
    if (version != GE2_TOKENS_VERSION)
        return ge2_error(GE2_ERR_FORMAT, "%s: header version is %u; ge2 reads version %d (uint16 tokens)", path, version,
                         GE2_TOKENS_VERSION);
    if (count == 0 || (int32_t)count < 0)
        return ge2_error(GE2_ERR_FORMAT, "%s: header token count is %d; a shard holds at least one token", path,
                         (int32_t)count);
    const uint64_t want = GE2_TOKENS_HEADER_BYTES + 2 * (uint64_t)count;
    if ((uint64_t)size != want)
        return ge2_error(GE2_ERR_FORMAT, "%s: the header says %u tokens (a file of %llu bytes), the file has %zu bytes",
                         path, count, (unsigned long long)want, size);
    const uint8_t *ids = bytes + GE2_TOKENS_HEADER_BYTES;
    for (uint32_t i = 0; i < count; i++)
        if (le16(ids + 2 * (size_t)i) >= vocab)
            return ge2_error(GE2_ERR_FORMAT, "%s: token %u is %u, outside the vocabulary of %lld (--vocab-size)", path, i,
                             le16(ids + 2 * (size_t)i), (long long)vocab);
    *n = count;
    return GE2_OK;
}

static ge2_status add_shard(ge2_tokens *t, const uint8_t *bytes, size_t size, const char *path, int64_t vocab,
                            void *map)
{
    int64_t n = 0;
    GE2_TRY(check_shard(bytes, size, path, vocab, &n));
    t->shards[t->n_shards] = (shard){bytes + GE2_TOKENS_HEADER_BYTES, n, t->count, map, size};
    t->n_shards++;
    t->count += n;
    return GE2_OK;
}

/* Maps one file and adds it. */
static ge2_status map_shard(ge2_tokens *t, const char *path, int64_t vocab)
{
    int fd;
    GE2_TRY(ge2_open_regular(path, "the token shard", &fd));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        close(fd);
        return ge2_error(GE2_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    }
    const size_t size = (size_t)sb.st_size;
    void *map = size ? mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    close(fd);
    if (size && map == MAP_FAILED)
        return ge2_error(GE2_ERR_IO, "%s: cannot map its %zu bytes: %s", path, size, strerror(errno));
    ge2_status st = add_shard(t, map ? map : (const uint8_t *)"", size, path, vocab, map);
    if (st != GE2_OK && map)
        munmap(map, size);
    return st;
}

static ge2_status tokens_new(int n_shards, ge2_tokens **out)
{
    ge2_tokens *t = ge2_calloc(1, sizeof *t);
    if (t)
        t->shards = ge2_calloc((size_t)n_shards, sizeof *t->shards);
    if (!t || !t->shards) {
        ge2_free(t);
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_tokens_open: %d shards", n_shards);
    }
    *out = t;
    return GE2_OK;
}

ge2_status ge2_tokens_open(const char *pattern, int64_t vocab, ge2_tokens **out)
{
    if (!pattern || !out || vocab < 1 || vocab > 65536)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_tokens_open: a pattern, out and a vocabulary in [1, 65536] "
                         "(uint16 ids) are required, got %lld", (long long)vocab);
    *out = NULL;
    glob_t g;
    const int rc = glob(pattern, GLOB_ERR, NULL, &g);
    if (rc == GLOB_NOMATCH)
        return ge2_error(GE2_ERR_IO, "%s: no file matches", pattern);
    if (rc != 0) {
        globfree(&g);
        return ge2_error(GE2_ERR_IO, "%s: cannot list the files it names", pattern);
    }
    ge2_tokens *t = NULL;
    ge2_status st = g.gl_pathc > (size_t)INT32_MAX ? ge2_error(GE2_ERR_INVALID_ARGUMENT, "%s: too many files", pattern)
                                                   : tokens_new((int)g.gl_pathc, &t);
    for (size_t i = 0; st == GE2_OK && i < g.gl_pathc; i++)
        st = map_shard(t, g.gl_pathv[i], vocab);
    globfree(&g);
    if (st != GE2_OK) {
        if (t)
            ge2_tokens_free(t);
        return st;
    }
    *out = t;
    return GE2_OK;
}

ge2_status ge2_tokens_from_memory(const void *bytes, size_t size, const char *path, int64_t vocab, ge2_tokens **out)
{
    if (!bytes || !path || !out || vocab < 1 || vocab > 65536)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_tokens_from_memory: bytes, a path, out and a vocabulary in "
                         "[1, 65536] are required");
    *out = NULL;
    ge2_tokens *t;
    GE2_TRY(tokens_new(1, &t));
    ge2_status st = add_shard(t, bytes, size, path, vocab, NULL);
    if (st != GE2_OK) {
        ge2_tokens_free(t);
        return st;
    }
    *out = t;
    return GE2_OK;
}

void ge2_tokens_free(ge2_tokens *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->n_shards; i++)
        if (t->shards[i].map)
            munmap(t->shards[i].map, t->shards[i].map_bytes);
    ge2_free(t->shards);
    ge2_free(t);
}

int64_t ge2_tokens_count(const ge2_tokens *t) { return t ? t->count : 0; }
int ge2_tokens_shard_count(const ge2_tokens *t) { return t ? t->n_shards : 0; }

uint16_t ge2_tokens_at(const ge2_tokens *t, int64_t i)
{
    /* the shard holding position i: a binary search over their first positions */
    int lo = 0, hi = t->n_shards - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (t->shards[mid].first <= i)
            lo = mid;
        else
            hi = mid - 1;
    }
    const shard *s = &t->shards[lo];
    return le16(s->ids + 2 * (size_t)(i - s->first));
}

int64_t ge2_window_start(int64_t len, int64_t b, int64_t t, bool sequential, int64_t step, int64_t r, uint64_t *rng)
{
    return sequential ? ((step * b + r) * t) % (len - t - 1)
                      : (int64_t)(ge2_splitmix64_next(rng) % (uint64_t)(len - t));
}

void ge2_tokens_batch(const ge2_tokens *tokens, int64_t b, int64_t t, bool sequential, int64_t step, uint64_t *rng,
                      int32_t *x, int32_t *y)
{
    for (int64_t r = 0; r < b; r++) {
        const int64_t at = ge2_window_start(tokens->count, b, t, sequential, step, r, rng);
        /* t + 1 tokens from at: x takes the first t, y the last t */
        int32_t *xr = x + r * t, *yr = y + r * t;
        for (int64_t i = 0; i <= t; i++) {
            const int32_t id = ge2_tokens_at(tokens, at + i);
            if (i < t)
                xr[i] = id;
            if (i > 0)
                yr[i - 1] = id;
        }
    }
}
