/* The tiled GEMM's configurations as text: names in kernel reports and the
 * registry's cache tokens. Plain C, so the cache parser (gemm_registry.c)
 * is tested without a GPU. */
#include "kernels/cuda/gemm_tiled.h"

#include <stdio.h>
#include <string.h>

/* In ge2_tiled_tile order; the rows match gemm_tiled.cu's tile table. */
static const char *const tile_names[GE2_TILED_TILE_COUNT] = {"32x32", "64x32", "64x64"};

const char *ge2_tiled_tile_name(ge2_tiled_tile tile)
{
    return (unsigned)tile < GE2_TILED_TILE_COUNT ? tile_names[tile] : "tile?";
}

bool ge2_tiled_config_valid(ge2_tiled_config cfg)
{
    return (unsigned)cfg.tile < GE2_TILED_TILE_COUNT &&
           (cfg.splits == 1 || cfg.splits == 2 || cfg.splits == 4 || cfg.splits == 8);
}

void ge2_tiled_config_str(ge2_tiled_config cfg, char *buf, size_t size)
{
    snprintf(buf, size, "ge2 tiled %s split %d", ge2_tiled_tile_name(cfg.tile), cfg.splits);
}

void ge2_tiled_config_format(ge2_tiled_config cfg, char *buf, size_t size)
{
    snprintf(buf, size, "%s:%d", ge2_tiled_tile_name(cfg.tile), cfg.splits);
}

bool ge2_tiled_config_parse(const char *text, ge2_tiled_config *out)
{
    for (int t = 0; t < GE2_TILED_TILE_COUNT; t++) {
        size_t len = strlen(tile_names[t]);
        if (strncmp(text, tile_names[t], len) != 0 || text[len] != ':')
            continue;
        const char *s = text + len + 1;
        ge2_tiled_config c = {(ge2_tiled_tile)t, s[0] - '0'};
        if (s[0] < '1' || s[0] > '9' || s[1] != '\0' || !ge2_tiled_config_valid(c))
            return false;
        *out = c;
        return true;
    }
    return false;
}
