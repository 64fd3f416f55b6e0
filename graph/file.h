/* Opening untrusted input files (datasets, corpora, checkpoints). */
#ifndef GE2_GRAPH_FILE_H
#define GE2_GRAPH_FILE_H

#include "ge2/ge2.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Opens path for reading only if it is a regular file, so a FIFO, a device
 * or a folder given where a file belongs is refused by name instead of
 * blocking in open or reading forever. what names the file's role in
 * messages ("the corpus", "--init"). *fd is an open descriptor on success. */
ge2_status ge2_open_regular(const char *path, const char *what, int *fd);

#ifdef __cplusplus
}
#endif

#endif /* GE2_GRAPH_FILE_H */
