/* The GEMM registry's host side: key text, the cache file format, and the
 * process-wide cache that every program's prepare consults. No CUDA here, so
 * all of it is tested in CI; the timing lives in gemm_registry.cu. */
#include "kernels/cuda/gemm_registry.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "graph/alloc.h"

/* A line longer than this cannot be an entry (key + 128 hex + numbers). */
/* The cache token of a tiled choice: "tiled:" and its configuration. */
#define TILED_PREFIX "tiled:"
#define LINE_MAX_BYTES 512

/* ------------------------------------------------------------------- keys */

static bool key_char(char c)
{
    return isalnum((unsigned char)c) || c == '.' || c == '_' || c == '-';
}

/* s with every character outside key_char as '_', so names with spaces or
 * colons cannot break the key's token structure. False if it does not fit:
 * two long names must not share a truncated key. */
static bool sanitize(const char *s, char *out, size_t size)
{
    size_t i = 0;
    for (; s[i] && i + 1 < size; i++)
        out[i] = key_char(s[i]) ? s[i] : '_';
    out[i] = '\0';
    return s[i] == '\0';
}

ge2_status ge2_gemm_key_format(const ge2_gemm_key *key, char *buf, size_t size)
{
    char op[GE2_GEMM_KEY_MAX], epi[GE2_GEMM_KEY_MAX], dtype[GE2_GEMM_KEY_MAX], gpu[GE2_GEMM_KEY_MAX];
    const char *op_name = key->op ? key->op : "?";
    bool fits = sanitize(op_name, op, sizeof op);
    fits &= sanitize(key->epilogue ? key->epilogue : "?", epi, sizeof epi);
    fits &= sanitize(key->dtype ? key->dtype : "?", dtype, sizeof dtype);
    fits &= sanitize(key->gpu && key->gpu[0] ? key->gpu : "?", gpu, sizeof gpu);
    const char *kernels = key->kernels ? key->kernels : "lt";
    fits &= strcmp(kernels, "lt") == 0 || strcmp(kernels, "tiled") == 0 || strcmp(kernels, "lt+tiled") == 0;
    int n = snprintf(buf, size, "%s:%s:%c%c:m%lld:n%lld:k%lld:b%lld:%s:%s:a%u.%u.%u:ws%llu:%s:sm%d:lt%d:%s", op, epi,
                     key->trans_a ? 'T' : 'N', key->trans_b ? 'T' : 'N', (long long)key->m, (long long)key->n,
                     (long long)key->k, (long long)key->batch, dtype, key->f16 ? "fp16in" : key->bf16 ? "bf16in" : key->tf32 ? "tf32" : "fp32", key->align_a,
                     key->align_b, key->align_d, (unsigned long long)key->workspace_bytes, gpu, key->sm_count,
                     key->lt_version, kernels);
    if (!fits || n < 0 || (size_t)n >= size || n >= GE2_GEMM_KEY_MAX) {
        if (size)
            buf[0] = '\0';
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2 gemm registry: the key of %.40s (%.40s) needs %d bytes, "
                         "have %zu (at most %d)", op_name, epi, n, size, GE2_GEMM_KEY_MAX - 1);
    }
    return GE2_OK;
}

/* A key token as ge2_gemm_key_format writes them: key characters, ':' and '+'. */
static bool valid_key(const char *s, size_t len)
{
    if (len == 0 || len >= GE2_GEMM_KEY_MAX)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!key_char(s[i]) && s[i] != ':' && s[i] != '+')
            return false;
    return true;
}

/* ------------------------------------------------------------------ cache */

void ge2_gemm_cache_clear(ge2_gemm_cache *cache)
{
    ge2_free(cache->entries);
    cache->entries = NULL;
    cache->n = cache->cap = 0;
}

const ge2_gemm_choice *ge2_gemm_cache_find(const ge2_gemm_cache *cache, const char *key)
{
    for (int i = 0; i < cache->n; i++)
        if (strcmp(cache->entries[i].key, key) == 0)
            return &cache->entries[i].choice;
    return NULL;
}

ge2_status ge2_gemm_cache_put(ge2_gemm_cache *cache, const char *key, const ge2_gemm_choice *choice)
{
    if (!valid_key(key, strlen(key)))
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2 gemm registry: '%.40s' is not a key", key);
    ge2_gemm_choice *existing = (ge2_gemm_choice *)ge2_gemm_cache_find(cache, key);
    if (existing) {
        *existing = *choice;
        return GE2_OK;
    }
    if (!ge2_reserve((void **)&cache->entries, &cache->cap, cache->n, sizeof *cache->entries, 16))
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2 gemm registry: out of host memory (%d entries)", cache->n + 1);
    ge2_gemm_cache_entry *e = &cache->entries[cache->n++];
    snprintf(e->key, sizeof e->key, "%s", key);
    e->choice = *choice;
    return GE2_OK;
}

/* Splits line (NUL-terminated, no '\n') into at most max whitespace-separated
 * tokens, in place; returns how many there were (max + 1 if more). */
static int tokenize(char *line, char **tok, int max)
{
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(line, " \t\r\v\f", &save); t; t = strtok_r(NULL, " \t\r\v\f", &save)) {
        if (n == max)
            return max + 1;
        tok[n++] = t;
    }
    return n;
}

/* One entry line; false for anything that is not exactly a valid entry. */
static bool parse_entry(char *line, char *key, ge2_gemm_choice *c)
{
    char *tok[4];
    if (tokenize(line, tok, 4) != 4)
        return false;
    size_t key_len = strlen(tok[0]);
    const size_t hex_len = 2 * GE2_GEMM_ALGO_BYTES;
    if (!valid_key(tok[0], key_len))
        return false;
    if (strncmp(tok[1], TILED_PREFIX, strlen(TILED_PREFIX)) == 0) {
        c->tiled = true;
        if (!ge2_tiled_config_parse(tok[1] + strlen(TILED_PREFIX), &c->config))
            return false;
    } else {
        if (strlen(tok[1]) != hex_len || strspn(tok[1], "0123456789abcdefABCDEF") != hex_len)
            return false;
        for (int i = 0; i < GE2_GEMM_ALGO_BYTES; i++) {
            char pair[3] = {tok[1][2 * i], tok[1][2 * i + 1], '\0'};
            c->algo[i] = (uint8_t)strtoul(pair, NULL, 16);
        }
    }
    memcpy(key, tok[0], key_len + 1);
    char *end = NULL;
    errno = 0;
    double us = strtod(tok[2], &end);
    if (errno || *end || !isfinite(us) || us < 0 || us > 1e9)
        return false;
    errno = 0;
    long cands = strtol(tok[3], &end, 10);
    if (errno || *end || cands < 1 || cands > 1024)
        return false;
    c->us = us;
    c->n_candidates = (int)cands;
    return true;
}

ge2_status ge2_gemm_cache_parse(ge2_gemm_cache *cache, const char *text, size_t len, int *bad_lines)
{
    int bad = 0;
    char line[LINE_MAX_BYTES + 1];
    size_t pos = 0;
    while (pos < len) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t line_len = nl ? (size_t)(nl - (text + pos)) : len - pos;
        const char *start = text + pos;
        pos += line_len + (nl ? 1 : 0);
        size_t lead = 0;
        while (lead < line_len && isspace((unsigned char)start[lead]))
            lead++;
        if (lead == line_len || start[lead] == '#')
            continue; /* blank or comment */
        if (line_len > LINE_MAX_BYTES || memchr(start, '\0', line_len)) {
            bad++;
            continue;
        }
        memcpy(line, start, line_len);
        line[line_len] = '\0';
        char key[GE2_GEMM_KEY_MAX];
        ge2_gemm_choice c;
        memset(&c, 0, sizeof c);
        if (!parse_entry(line, key, &c)) {
            bad++;
            continue;
        }
        GE2_TRY(ge2_gemm_cache_put(cache, key, &c));
    }
    if (bad_lines)
        *bad_lines = bad;
    return GE2_OK;
}

ge2_status ge2_gemm_cache_format_line(const char *key, const ge2_gemm_choice *choice, char *buf, size_t size)
{
    char hex[2 * GE2_GEMM_ALGO_BYTES + 1];
    if (choice->tiled) {
        int p = snprintf(hex, sizeof hex, "%s", TILED_PREFIX);
        ge2_tiled_config_format(choice->config, hex + p, sizeof hex - (size_t)p);
    } else {
        for (int i = 0; i < GE2_GEMM_ALGO_BYTES; i++)
            snprintf(hex + 2 * i, 3, "%02x", choice->algo[i]);
    }
    /* %.17g: the time survives a round trip exactly. */
    int n = snprintf(buf, size, "%s %s %.17g %d\n", key, hex, choice->us, choice->n_candidates);
    if (n < 0 || (size_t)n >= size)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2 gemm registry: cache line for %.40s needs %d bytes, have %zu",
                         key, n, size);
    return GE2_OK;
}

ge2_status ge2_gemm_cache_load(ge2_gemm_cache *cache, const char *path, int *bad_lines)
{
    if (bad_lines)
        *bad_lines = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno == ENOENT)
            return GE2_OK;
        return ge2_error(GE2_ERR_IO, "ge2 gemm registry: cannot open cache '%s': %s", path, strerror(errno));
    }
    char *text = ge2_malloc(GE2_GEMM_CACHE_MAX_FILE_BYTES + 1);
    if (!text) {
        fclose(f);
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2 gemm registry: out of host memory reading '%s'", path);
    }
    /* One byte more than allowed tells an oversized file from a full one. */
    size_t len = fread(text, 1, GE2_GEMM_CACHE_MAX_FILE_BYTES + 1, f);
    bool failed = ferror(f) != 0;
    fclose(f);
    ge2_status st = GE2_OK;
    if (failed)
        st = ge2_error(GE2_ERR_IO, "ge2 gemm registry: reading cache '%s' failed", path);
    else if (len > GE2_GEMM_CACHE_MAX_FILE_BYTES)
        st = ge2_error(GE2_ERR_IO, "ge2 gemm registry: cache '%s' is over %zu bytes; not read", path,
                       GE2_GEMM_CACHE_MAX_FILE_BYTES);
    else
        st = ge2_gemm_cache_parse(cache, text, len, bad_lines);
    ge2_free(text);
    return st;
}

/* mkdir -p of path's parent folders. */
static ge2_status make_parents(const char *path)
{
    char dir[4096];
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir)
        return ge2_error(GE2_ERR_IO, "ge2 gemm registry: cache path too long");
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(dir, 0755) != 0 && errno != EEXIST)
            return ge2_error(GE2_ERR_IO, "ge2 gemm registry: cannot create '%s': %s", dir, strerror(errno));
        *p = '/';
    }
    return GE2_OK;
}

ge2_status ge2_gemm_cache_save(const ge2_gemm_cache *cache, const char *path)
{
    GE2_TRY(make_parents(path));
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return ge2_error(GE2_ERR_IO, "ge2 gemm registry: cache path too long");
    FILE *f = fopen(tmp, "w");
    if (!f)
        return ge2_error(GE2_ERR_IO, "ge2 gemm registry: cannot write '%s': %s", tmp, strerror(errno));
    fprintf(f, "# ge2 GEMM kernel cache: <key> <cublasLtMatmulAlgo_t as hex, or tiled:<tile>:<splits>> <median us> "
               "<candidates timed>\n");
    ge2_status st = GE2_OK;
    char line[LINE_MAX_BYTES + 1];
    for (int i = 0; i < cache->n && st == GE2_OK; i++) {
        st = ge2_gemm_cache_format_line(cache->entries[i].key, &cache->entries[i].choice, line, sizeof line);
        if (st == GE2_OK)
            fputs(line, f);
    }
    if (fclose(f) != 0 && st == GE2_OK)
        st = ge2_error(GE2_ERR_IO, "ge2 gemm registry: writing '%s' failed", tmp);
    if (st == GE2_OK && rename(tmp, path) != 0)
        st = ge2_error(GE2_ERR_IO, "ge2 gemm registry: cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
    if (st != GE2_OK)
        remove(tmp);
    return st;
}

/* ------------------------------------------------------------- selection */

void ge2_gemm_selection_str(const ge2_gemm_selection *sel, char *buf, size_t size)
{
    switch (sel->source) {
    case GE2_GEMM_TUNED:
    case GE2_GEMM_CACHED:
        snprintf(buf, size, " (%s %.1f us of %d candidates)", sel->source == GE2_GEMM_TUNED ? "tuned" : "cached",
                 sel->us, sel->n_candidates);
        break;
    default:
        snprintf(buf, size, " (heuristic, %d candidate%s)", sel->n_candidates, sel->n_candidates == 1 ? "" : "s");
        break;
    }
}

/* --------------------------------------------------- process-wide registry */

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static ge2_gemm_cache registry_cache;
static bool registry_loaded; /* the cache file has been read into registry_cache */
static char registry_path[4096]; /* which file ("" for none): another program's is another cache */
static ge2_gemm_registry_stats registry_stats;
static bool registry_warned; /* the cache file could not be written (said once) */

void ge2_gemm_registry_stats_get(ge2_gemm_registry_stats *out)
{
    pthread_mutex_lock(&registry_lock);
    *out = registry_stats;
    pthread_mutex_unlock(&registry_lock);
}

/* Reads the cache file once; a file that cannot be read is a warning. Lock held. */
static void load_locked(const char *path)
{
    if (registry_loaded && strcmp(registry_path, path ? path : "") == 0)
        return;
    if (registry_loaded)
        ge2_gemm_cache_clear(&registry_cache);
    registry_loaded = true;
    snprintf(registry_path, sizeof registry_path, "%s", path ? path : "");
    if (!path)
        return;
    int bad = 0;
    if (ge2_gemm_cache_load(&registry_cache, path, &bad) != GE2_OK) {
        fprintf(stderr, "ge2: warning: %s; GEMMs are tuned afresh\n", ge2_last_error());
        ge2_clear_error();
    }
    registry_stats.bad_lines += bad;
}

bool ge2_gemm_registry_lookup(const char *path, const char *key, ge2_gemm_choice *out)
{
    pthread_mutex_lock(&registry_lock);
    load_locked(path);
    const ge2_gemm_choice *c = ge2_gemm_cache_find(&registry_cache, key);
    if (c)
        *out = *c;
    pthread_mutex_unlock(&registry_lock);
    return c != NULL;
}

ge2_status ge2_gemm_registry_store(const char *path, const char *key, const ge2_gemm_choice *choice)
{
    pthread_mutex_lock(&registry_lock);
    load_locked(path);
    ge2_status st = ge2_gemm_cache_put(&registry_cache, key, choice);
    if (st == GE2_OK && path) {
        /* Merge what other processes wrote since we read the file; ours win. */
        ge2_gemm_cache merged = {0};
        int bad = 0;
        ge2_status io = ge2_gemm_cache_load(&merged, path, &bad);
        for (int i = 0; i < registry_cache.n && io == GE2_OK; i++)
            io = ge2_gemm_cache_put(&merged, registry_cache.entries[i].key, &registry_cache.entries[i].choice);
        if (io == GE2_OK)
            io = ge2_gemm_cache_save(&merged, path);
        if (io != GE2_OK) {
            if (!registry_warned) /* once: every later GEMM would fail the same way */
                fprintf(stderr, "ge2: warning: %s; tuned GEMM choices are kept for this process only\n",
                        ge2_last_error());
            registry_warned = true;
            ge2_clear_error();
        }
        ge2_gemm_cache_clear(&merged);
    }
    pthread_mutex_unlock(&registry_lock);
    return st;
}

void ge2_gemm_registry_count(ge2_gemm_source source, int timings)
{
    pthread_mutex_lock(&registry_lock);
    if (source == GE2_GEMM_TUNED)
        registry_stats.tuned++;
    else if (source == GE2_GEMM_CACHED)
        registry_stats.hits++;
    else
        registry_stats.heuristic++;
    registry_stats.timings += timings;
    pthread_mutex_unlock(&registry_lock);
}

void ge2_gemm_registry_reset(void)
{
    pthread_mutex_lock(&registry_lock);
    ge2_gemm_cache_clear(&registry_cache);
    registry_loaded = false;
    memset(&registry_stats, 0, sizeof registry_stats);
    pthread_mutex_unlock(&registry_lock);
}
