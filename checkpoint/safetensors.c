/* safetensors framing: the length prefix, the data section's byte ranges,
 * reading a file whole and writing one atomically. The header's JSON is
 * json.c's. */
#include "checkpoint/safetensors.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "graph/alloc.h"
#include "graph/error.h"
#include "graph/file.h"

/* Tensors are written and read as raw host values, which the file defines as little-endian. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors data is little-endian");

size_t ge2_st_dtype_size(const char *dtype)
{
    static const struct {
        const char *name;
        size_t size;
    } known[] = {{"BOOL", 1}, {"U8", 1},   {"I8", 1},   {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2},
                 {"U16", 2},  {"F16", 2},  {"BF16", 2}, {"I32", 4},     {"U32", 4},     {"F32", 4},
                 {"I64", 8},  {"U64", 8},  {"F64", 8}};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(dtype, known[i].name))
            return known[i].size;
    return 0;
}

static uint64_t st_le64(const uint8_t *b)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | b[i];
    return v;
}

static char *st_shape_str(const ge2_st_entry *e, char *buf, size_t size)
{
    size_t n = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < e->rank && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, i ? ",%lld" : "%lld", (long long)e->shape[i]);
    if (n < size)
        snprintf(buf + n, size - n, "]");
    return buf;
}

/* Byte size of an entry from its dtype and shape; false on overflow. */
static bool st_entry_bytes(const ge2_st_entry *e, uint64_t *bytes)
{
    uint64_t b = ge2_st_dtype_size(e->dtype);
    for (int i = 0; i < e->rank; i++) {
        uint64_t d = (uint64_t)e->shape[i];
        if (d && b > UINT64_MAX / d)
            return false;
        b *= d;
    }
    *bytes = b;
    return true;
}

static int st_cmp_range(const void *a, const void *b)
{
    const ge2_st_entry *x = *(const ge2_st_entry *const *)a, *y = *(const ge2_st_entry *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* Each range exact and inside the section, and together they tile it. */
static ge2_status st_check_ranges(const ge2_st_file *f, const char *what)
{
    for (int i = 0; i < f->n_entries; i++) {
        const ge2_st_entry *e = &f->entries[i];
        uint64_t bytes;
        char shape[200];
        if (!st_entry_bytes(e, &bytes))
            return ge2_error(GE2_ERR_FORMAT, "%s: tensor %s: shape %s overflows", what, e->name,
                             st_shape_str(e, shape, sizeof shape));
        if (e->begin > e->end || e->end > f->data_size)
            return ge2_error(GE2_ERR_FORMAT,
                             "%s: tensor %s: data_offsets [%llu, %llu] outside the data section of %llu bytes", what,
                             e->name, (unsigned long long)e->begin, (unsigned long long)e->end,
                             (unsigned long long)f->data_size);
        if (e->end - e->begin != bytes)
            return ge2_error(GE2_ERR_FORMAT, "%s: tensor %s: %s %s needs %llu bytes, data_offsets give %llu", what,
                             e->name, e->dtype, st_shape_str(e, shape, sizeof shape), (unsigned long long)bytes,
                             (unsigned long long)(e->end - e->begin));
    }
    const ge2_st_entry **sorted = ge2_malloc((size_t)(f->n_entries ? f->n_entries : 1) * sizeof *sorted);
    if (!sorted)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
    for (int i = 0; i < f->n_entries; i++)
        sorted[i] = &f->entries[i];
    qsort(sorted, (size_t)f->n_entries, sizeof *sorted, st_cmp_range);
    ge2_status st = GE2_OK;
    uint64_t covered = 0;
    for (int i = 0; i < f->n_entries && st == GE2_OK; i++) {
        const ge2_st_entry *e = sorted[i];
        if (e->begin < covered)
            st = ge2_error(GE2_ERR_FORMAT, "%s: tensors %s and %s overlap in the data section", what,
                           sorted[i - 1]->name, e->name);
        else if (e->begin > covered)
            st = ge2_error(GE2_ERR_FORMAT, "%s: bytes [%llu, %llu) of the data section belong to no tensor", what,
                           (unsigned long long)covered, (unsigned long long)e->begin);
        covered = e->end > covered ? e->end : covered;
    }
    if (st == GE2_OK && covered != f->data_size)
        st = ge2_error(GE2_ERR_FORMAT, "%s: bytes [%llu, %llu) of the data section belong to no tensor", what,
                       (unsigned long long)covered, (unsigned long long)f->data_size);
    ge2_free(sorted);
    return st;
}

/* The length prefix against the buffer: n bytes of header fit. */
static ge2_status st_check_prefix(const uint8_t *buf, size_t size, const char *what, uint64_t *n)
{
    if (size < 8)
        return ge2_error(GE2_ERR_FORMAT, "%s: %zu bytes: too short for the 8-byte safetensors header length", what,
                         size);
    *n = st_le64(buf);
    if (*n > GE2_ST_MAX_HEADER)
        return ge2_error(GE2_ERR_FORMAT, "%s: header length %llu exceeds the %llu-byte limit", what,
                         (unsigned long long)*n, (unsigned long long)GE2_ST_MAX_HEADER);
    if (*n > size - 8)
        return ge2_error(GE2_ERR_FORMAT, "%s: header length %llu exceeds the file's %zu bytes after the length",
                         what, (unsigned long long)*n, size - 8);
    return GE2_OK;
}

ge2_status ge2_st_parse(const uint8_t *buf, size_t size, const char *what, ge2_st_file *out)
{
    memset(out, 0, sizeof *out);
    uint64_t n = 0;
    GE2_TRY(st_check_prefix(buf, size, what, &n));
    out->data = buf + 8 + n;
    out->data_size = size - 8 - n;
    ge2_status st = ge2_st_parse_header((const char *)buf + 8, (size_t)n, what, out);
    if (st == GE2_OK)
        st = st_check_ranges(out, what);
    if (st != GE2_OK)
        ge2_st_release(out);
    return st;
}

ge2_status ge2_st_read(const char *path, uint64_t max_data, ge2_st_file *out)
{
    memset(out, 0, sizeof *out);
    int fd;
    GE2_TRY(ge2_open_regular(path, "the checkpoint", &fd));
    FILE *f = fdopen(fd, "rb");
    struct stat sb;
    if (!f || fstat(fd, &sb) != 0) {
        ge2_status st = ge2_error(GE2_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
        if (f)
            fclose(f);
        else
            close(fd);
        return st;
    }
    uint64_t limit = max_data > UINT64_MAX - 8 - GE2_ST_MAX_HEADER ? UINT64_MAX : 8 + GE2_ST_MAX_HEADER + max_data;
    if ((uint64_t)sb.st_size > limit || (uint64_t)sb.st_size > SIZE_MAX) {
        fclose(f);
        return ge2_error(GE2_ERR_FORMAT, "%s: %lld bytes: larger than any checkpoint of this model (at most %llu)",
                         path, (long long)sb.st_size, (unsigned long long)limit);
    }
    size_t size = (size_t)sb.st_size;
    uint8_t *buf = ge2_malloc(size ? size : 1);
    if (!buf) {
        fclose(f);
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes to read it", path, size);
    }
    size_t got = fread(buf, 1, size, f);
    fclose(f);
    if (got != size) {
        ge2_free(buf);
        return ge2_error(GE2_ERR_IO, "%s: read %zu of %zu bytes", path, got, size);
    }
    ge2_status st = ge2_st_parse(buf, size, path, out);
    if (st != GE2_OK) {
        ge2_free(buf);
        return st;
    }
    out->owned = buf;
    return GE2_OK;
}

void ge2_st_release(ge2_st_file *file)
{
    if (!file)
        return;
    ge2_free(file->owned);
    ge2_free(file->entries);
    ge2_free(file->meta);
    memset(file, 0, sizeof *file);
}

const ge2_st_entry *ge2_st_find(const ge2_st_file *file, const char *name)
{
    for (int i = 0; i < file->n_entries; i++)
        if (!strcmp(file->entries[i].name, name))
            return &file->entries[i];
    return NULL;
}

const char *ge2_st_meta(const ge2_st_file *file, const char *key)
{
    for (int i = 0; i < file->n_meta; i++)
        if (!strcmp(file->meta[i].key, key))
            return file->meta[i].value;
    return NULL;
}

const char *ge2_st_dtype_name(ge2_dtype dtype)
{
    switch (dtype) {
    case GE2_F32: return "F32";
    case GE2_F64: return "F64";
    case GE2_I64: return "I64";
    default: return NULL;
    }
}

ge2_status ge2_st_expect_f32(const ge2_st_file *file, const char *what, const char *name, ge2_shape shape,
                             const uint8_t **data)
{
    return ge2_st_expect(file, what, name, GE2_F32, shape, data);
}

ge2_status ge2_st_expect(const ge2_st_file *file, const char *what, const char *name, ge2_dtype dtype, ge2_shape shape,
                         const uint8_t **data)
{
    const ge2_st_entry *e = ge2_st_find(file, name);
    if (!e)
        return ge2_error(GE2_ERR_FORMAT, "%s: missing tensor %s", what, name);
    const char *want = ge2_st_dtype_name(dtype);
    if (!want || strcmp(e->dtype, want))
        return ge2_error(GE2_ERR_FORMAT, "%s: tensor %s has dtype %s, the model needs %s", what, name, e->dtype,
                         want ? want : ge2_dtype_name(dtype));
    bool same = e->rank == shape.ndim;
    for (int i = 0; same && i < e->rank; i++)
        same = e->shape[i] == shape.dim[i];
    if (!same) {
        char a[200], b[64];
        return ge2_error(GE2_ERR_SHAPE, "%s: tensor %s has shape %s, the model has %s", what, name,
                         st_shape_str(e, a, sizeof a), ge2_shape_str(shape, b, sizeof b));
    }
    *data = file->data + e->begin;
    return GE2_OK;
}

/* ----------------------------------------------------------------- writing */

typedef struct st_buf {
    char *s;
    size_t len, cap;
    bool oom;
} st_buf;

static void st_put(st_buf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = ge2_realloc(b->s, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static void st_putf(st_buf *b, const char *fmt, long long a, long long c)
{
    char tmp[64];
    int n = snprintf(tmp, sizeof tmp, fmt, a, c);
    st_put(b, tmp, (size_t)n);
}

static void st_put_string(st_buf *b, const char *s)
{
    st_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            st_put(b, esc, 2);
        } else if (c < 0x20) {
            st_putf(b, "\\u%04llx", c, 0);
        } else {
            st_put(b, (const char *)&c, 1);
        }
    }
    st_put(b, "\"", 1);
}

static ge2_status st_header(const ge2_st_tensor *tensors, int n_tensors, const ge2_st_kv *meta, int n_meta,
                            st_buf *b)
{
    st_put(b, "{", 1);
    if (n_meta) {
        st_put(b, "\"__metadata__\":{", 16);
        for (int i = 0; i < n_meta; i++) {
            if (i)
                st_put(b, ",", 1);
            st_put_string(b, meta[i].key);
            st_put(b, ":", 1);
            st_put_string(b, meta[i].value);
        }
        st_put(b, "}", 1);
    }
    uint64_t offset = 0;
    for (int i = 0; i < n_tensors; i++) {
        if (i || n_meta)
            st_put(b, ",", 1);
        const char *dtype = ge2_st_dtype_name(tensors[i].dtype);
        if (!dtype)
            return ge2_error(GE2_ERR_DTYPE, "ge2_checkpoint_save: tensor %s is %s, which safetensors files of ge2 "
                             "do not hold", tensors[i].name, ge2_dtype_name(tensors[i].dtype));
        st_put_string(b, tensors[i].name);
        st_put(b, ":{\"dtype\":", 10);
        st_put_string(b, dtype);
        st_put(b, ",\"shape\":[", 10);
        for (int d = 0; d < tensors[i].shape.ndim; d++)
            st_putf(b, d ? ",%lld" : "%lld", tensors[i].shape.dim[d], 0);
        uint64_t bytes = (uint64_t)ge2_shape_numel(tensors[i].shape) * ge2_dtype_size(tensors[i].dtype);
        st_putf(b, "],\"data_offsets\":[%lld,%lld]}", (long long)offset, (long long)(offset + bytes));
        offset += bytes;
    }
    st_put(b, "}", 1);
    while (!b->oom && b->len % 8)
        st_put(b, " ", 1);
    return b->oom ? ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_checkpoint_save: out of memory building the header")
                  : GE2_OK;
}

static ge2_status st_write_file(FILE *f, const char *tmp, const st_buf *header, const ge2_st_tensor *tensors,
                                int n_tensors)
{
    uint8_t len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (uint8_t)((uint64_t)header->len >> (8 * i));
    bool ok = fwrite(len, 1, 8, f) == 8 && fwrite(header->s, 1, header->len, f) == header->len;
    for (int i = 0; ok && i < n_tensors; i++) {
        size_t n = (size_t)ge2_shape_numel(tensors[i].shape);
        ok = fwrite(tensors[i].data, ge2_dtype_size(tensors[i].dtype), n, f) == n;
    }
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    return ok ? GE2_OK : ge2_error(GE2_ERR_IO, "%s: write failed: %s", tmp, strerror(errno));
}

/* The rename is durable only once the directory entry is on disk. */
static ge2_status st_sync_dir(const char *path)
{
    char *copy = ge2_strdup(path);
    if (!copy)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_checkpoint_save: out of memory");
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY);
    ge2_status st = GE2_OK;
    if (fd < 0 || fsync(fd) != 0)
        st = ge2_error(GE2_ERR_IO, "%s: cannot sync its directory: %s", path, strerror(errno));
    if (fd >= 0)
        close(fd);
    ge2_free(copy);
    return st;
}

/* Where a save to path writes: path itself, or, when path is a symbolic
 * link, the file it names (so the link stays a link, and the checkpoint
 * lands where it points). What is there must be a regular file: a save
 * replaces it, and replacing a device or a folder is never what was meant. */
static ge2_status st_target(const char *path, char *target, size_t size)
{
    struct stat sb;
    if (lstat(path, &sb) != 0) {
        if (errno != ENOENT)
            return ge2_error(GE2_ERR_IO, "%s: cannot save there: %s", path, strerror(errno));
        return snprintf(target, size, "%s", path) < (int)size
                   ? GE2_OK
                   : ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_checkpoint_save: path too long");
    }
    if (S_ISLNK(sb.st_mode)) {
        char *real = realpath(path, NULL);
        if (!real)
            return ge2_error(GE2_ERR_IO, "%s: a symbolic link to a file that cannot be reached (%s); a save writes "
                             "through the link to an existing file or to a plain path", path, strerror(errno));
        const bool fits = snprintf(target, size, "%s", real) < (int)size;
        free(real);
        if (!fits)
            return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_checkpoint_save: path too long");
        if (stat(target, &sb) != 0)
            return ge2_error(GE2_ERR_IO, "%s: cannot save there: %s", target, strerror(errno));
    } else if (snprintf(target, size, "%s", path) >= (int)size) {
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_checkpoint_save: path too long");
    }
    if (!S_ISREG(sb.st_mode))
        return ge2_error(GE2_ERR_IO, "%s: not a regular file; a checkpoint replaces only a file (give another path)",
                         target);
    return GE2_OK;
}

/* This machine's name, for temporaries: a PID means nothing on another
 * machine sharing the folder. */
static const char *st_host(void)
{
    static char host[64];
    if (!host[0] && (gethostname(host, sizeof host - 1) != 0 || !host[0]))
        snprintf(host, sizeof host, "localhost");
    for (char *c = host; *c; c++)
        if (*c == '/' || *c == '.')
            *c = '_';
    return host;
}

bool ge2_st_temp_name(const char *target, long pid, char *buf, size_t size)
{
    const int n = snprintf(buf, size, "%s.tmp.%s.%ld", target, st_host(), pid);
    return n > 0 && (size_t)n < size;
}

/* A save killed before its rename leaves "<target>.tmp.<host>.<pid>"
 * beside the target; the next save to that target from the same machine
 * removes those whose process is gone (its own name is this save's). */
static void st_remove_stale_temps(const char *target)
{
    char dir_buf[4096], base_buf[4096];
    snprintf(dir_buf, sizeof dir_buf, "%s", target);
    snprintf(base_buf, sizeof base_buf, "%s", target);
    const char *dir_name = dirname(dir_buf), *base = basename(base_buf);
    char prefix[4200];
    const int n = snprintf(prefix, sizeof prefix, "%s.tmp.%s.", base, st_host());
    DIR *dir = n > 0 && n < (int)sizeof prefix ? opendir(dir_name) : NULL;
    for (struct dirent *e; dir && (e = readdir(dir));) {
        if (strncmp(e->d_name, prefix, (size_t)n) != 0)
            continue;
        char *end;
        errno = 0;
        long pid = strtol(e->d_name + n, &end, 10);
        if (*end || errno || pid <= 0 || pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        char stale[8200];
        if (snprintf(stale, sizeof stale, "%s/%s", dir_name, e->d_name) < (int)sizeof stale)
            unlink(stale);
    }
    if (dir)
        closedir(dir);
}

ge2_status ge2_st_write(const char *path, const ge2_st_tensor *tensors, int n_tensors, const ge2_st_kv *meta,
                        int n_meta)
{
    char target[4096];
    GE2_TRY(st_target(path, target, sizeof target));
    path = target;
    st_remove_stale_temps(target);
    st_buf header = {0};
    ge2_status st = st_header(tensors, n_tensors, meta, n_meta, &header);
    char tmp[4096 + 96];
    if (st == GE2_OK && !ge2_st_temp_name(path, (long)getpid(), tmp, sizeof tmp))
        st = ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_checkpoint_save: path too long");
    FILE *f = NULL;
    if (st == GE2_OK && !(f = fopen(tmp, "wb")))
        st = ge2_error(GE2_ERR_IO, "%s: cannot create the temporary file: %s", tmp, strerror(errno));
    if (f) {
        st = st_write_file(f, tmp, &header, tensors, n_tensors);
        if (fclose(f) != 0 && st == GE2_OK)
            st = ge2_error(GE2_ERR_IO, "%s: close failed: %s", tmp, strerror(errno));
        if (st == GE2_OK && rename(tmp, path) != 0)
            st = ge2_error(GE2_ERR_IO, "%s: cannot rename %s over it: %s", path, tmp, strerror(errno));
        if (st != GE2_OK)
            unlink(tmp);
        else
            st = st_sync_dir(path);
    }
    ge2_free(header.s);
    return st;
}
