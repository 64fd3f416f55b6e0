/* libFuzzer target: the IDX reader (plain and gzip) on arbitrary bytes.
 *
 * ge2_idx_load reads a path, so each input goes into an in-memory file
 * (memfd) opened through /proc/self/fd: no disk traffic per run. An accepted
 * file must hold exactly the bytes its header announces. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "data/idx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int fd = -1;
    if (fd < 0 && (fd = memfd_create("idx_fuzz", 0)) < 0)
        abort();
    if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
        abort();
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ge2_idx idx;
    if (ge2_idx_load(path, &idx) != GE2_OK)
        return 0;
    int64_t numel = 1;
    for (int i = 0; i < idx.ndim; i++)
        numel *= idx.dim[i];
    if (numel != idx.numel)
        abort();
    volatile uint8_t sink = 0;
    for (int64_t i = 0; i < idx.numel; i++)
        sink ^= idx.data[i];
    ge2_idx_release(&idx);
    return 0;
}
