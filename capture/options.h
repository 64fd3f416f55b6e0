/* The options a program runs with: the caller's compile options with the
 * environment's overrides (capture/options.c, the one file of the library
 * that reads the environment) and what follows from them. The backends open
 * with them; tests resolve them to see what a launch's kernels will see. */
#ifndef GE2_CAPTURE_OPTIONS_H
#define GE2_CAPTURE_OPTIONS_H

#include "fusion/fusion.h"
#include "ge2/extension.h"
#include "ge2/ge2.h"

/* The strings of `o` point into this struct, so it is not copied after
 * resolving. */
typedef struct ge2_program_options {
    ge2_compile_options o;
    char disable_fusions[256];
    char kernel_cache[4096]; /* "" when tuned choices stay in memory */
    ge2_fusion_set fusions;  /* the fuse pass's patterns: every key's */
    ge2_kernel_settings settings; /* what every launch's kernels see */
} ge2_program_options;

/* Fills *out from given (NULL: the defaults) and the environment. */
ge2_status ge2_options_resolve(const ge2_compile_options *given, ge2_program_options *out);

#endif /* GE2_CAPTURE_OPTIONS_H */
