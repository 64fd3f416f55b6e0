/* The safetensors container, as checkpoint.c and the fuzz target use it.
 *
 * File: u64 little-endian header length N, N bytes of JSON header (padded
 * with spaces to a multiple of 8), then the data section. The header maps
 * each tensor name to {"dtype", "shape", "data_offsets": [begin, end]}
 * (offsets relative to the data section) and may hold "__metadata__", a map
 * of string to string. Everything read is untrusted: ge2_st_parse accepts a
 * buffer only if the header is strict JSON of exactly that form, every dtype
 * is known, every tensor's byte range is inside the data section and exactly
 * numel * element size long, and the ranges tile the data section with no
 * overlap and no hole (what the reference implementation enforces too).
 */
#ifndef GE2_CHECKPOINT_SAFETENSORS_H
#define GE2_CHECKPOINT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "ge2/ge2.h"

#define GE2_ST_MAX_HEADER ((uint64_t)100 << 20) /* 100 MB, the reference implementation's limit */
#define GE2_ST_MAX_NAME 256
#define GE2_ST_MAX_VALUE 1024 /* a __metadata__ value */
#define GE2_ST_MAX_RANK 8
#define GE2_ST_MAX_TENSORS 65536
#define GE2_ST_MAX_META 1024

typedef struct ge2_st_entry {
    char name[GE2_ST_MAX_NAME];
    char dtype[8];      /* "F32", "BF16", ... (known to ge2_st_dtype_size) */
    int rank;
    int64_t shape[GE2_ST_MAX_RANK];
    uint64_t begin, end; /* byte range in the data section */
} ge2_st_entry;

typedef struct ge2_st_kv {
    char key[GE2_ST_MAX_NAME];
    char value[GE2_ST_MAX_VALUE];
} ge2_st_kv;

typedef struct ge2_st_file {
    uint8_t *owned;         /* the whole file when read by ge2_st_read */
    const uint8_t *data;    /* the data section */
    uint64_t data_size;
    ge2_st_entry *entries;  /* [n_entries], in header order */
    int n_entries, cap_entries;
    ge2_st_kv *meta;        /* [n_meta] */
    int n_meta, cap_meta;
} ge2_st_file;

/* Element size of a safetensors dtype string, 0 if unknown. */
size_t ge2_st_dtype_size(const char *dtype);

/* Parses and validates a whole file image (buf is borrowed: out->data points
 * into it). `what` names the source in errors (the path). */
ge2_status ge2_st_parse(const uint8_t *buf, size_t size, const char *what, ge2_st_file *out);
/* Reads path whole and parses it. A file larger than 8 + GE2_ST_MAX_HEADER +
 * max_data bytes is rejected before anything is allocated for it (a caller
 * knows how much data a file it can use may hold). */
ge2_status ge2_st_read(const char *path, uint64_t max_data, ge2_st_file *out);
void ge2_st_release(ge2_st_file *file);

const ge2_st_entry *ge2_st_find(const ge2_st_file *file, const char *name);
/* NULL when absent. */
const char *ge2_st_meta(const ge2_st_file *file, const char *key);
/* The entry `name` in dtype (F32, F64 or I64) with exactly `shape`; errors
 * name the tensor and both shapes or dtypes. *data is unaligned-safe to
 * memcpy from. */
ge2_status ge2_st_expect(const ge2_st_file *file, const char *what, const char *name, ge2_dtype dtype, ge2_shape shape,
                         const uint8_t **data);
/* The same for F32. */
ge2_status ge2_st_expect_f32(const ge2_st_file *file, const char *what, const char *name, ge2_shape shape,
                             const uint8_t **data);
/* The safetensors name of a ge2 dtype ("F32", "F64", "I64"), NULL for the rest. */
const char *ge2_st_dtype_name(ge2_dtype dtype);

/* Header JSON (json.c): fills entries and meta of out; offsets are
 * checked against the data section by ge2_st_parse. */
ge2_status ge2_st_parse_header(const char *json, size_t len, const char *what, ge2_st_file *out);

/* ----------------------------------------------------------------- writing */

typedef struct ge2_st_tensor {
    const char *name;
    ge2_shape shape;
    const void *data; /* [numel(shape)] of dtype, little-endian in the file */
    ge2_dtype dtype;  /* F32 (the zero value), F64 or I64 */
} ge2_st_tensor;

/* Writes atomically: the temporary (ge2_st_temp_name), fsync, rename over
 * path, fsync the directory. On failure path is untouched and the
 * temporary is removed. A symbolic link is written through to the file it
 * names; what is at path must be a regular file, or nothing. */
/* The temporary a save to target by process pid writes before its
 * rename: "<target>.tmp.<host>.<pid>" (the host: another machine sharing
 * the folder has other PIDs). False when it does not fit in size. */
bool ge2_st_temp_name(const char *target, long pid, char *buf, size_t size);
ge2_status ge2_st_write(const char *path, const ge2_st_tensor *tensors, int n_tensors, const ge2_st_kv *meta,
                        int n_meta);

#endif /* GE2_CHECKPOINT_SAFETENSORS_H */
