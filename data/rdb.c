/* The .rdb reader: inflate each record, then walk its XDR serialization
 * with a cursor that refuses to read past the end. */
#include <limits.h>
#include <string.h>
#include <zlib.h>

#include "data/rdb.h"
#include "graph/alloc.h"
#include "graph/error.h"

enum {
    R_CHARSXP = 9,
    R_STRSXP = 16,
};

/* A bounded view of one inflated record. */
typedef struct cursor {
    const uint8_t *p;
    size_t left, size;
    const char *what;
    int record;
} cursor;

static ge2_status bad(const cursor *c, const char *why)
{
    return ge2_error(GE2_ERR_IO, "%s: record %d, byte %zu of %zu: %s", c->what, c->record, c->size - c->left, c->size,
                     why);
}

static ge2_status take(cursor *c, size_t n, const uint8_t **at)
{
    if (n > c->left)
        return bad(c, "ends early");
    *at = c->p;
    c->p += n;
    c->left -= n;
    return GE2_OK;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static ge2_status int32_at(cursor *c, int32_t *v)
{
    const uint8_t *p = NULL;
    GE2_TRY(take(c, 4, &p));
    *v = (int32_t)be32(p);
    return GE2_OK;
}

/* Growing output text. */
typedef struct text_buf {
    char *text;
    size_t len, cap;
} text_buf;

static ge2_status append_line(text_buf *b, const uint8_t *s, size_t n)
{
    if (n + 1 > b->cap - b->len) {
        size_t cap = b->cap ? b->cap : 1 << 16;
        while (n + 1 > cap - b->len) {
            if (cap > SIZE_MAX / 2)
                return ge2_error(GE2_ERR_OUT_OF_MEMORY, "rdb text: %zu bytes", b->len);
            cap *= 2;
        }
        char *grown = ge2_realloc(b->text, cap);
        if (!grown)
            return ge2_error(GE2_ERR_OUT_OF_MEMORY, "rdb text: %zu bytes", cap);
        b->text = grown;
        b->cap = cap;
    }
    memcpy(b->text + b->len, s, n);
    b->len += n;
    b->text[b->len++] = '\n';
    return GE2_OK;
}

/* The serialization header: "X\n", version 2 or 3, two R versions, and for
 * version 3 the native encoding's name. */
static ge2_status header(cursor *c)
{
    const uint8_t *p = NULL;
    int32_t version, writer, reader;
    GE2_TRY(take(c, 2, &p));
    if (p[0] != 'X' || p[1] != '\n')
        return bad(c, "not R's XDR serialization (no \"X\\n\")");
    GE2_TRY(int32_at(c, &version));
    GE2_TRY(int32_at(c, &writer));
    GE2_TRY(int32_at(c, &reader));
    if (version != 2 && version != 3)
        return bad(c, "serialization format is neither 2 nor 3");
    if (version == 3) {
        int32_t n;
        GE2_TRY(int32_at(c, &n));
        if (n < 0 || n > 64)
            return bad(c, "native encoding name length out of range");
        GE2_TRY(take(c, (size_t)n, &p));
    }
    return GE2_OK;
}

/* A character vector: its length, then each element. */
static ge2_status strings(cursor *c, text_buf *out, int64_t *lines)
{
    int32_t flags, n32;
    GE2_TRY(int32_at(c, &flags));
    if ((flags & 0xff) != R_STRSXP)
        return bad(c, "not a character vector");
    GE2_TRY(int32_at(c, &n32));
    int64_t n = n32;
    if (n32 == -1) { /* a long vector: two more words */
        int32_t hi, lo;
        GE2_TRY(int32_at(c, &hi));
        GE2_TRY(int32_at(c, &lo));
        n = (int64_t)(uint32_t)hi << 32 | (uint32_t)lo;
    }
    /* each element takes at least 8 bytes (its flags and length) */
    if (n < 0 || (uint64_t)n > c->left / 8)
        return bad(c, "vector length out of range");
    for (int64_t i = 0; i < n; i++) {
        int32_t len;
        GE2_TRY(int32_at(c, &flags));
        if ((flags & 0xff) != R_CHARSXP)
            return bad(c, "an element is not a string");
        GE2_TRY(int32_at(c, &len));
        if (len == -1)
            continue; /* NA */
        if (len < 0)
            return bad(c, "negative string length");
        const uint8_t *s = NULL;
        GE2_TRY(take(c, (size_t)len, &s));
        if (memchr(s, '\n', (size_t)len) || memchr(s, '\0', (size_t)len))
            return bad(c, "a string holds a newline or NUL");
        GE2_TRY(append_line(out, s, (size_t)len));
        ++*lines;
    }
    return GE2_OK; /* attributes, if any, follow; the strings are what is read */
}

/* Inflates the zlib stream at src (at most src_size bytes) into exactly
 * want bytes; *used = the compressed bytes it took. */
static ge2_status inflate_record(const uint8_t *src, size_t src_size, uint8_t *dst, size_t want, size_t *used,
                                 const char *what, int record)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit(&z) != Z_OK)
        return ge2_error(GE2_ERR_IO, "%s: record %d: zlib: inflateInit failed", what, record);
    ge2_status st = GE2_OK;
    size_t in_done = 0, out_done = 0;
    int rc = Z_OK;
    while (rc == Z_OK) {
        const size_t in_left = src_size - in_done, out_left = want - out_done;
        z.next_in = (Bytef *)(src + in_done);
        z.avail_in = (uInt)(in_left < UINT_MAX ? in_left : UINT_MAX);
        z.next_out = dst + out_done;
        z.avail_out = (uInt)(out_left < UINT_MAX ? out_left : UINT_MAX);
        const uInt in0 = z.avail_in, out0 = z.avail_out;
        rc = inflate(&z, Z_NO_FLUSH);
        in_done += in0 - z.avail_in;
        out_done += out0 - z.avail_out;
        if (rc == Z_OK && in0 == z.avail_in && out0 == z.avail_out)
            rc = Z_BUF_ERROR; /* no progress: input or room is used up */
    }
    if (rc != Z_STREAM_END)
        st = ge2_error(GE2_ERR_IO, "%s: record %d: zlib: %s", what, record,
                       rc == Z_BUF_ERROR ? "the stream is cut short or longer than its stated length"
                                         : (z.msg ? z.msg : "bad data"));
    else if (out_done != want)
        st = ge2_error(GE2_ERR_IO, "%s: record %d: inflates to %zu bytes, its header says %zu", what, record,
                       out_done, want);
    inflateEnd(&z);
    *used = in_done;
    return st;
}

ge2_status ge2_rdb_read_text(const uint8_t *data, size_t size, const char *what, ge2_rdb_text *out)
{
    memset(out, 0, sizeof *out);
    text_buf buf = {0};
    ge2_status st = GE2_OK;
    size_t off = 0;
    int record = 0;
    int64_t lines = 0;
    while (st == GE2_OK && off < size) {
        if (size - off < 4) {
            st = ge2_error(GE2_ERR_IO, "%s: record %d at byte %zu: a length needs 4 bytes, %zu left", what, record,
                           off, size - off);
            break;
        }
        const size_t want = be32(data + off);
        /* zlib inflates at most about 1032 bytes per byte it reads */
        if (want == 0 || want > GE2_RDB_MAX_RECORD || want / 1032 > size - off - 4) {
            st = ge2_error(GE2_ERR_IO,
                           "%s: record %d at byte %zu: length %zu out of range (1 to %zu, and what %zu compressed "
                           "bytes can hold)",
                           what, record, off, want, GE2_RDB_MAX_RECORD, size - off - 4);
            break;
        }
        uint8_t *raw = ge2_malloc(want);
        if (!raw) {
            st = ge2_error(GE2_ERR_OUT_OF_MEMORY, "%s: record %d: %zu bytes", what, record, want);
            break;
        }
        size_t used = 0;
        st = inflate_record(data + off + 4, size - off - 4, raw, want, &used, what, record);
        if (st == GE2_OK) {
            cursor c = {raw, want, want, what, record};
            st = header(&c);
            if (st == GE2_OK)
                st = strings(&c, &buf, &lines);
        }
        ge2_free(raw);
        off += 4 + used;
        record++;
    }
    if (st == GE2_OK && record == 0)
        st = ge2_error(GE2_ERR_IO, "%s: no records", what);
    if (st != GE2_OK) {
        ge2_free(buf.text);
        return st;
    }
    out->text = buf.text;
    out->len = buf.len;
    out->records = record;
    out->lines = lines;
    return GE2_OK;
}

void ge2_rdb_text_release(ge2_rdb_text *t)
{
    if (!t)
        return;
    ge2_free(t->text);
    memset(t, 0, sizeof *t);
}
