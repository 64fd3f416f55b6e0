/* A shared library opened at run time (dlopen), its functions found by a
 * table: how ge2 reaches cuDNN and NCCL, so a binary runs where they are
 * missing until it needs them, and the error then names the library or
 * the missing symbol. */
#ifndef GE2_KERNELS_DYNLIB_H
#define GE2_KERNELS_DYNLIB_H

#include <stddef.h>

/* One function: where its address goes, and its name. */
typedef struct ge2_dynlib_symbol {
    void **fn;
    const char *name;
} ge2_dynlib_symbol;

/* Opens library (RTLD_NOW | RTLD_LOCAL) and fills every syms[i].fn; the
 * handle, or NULL with why in error ("<what> could not be loaded: ...",
 * "<library> lacks <symbol>"). */
void *ge2_dynlib_open(const char *library, const char *what, const ge2_dynlib_symbol *syms, size_t n_syms,
                      char *error, size_t error_size);

#endif /* GE2_KERNELS_DYNLIB_H */
