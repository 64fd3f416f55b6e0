/* Compile options: their defaults, what the environment overrides for
 * debugging, and what the kernels see of them. The only file of the library
 * that reads the environment; docs/options.md lists every variable.
 *
 * Variables take "0" for off and anything else non-empty for on; unset or
 * empty leaves the option as the caller set it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture/options.h"
#include "fusion/fusion.h"
#include "graph/error.h"

ge2_compile_options ge2_compile_defaults(void)
{
    ge2_compile_options o;
    memset(&o, 0, sizeof o);
    o.autotune = true;
    o.gemm_kernels = GE2_GEMM_KERNELS_ANY;
    o.time_epilogues = true;
    o.bf16_storage = true;
    o.kernel_candidates = true;
    o.pdl = true;
    o.feed_ahead = true;
    return o;
}

static void env_switch(const char *name, bool *option)
{
    const char *v = getenv(name);
    if (v && v[0])
        *option = strcmp(v, "0") != 0;
}

/* A pattern switched off by a variable: appended to the program's list. */
static ge2_status env_fusion(const char *name, const char *pattern, char *list, size_t size)
{
    bool on = true;
    env_switch(name, &on);
    if (on)
        return GE2_OK;
    size_t used = strlen(list);
    int n = snprintf(list + used, size - used, "%s%s", used ? "," : "", pattern);
    if (n < 0 || (size_t)n >= size - used)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_compile: %s=0: disable_fusions is too long to add '%s' to",
                         name, pattern);
    return GE2_OK;
}

ge2_status ge2_options_resolve(const ge2_compile_options *given, ge2_program_options *out)
{
    memset(out, 0, sizeof *out);
    out->o = given ? *given : ge2_compile_defaults();
    ge2_compile_options *o = &out->o;
    if ((unsigned)o->precision >= GE2_PRECISION_COUNT)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_compile: precision is %d; use a ge2_precision value",
                         (int)o->precision);
    if ((unsigned)o->gemm_kernels >= GE2_GEMM_KERNELS_COUNT)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_compile: gemm_kernels is %d; use a ge2_gemm_kernels value",
                         (int)o->gemm_kernels);

    env_switch("GE2_DISABLE_CAPTURE", &o->disable_capture);
    env_switch("GE2_AUTOTUNE", &o->autotune);
    env_switch("GE2_AUTOTUNE_LOG", &o->autotune_log);
    env_switch("GE2_TIME_EPILOGUES", &o->time_epilogues);
    env_switch("GE2_BF16_STORAGE", &o->bf16_storage);
    env_switch("GE2_KERNEL_CANDIDATES", &o->kernel_candidates);
    env_switch("GE2_PDL", &o->pdl);
    env_switch("GE2_FEED_AHEAD", &o->feed_ahead);
    env_switch("GE2_DEVICE_LOOP", &o->device_loop);
    env_switch("GE2_PRINT_KERNELS", &o->print_kernels);
    env_switch("GE2_MLP_STEP_PROFILE", &o->profile_fused);
    env_switch("GE2_TIME_LAUNCHES", &o->time_launches);
    const char *gemm = getenv("GE2_GEMM_KERNEL");
    if (gemm && gemm[0]) {
        if (strcmp(gemm, "auto") == 0)
            o->gemm_kernels = GE2_GEMM_KERNELS_ANY;
        else if (strcmp(gemm, "cublaslt") == 0)
            o->gemm_kernels = GE2_GEMM_KERNELS_CUBLASLT;
        else if (strcmp(gemm, "tiled") == 0)
            o->gemm_kernels = GE2_GEMM_KERNELS_TILED;
        else
            return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_compile: GE2_GEMM_KERNEL is '%.32s'; use auto, cublaslt or tiled",
                             gemm);
    }

    /* the fusion list: the caller's, then the patterns variables switch off */
    const char *disabled = getenv("GE2_DISABLE_FUSIONS");
    if (!disabled || !disabled[0])
        disabled = o->disable_fusions;
    if (disabled && strlen(disabled) >= sizeof out->disable_fusions)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_compile: disable_fusions is longer than %zu characters",
                         sizeof out->disable_fusions - 1);
    snprintf(out->disable_fusions, sizeof out->disable_fusions, "%s", disabled ? disabled : "");
    for (int i = 0; i < ge2_fusion_pattern_count(); i++) { /* the rows with a switch of their own */
        const ge2_fusion_pattern *row = ge2_fusion_pattern_at(i);
        if (row->switch_env)
            GE2_TRY(env_fusion(row->switch_env, row->name, out->disable_fusions, sizeof out->disable_fusions));
    }
    o->disable_fusions = out->disable_fusions;
    GE2_TRY(ge2_fusion_set_parse(out->disable_fusions, &out->fusions));

    /* the kernel cache: the variable, else the caller's, else under $HOME */
    const char *cache = getenv("GE2_KERNEL_CACHE");
    if (!cache)
        cache = o->kernel_cache;
    int n = 0;
    if (cache)
        n = snprintf(out->kernel_cache, sizeof out->kernel_cache, "%s", cache);
    else {
        const char *home = getenv("HOME");
        if (home && home[0])
            n = snprintf(out->kernel_cache, sizeof out->kernel_cache, "%s/.cache/ge2/kernels.txt", home);
    }
    if (n < 0 || (size_t)n >= sizeof out->kernel_cache)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_compile: the kernel cache path is longer than %zu characters",
                         sizeof out->kernel_cache - 1);
    o->kernel_cache = out->kernel_cache;

    out->settings = (ge2_kernel_settings){
        .autotune = o->autotune,
        .autotune_log = o->autotune_log,
        .gemm_kernels = o->gemm_kernels,
        .time_epilogues = o->time_epilogues,
        .kernel_candidates = o->kernel_candidates,
        .kernel_cache = out->kernel_cache[0] ? out->kernel_cache : NULL,
        .pdl = o->pdl,
        .profile = o->profile_fused,
    };
    return GE2_OK;
}
