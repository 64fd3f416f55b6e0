/* A strict parser for the one JSON shape a safetensors header has:
 *
 *   { "<tensor>": {"dtype": "<str>", "shape": [<int>, ...], "data_offsets": [<int>, <int>]},
 *     "__metadata__": {"<key>": "<str>", ...}, ... }
 *
 * Anything else (other value types, unknown or repeated fields, duplicate
 * names, numbers with signs, fractions or leading zeros, raw control
 * characters, bad escapes, trailing bytes other than space padding) is an
 * error naming the byte offset. No recursion and no allocation beyond the
 * entry arrays, so no input can exhaust the stack.
 */
#include <stdlib.h>
#include <string.h>

#include "checkpoint/safetensors.h"
#include "graph/alloc.h"
#include "graph/error.h"

typedef struct json {
    const char *s;
    size_t len, pos;
    const char *what; /* file name for errors */
} json;

static ge2_status json_fail(const json *j, const char *expected)
{
    return ge2_error(GE2_ERR_FORMAT, "%s: bad safetensors header: expected %s at byte %zu", j->what, expected,
                     j->pos);
}

static void json_ws(json *j)
{
    while (j->pos < j->len && (j->s[j->pos] == ' ' || j->s[j->pos] == '\t' || j->s[j->pos] == '\n' ||
                               j->s[j->pos] == '\r'))
        j->pos++;
}

/* Consumes c (after whitespace) if it is next. */
static bool json_eat(json *j, char c)
{
    json_ws(j);
    if (j->pos < j->len && j->s[j->pos] == c) {
        j->pos++;
        return true;
    }
    return false;
}

static ge2_status json_expect(json *j, char c)
{
    char what[4] = {'\'', c, '\'', 0};
    return json_eat(j, c) ? GE2_OK : json_fail(j, what);
}

static int json_hex(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static bool json_u16(json *j, unsigned *out)
{
    if (j->len - j->pos < 4)
        return false;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int h = json_hex(j->s[j->pos + i]);
        if (h < 0)
            return false;
        v = v << 4 | (unsigned)h;
    }
    j->pos += 4;
    *out = v;
    return true;
}

/* Appends code point cp as UTF-8; false when it does not fit. */
static bool json_put_utf8(char *out, size_t cap, size_t *n, unsigned cp)
{
    char b[4];
    size_t k;
    if (cp < 0x80) {
        b[0] = (char)cp, k = 1;
    } else if (cp < 0x800) {
        b[0] = (char)(0xc0 | cp >> 6), b[1] = (char)(0x80 | (cp & 0x3f)), k = 2;
    } else if (cp < 0x10000) {
        b[0] = (char)(0xe0 | cp >> 12), b[1] = (char)(0x80 | (cp >> 6 & 0x3f)), b[2] = (char)(0x80 | (cp & 0x3f)),
        k = 3;
    } else {
        b[0] = (char)(0xf0 | cp >> 18), b[1] = (char)(0x80 | (cp >> 12 & 0x3f)),
        b[2] = (char)(0x80 | (cp >> 6 & 0x3f)), b[3] = (char)(0x80 | (cp & 0x3f)), k = 4;
    }
    if (*n + k >= cap)
        return false;
    memcpy(out + *n, b, k);
    *n += k;
    return true;
}

/* A string into out[cap] (NUL-terminated); longer strings are an error. */
static ge2_status json_string(json *j, char *out, size_t cap)
{
    if (!json_eat(j, '"'))
        return json_fail(j, "a string");
    size_t n = 0;
    for (;;) {
        if (j->pos >= j->len)
            return json_fail(j, "the end of a string");
        unsigned char c = (unsigned char)j->s[j->pos];
        if (c == '"') {
            j->pos++;
            break;
        }
        if (c < 0x20)
            return json_fail(j, "no raw control character in a string");
        j->pos++;
        unsigned cp = c;
        if (c == '\\') {
            if (j->pos >= j->len)
                return json_fail(j, "an escape");
            char e = j->s[j->pos++];
            const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
            const char *hit = e ? strchr(from, e) : NULL;
            if (hit) {
                cp = (unsigned char)to[hit - from];
            } else if (e == 'u') {
                if (!json_u16(j, &cp))
                    return json_fail(j, "4 hex digits after \\u");
                if (cp >= 0xdc00 && cp <= 0xdfff)
                    return json_fail(j, "no lone low surrogate");
                if (cp >= 0xd800 && cp <= 0xdbff) {
                    unsigned lo;
                    if (j->len - j->pos < 2 || j->s[j->pos] != '\\' || j->s[j->pos + 1] != 'u')
                        return json_fail(j, "a low surrogate after a high one");
                    j->pos += 2;
                    if (!json_u16(j, &lo) || lo < 0xdc00 || lo > 0xdfff)
                        return json_fail(j, "a low surrogate after a high one");
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                }
                if (cp == 0)
                    return json_fail(j, "no NUL in a string");
                if (!json_put_utf8(out, cap, &n, cp))
                    return json_fail(j, "a shorter string");
                continue;
            } else {
                return json_fail(j, "a valid escape");
            }
        }
        if (n + 1 >= cap)
            return json_fail(j, "a shorter string");
        out[n++] = (char)cp;
    }
    out[n] = '\0';
    return GE2_OK;
}

/* Room for one more element of *items (count n, capacity *cap, at most max). */
static ge2_status json_grow(json *j, void **items, int n, int *cap, int max, size_t size)
{
    if (n < *cap)
        return GE2_OK;
    if (n >= max)
        return ge2_error(GE2_ERR_FORMAT, "%s: bad safetensors header: more than %d entries", j->what, max);
    if (!ge2_reserve(items, cap, n, size, 16))
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "%s: out of memory reading the header", j->what);
    return GE2_OK;
}

/* A non-negative integer below 2^63. */
static ge2_status json_uint(json *j, uint64_t *out)
{
    json_ws(j);
    size_t start = j->pos;
    uint64_t v = 0;
    while (j->pos < j->len && j->s[j->pos] >= '0' && j->s[j->pos] <= '9') {
        unsigned d = (unsigned)(j->s[j->pos] - '0');
        if (v > ((uint64_t)INT64_MAX - d) / 10)
            return json_fail(j, "an integer below 2^63");
        v = v * 10 + d;
        j->pos++;
    }
    if (j->pos == start)
        return json_fail(j, "a non-negative integer");
    if (j->s[start] == '0' && j->pos - start > 1)
        return json_fail(j, "an integer without leading zeros");
    if (j->pos < j->len && (j->s[j->pos] == '.' || j->s[j->pos] == 'e' || j->s[j->pos] == 'E'))
        return json_fail(j, "an integer");
    *out = v;
    return GE2_OK;
}

/* [int, ...] into out[max]; *n gets the count. */
static ge2_status json_uint_array(json *j, uint64_t *out, int max, int *n)
{
    GE2_TRY(json_expect(j, '['));
    *n = 0;
    if (json_eat(j, ']'))
        return GE2_OK;
    do {
        if (*n == max)
            return json_fail(j, "a shorter array");
        GE2_TRY(json_uint(j, &out[(*n)++]));
    } while (json_eat(j, ','));
    return json_expect(j, ']');
}

static ge2_status json_entry(json *j, ge2_st_entry *e)
{
    bool have_dtype = false, have_shape = false, have_offsets = false;
    char key[32];
    GE2_TRY(json_expect(j, '{'));
    if (json_eat(j, '}'))
        return json_fail(j, "dtype, shape and data_offsets");
    do {
        size_t at = j->pos;
        GE2_TRY(json_string(j, key, sizeof key));
        GE2_TRY(json_expect(j, ':'));
        if (!strcmp(key, "dtype") && !have_dtype) {
            have_dtype = true;
            GE2_TRY(json_string(j, e->dtype, sizeof e->dtype));
            if (!ge2_st_dtype_size(e->dtype))
                return ge2_error(GE2_ERR_FORMAT, "%s: tensor %s: unknown dtype \"%s\"", j->what, e->name, e->dtype);
        } else if (!strcmp(key, "shape") && !have_shape) {
            have_shape = true;
            uint64_t dims[GE2_ST_MAX_RANK];
            GE2_TRY(json_uint_array(j, dims, GE2_ST_MAX_RANK, &e->rank));
            for (int i = 0; i < e->rank; i++)
                e->shape[i] = (int64_t)dims[i];
        } else if (!strcmp(key, "data_offsets") && !have_offsets) {
            have_offsets = true;
            uint64_t off[2];
            int n;
            GE2_TRY(json_uint_array(j, off, 2, &n));
            if (n != 2)
                return ge2_error(GE2_ERR_FORMAT, "%s: tensor %s: data_offsets needs [begin, end]", j->what, e->name);
            e->begin = off[0];
            e->end = off[1];
        } else {
            j->pos = at;
            return json_fail(j, "one each of dtype, shape, data_offsets");
        }
    } while (json_eat(j, ','));
    GE2_TRY(json_expect(j, '}'));
    if (!have_dtype || !have_shape || !have_offsets)
        return ge2_error(GE2_ERR_FORMAT, "%s: tensor %s: needs dtype, shape and data_offsets", j->what, e->name);
    return GE2_OK;
}

static ge2_status json_metadata(json *j, ge2_st_file *out)
{
    GE2_TRY(json_expect(j, '{'));
    if (json_eat(j, '}'))
        return GE2_OK;
    do {
        GE2_TRY(json_grow(j, (void **)&out->meta, out->n_meta, &out->cap_meta, GE2_ST_MAX_META, sizeof *out->meta));
        ge2_st_kv *kv = &out->meta[out->n_meta];
        GE2_TRY(json_string(j, kv->key, sizeof kv->key));
        for (int i = 0; i < out->n_meta; i++)
            if (!strcmp(out->meta[i].key, kv->key))
                return ge2_error(GE2_ERR_FORMAT, "%s: __metadata__ key \"%s\" appears twice", j->what, kv->key);
        GE2_TRY(json_expect(j, ':'));
        GE2_TRY(json_string(j, kv->value, sizeof kv->value));
        out->n_meta++;
    } while (json_eat(j, ','));
    return json_expect(j, '}');
}

static int json_cmp_names(const void *a, const void *b)
{
    return strcmp((*(const ge2_st_entry *const *)a)->name, (*(const ge2_st_entry *const *)b)->name);
}

/* Duplicate tensor names, found by sorting so a huge header stays O(n log n). */
static ge2_status json_unique_names(const json *j, const ge2_st_file *out)
{
    if (out->n_entries < 2)
        return GE2_OK;
    const ge2_st_entry **sorted = ge2_malloc((size_t)out->n_entries * sizeof *sorted);
    if (!sorted)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "%s: out of memory reading the header", j->what);
    for (int i = 0; i < out->n_entries; i++)
        sorted[i] = &out->entries[i];
    qsort(sorted, (size_t)out->n_entries, sizeof *sorted, json_cmp_names);
    ge2_status st = GE2_OK;
    for (int i = 1; i < out->n_entries && st == GE2_OK; i++)
        if (!strcmp(sorted[i - 1]->name, sorted[i]->name))
            st = ge2_error(GE2_ERR_FORMAT, "%s: tensor %s appears twice", j->what, sorted[i]->name);
    ge2_free(sorted);
    return st;
}

ge2_status ge2_st_parse_header(const char *text, size_t len, const char *what, ge2_st_file *out)
{
    json j = {text, len, 0, what};
    bool have_meta = false;
    GE2_TRY(json_expect(&j, '{'));
    if (!json_eat(&j, '}')) {
        do {
            char name[GE2_ST_MAX_NAME];
            GE2_TRY(json_string(&j, name, sizeof name));
            GE2_TRY(json_expect(&j, ':'));
            if (!strcmp(name, "__metadata__")) {
                if (have_meta)
                    return ge2_error(GE2_ERR_FORMAT, "%s: __metadata__ appears twice", what);
                have_meta = true;
                GE2_TRY(json_metadata(&j, out));
                continue;
            }
            GE2_TRY(json_grow(&j, (void **)&out->entries, out->n_entries, &out->cap_entries, GE2_ST_MAX_TENSORS,
                              sizeof *out->entries));
            ge2_st_entry *e = &out->entries[out->n_entries];
            memset(e, 0, sizeof *e);
            memcpy(e->name, name, sizeof name);
            GE2_TRY(json_entry(&j, e));
            out->n_entries++;
        } while (json_eat(&j, ','));
        GE2_TRY(json_expect(&j, '}'));
    }
    json_ws(&j);
    if (j.pos != j.len)
        return json_fail(&j, "only space padding after the header object");
    return json_unique_names(&j, out);
}
