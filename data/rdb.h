/* Character vectors out of an R lazy-load database (.rdb), such as an R
 * package's data/Rdata.rdb: how the text corpus is taken from Debian's
 * r-cran-janeaustenr without installing R (tools/corpus_text.c).
 *
 * Layout: records one after another, each a 4-byte big-endian length (of
 * the object once inflated) and a zlib stream of one object in R's XDR
 * serialization: "X\n", format version 2 or 3, the writer's and the
 * minimum reader's R versions, for version 3 the native encoding's name,
 * then the object. Only character vectors (STRSXP) of plain strings
 * (CHARSXP, or NA) are read. The file is untrusted: every length is checked
 * against what is left, and a record must inflate to exactly its length.
 */
#ifndef GE2_DATA_RDB_H
#define GE2_DATA_RDB_H

#include <stddef.h>
#include <stdint.h>

#include "ge2/ge2.h"

/* Most bytes one record may inflate to. */
#define GE2_RDB_MAX_RECORD ((size_t)1 << 30)

typedef struct ge2_rdb_text {
    char *text;     /* every string of every record, each followed by '\n'; owned (ge2_malloc) */
    size_t len;     /* bytes in text */
    int records;    /* character vectors read */
    int64_t lines;  /* strings read (NA strings are left out) */
} ge2_rdb_text;

/* Reads the .rdb image data[0, size) (`what` names it in errors, e.g. the
 * path): GE2_ERR_IO with the record, the offset and what is wrong, *out
 * zeroed on failure. A string containing '\n' or '\0' is an error too: the
 * text is one string per line. */
ge2_status ge2_rdb_read_text(const uint8_t *data, size_t size, const char *what, ge2_rdb_text *out);
void ge2_rdb_text_release(ge2_rdb_text *t);

#endif /* GE2_DATA_RDB_H */
