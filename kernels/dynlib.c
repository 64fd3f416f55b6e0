/* Run-time loading of a library by a symbol table (dynlib.h). */
#include "kernels/dynlib.h"

#include <dlfcn.h>
#include <stdio.h>

void *ge2_dynlib_open(const char *library, const char *what, const ge2_dynlib_symbol *syms, size_t n_syms,
                      char *error, size_t error_size)
{
    void *lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(error, error_size, "%s could not be loaded: %s", what, dlerror());
        return NULL;
    }
    for (size_t i = 0; i < n_syms; i++)
        if (!(*syms[i].fn = dlsym(lib, syms[i].name))) {
            snprintf(error, error_size, "%s lacks %s", library, syms[i].name);
            dlclose(lib);
            return NULL;
        }
    return lib;
}
