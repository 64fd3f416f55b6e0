/* IDX files (the MNIST / Fashion-MNIST container), plain or gzip-compressed.
 *
 * Layout: 0x00 0x00 <type> <ndim>, then ndim big-endian u32 dims, then the
 * data, row-major. Only type 0x08 (u8) is read: that is what the image and
 * label files of both data sets use. The file is untrusted: every field is
 * checked and the data must be exactly as long as the header says.
 */
#ifndef GE2_DATA_IDX_H
#define GE2_DATA_IDX_H

#include <stdint.h>

#include "ge2/ge2.h"

typedef struct ge2_idx {
    int ndim;                    /* 1..GE2_MAX_DIMS */
    int64_t dim[GE2_MAX_DIMS];   /* each > 0 */
    int64_t numel;               /* product of dims */
    uint8_t *data;               /* [dim0, ..., dimN-1], owned (ge2_malloc) */
} ge2_idx;

/* Reads path (gzip detected by content, so ".gz" is optional). Errors name
 * the file and what is wrong; *out is zeroed on failure. */
ge2_status ge2_idx_load(const char *path, ge2_idx *out);
void ge2_idx_release(ge2_idx *idx);

#endif /* GE2_DATA_IDX_H */
