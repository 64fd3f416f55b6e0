/* IDX reader. zlib's gzread reads plain files transparently, so one path
 * serves both forms. The buffer grows as data arrives instead of being sized
 * from the header up front: a 100-byte file claiming 4 GB is reported as
 * truncated without first allocating 4 GB. */
#include "data/idx.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "graph/alloc.h"
#include "graph/error.h"
#include "graph/file.h"

#define IDX_TYPE_U8 0x08
#define IDX_FIRST_CHUNK ((int64_t)1 << 20)
#define IDX_MAX_READ (1 << 30) /* gzread takes an unsigned, returns an int */

static const char *idx_what(int ndim)
{
    return ndim == 1 ? "labels" : ndim >= 3 ? "pixels" : "data";
}

/* Reads up to want bytes; returns how many arrived (< want only at end of file). */
static ge2_status idx_read(gzFile f, const char *path, void *dst, int64_t want, int64_t *got)
{
    *got = 0;
    while (*got < want) {
        int64_t left = want - *got;
        int n = gzread(f, (char *)dst + *got, (unsigned)(left < IDX_MAX_READ ? left : IDX_MAX_READ));
        if (n < 0) {
            int code;
            const char *msg = gzerror(f, &code);
            return ge2_error(GE2_ERR_FORMAT, "%s: cannot decompress: %s", path, msg);
        }
        if (n == 0)
            break;
        *got += n;
    }
    return GE2_OK;
}

static ge2_status idx_read_header(gzFile f, const char *path, ge2_idx *out)
{
    uint8_t magic[4];
    int64_t got;
    GE2_TRY(idx_read(f, path, magic, 4, &got));
    if (got < 4)
        return ge2_error(GE2_ERR_FORMAT, "%s: truncated: %lld bytes, an IDX header needs at least 4", path,
                         (long long)got);
    if (magic[0] != 0 || magic[1] != 0)
        return ge2_error(GE2_ERR_FORMAT, "%s: bad magic 0x%02x%02x%02x%02x: not an IDX file", path, magic[0],
                         magic[1], magic[2], magic[3]);
    if (magic[2] != IDX_TYPE_U8)
        return ge2_error(GE2_ERR_FORMAT, "%s: IDX element type 0x%02x unsupported: only u8 (0x08) is read", path,
                         magic[2]);
    out->ndim = magic[3];
    if (out->ndim < 1 || out->ndim > GE2_MAX_DIMS)
        return ge2_error(GE2_ERR_FORMAT, "%s: %d dims: between 1 and %d supported", path, out->ndim, GE2_MAX_DIMS);
    uint8_t dims[4 * GE2_MAX_DIMS];
    GE2_TRY(idx_read(f, path, dims, 4 * out->ndim, &got));
    if (got < 4 * out->ndim)
        return ge2_error(GE2_ERR_FORMAT, "%s: truncated: header of %d dims needs %d bytes, file has %lld", path,
                         out->ndim, 4 + 4 * out->ndim, (long long)(4 + got));
    out->numel = 1;
    for (int i = 0; i < out->ndim; i++) {
        const uint8_t *b = dims + 4 * i;
        out->dim[i] = ((int64_t)b[0] << 24) | ((int64_t)b[1] << 16) | ((int64_t)b[2] << 8) | (int64_t)b[3];
        if (out->dim[i] == 0)
            return ge2_error(GE2_ERR_FORMAT, "%s: dim %d is 0", path, i);
        /* each dim < 2^32, so this bound keeps the product below 2^62 */
        if (out->numel > ((int64_t)1 << 62) / out->dim[i])
            return ge2_error(GE2_ERR_FORMAT, "%s: dims overflow: element count too large", path);
        out->numel *= out->dim[i];
    }
    if ((uint64_t)out->numel > (uint64_t)SIZE_MAX)
        return ge2_error(GE2_ERR_FORMAT, "%s: %lld bytes of data do not fit in memory", path,
                         (long long)out->numel);
    return GE2_OK;
}

static ge2_status idx_read_data(gzFile f, const char *path, ge2_idx *out)
{
    int64_t cap = out->numel < IDX_FIRST_CHUNK ? out->numel : IDX_FIRST_CHUNK, have = 0;
    out->data = ge2_malloc((size_t)cap);
    if (!out->data)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "%s: cannot allocate %lld bytes", path, (long long)cap);
    for (;;) {
        int64_t got;
        GE2_TRY(idx_read(f, path, out->data + have, cap - have, &got));
        have += got;
        if (have < cap || cap == out->numel)
            break;
        int64_t grown = cap * 2 < out->numel ? cap * 2 : out->numel;
        uint8_t *data = ge2_realloc(out->data, (size_t)grown);
        if (!data)
            return ge2_error(GE2_ERR_OUT_OF_MEMORY, "%s: cannot allocate %lld bytes", path, (long long)grown);
        out->data = data;
        cap = grown;
    }
    if (have < out->numel)
        return ge2_error(GE2_ERR_FORMAT, "%s: truncated: header says %lld bytes of %s, file has %lld", path,
                         (long long)out->numel, idx_what(out->ndim), (long long)have);
    uint8_t extra;
    int64_t got;
    GE2_TRY(idx_read(f, path, &extra, 1, &got));
    if (got)
        return ge2_error(GE2_ERR_FORMAT, "%s: trailing bytes after the %lld bytes of %s the header announces", path,
                         (long long)out->numel, idx_what(out->ndim));
    return GE2_OK;
}

ge2_status ge2_idx_load(const char *path, ge2_idx *out)
{
    if (!path || !out)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_idx_load: path and out are required");
    memset(out, 0, sizeof *out);
    int fd;
    GE2_TRY(ge2_open_regular(path, "the IDX file", &fd));
    gzFile f = gzdopen(fd, "rb");
    if (!f) {
        close(fd);
        return ge2_error(GE2_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    }
    ge2_status st = idx_read_header(f, path, out);
    if (st == GE2_OK)
        st = idx_read_data(f, path, out);
    gzclose(f);
    if (st != GE2_OK)
        ge2_idx_release(out);
    return st;
}

void ge2_idx_release(ge2_idx *idx)
{
    if (!idx)
        return;
    ge2_free(idx->data);
    memset(idx, 0, sizeof *idx);
}
