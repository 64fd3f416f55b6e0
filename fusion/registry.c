/* The pattern registry, one row per pattern (its folder holds the row's
 * matcher or rewrite and kernels), and the fuse pass: the rewrites over the
 * graph, then the groups over each key. Order matters: an earlier group
 * pattern takes its nodes first, so the whole-step kernel, which takes a
 * key whole, comes before the pairs it would contain. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "fusion/fusion.h"
#include "graph/alloc.h"
#include "graph/error.h"

extern const ge2_fusion_pattern ge2_fusion_backward_gemm;
extern const ge2_fusion_pattern ge2_fusion_recompute_act;
extern const ge2_fusion_pattern ge2_fusion_add_into;
extern const ge2_fusion_pattern ge2_fusion_bn_relu;
extern const ge2_fusion_pattern ge2_fusion_add_rms_norm;
extern const ge2_fusion_pattern ge2_fusion_add_layer_norm;
extern const ge2_fusion_pattern ge2_fusion_mlp_step;
extern const ge2_fusion_pattern ge2_fusion_head;
extern const ge2_fusion_pattern ge2_fusion_ln_backward;
extern const ge2_fusion_pattern ge2_fusion_dropout_ln;
extern const ge2_fusion_pattern ge2_fusion_tail_copies;

static const ge2_fusion_pattern *const patterns[] = {
    /* rewrites: before any key, so the groups see their fused nodes */
    &ge2_fusion_backward_gemm,
    &ge2_fusion_recompute_act, /* on backward_gemm's LINEAR_GRAD_INPUTs */
    &ge2_fusion_add_into,
    /* after add_into: a residual ADD of a dropout's output is better folded
     * into the dropout (no pass of its own) than into a norm (one read less) */
    &ge2_fusion_add_rms_norm,
    &ge2_fusion_add_layer_norm,
    &ge2_fusion_bn_relu,
    &ge2_fusion_mlp_step,
    &ge2_fusion_head,
    &ge2_fusion_ln_backward,
    &ge2_fusion_dropout_ln,
    &ge2_fusion_tail_copies,
};

#define N_PATTERNS ((int)(sizeof patterns / sizeof patterns[0]))
_Static_assert(N_PATTERNS <= (int)(8 * sizeof(ge2_fusion_set)), "a fusion set has a bit per pattern");

int ge2_fusion_pattern_count(void) { return N_PATTERNS; }

const ge2_fusion_pattern *ge2_fusion_pattern_at(int index)
{
    return index >= 0 && index < N_PATTERNS ? patterns[index] : NULL;
}

static void known_names(char *buf, size_t size)
{
    buf[0] = '\0';
    for (int i = 0; i < N_PATTERNS; i++) {
        size_t used = strlen(buf);
        snprintf(buf + used, size - used, "%s%s", i ? ", " : "", patterns[i]->name);
    }
}

ge2_status ge2_fusion_pattern_find(const char *name, int *index)
{
    for (int i = 0; name && i < N_PATTERNS; i++)
        if (strcmp(patterns[i]->name, name) == 0) {
            *index = i;
            return GE2_OK;
        }
    char names[256];
    known_names(names, sizeof names);
    return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2 fusion: no pattern named '%s' (patterns: %s)", name ? name : "",
                     names);
}

ge2_status ge2_fusion_set_parse(const char *disabled, ge2_fusion_set *out)
{
    ge2_fusion_set set = N_PATTERNS == (int)(8 * sizeof set) ? ~0u : (1u << N_PATTERNS) - 1u;
    for (const char *p = disabled; p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char name[64];
        if (len >= sizeof name)
            return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2 fusion: disable_fusions names '%.*s...', too long", 32, p);
        memcpy(name, p, len);
        name[len] = '\0';
        if (len > 0) {
            int i;
            GE2_TRY(ge2_fusion_pattern_find(name, &i));
            set &= ~(1u << i);
        }
        p = end ? end + 1 : p + len;
    }
    *out = set;
    return GE2_OK;
}

ge2_status ge2_fusion_rewrite(ge2_graph *graph, ge2_fusion_set set, FILE *log, int *n_fused)
{
    for (int p = 0; p < N_PATTERNS; p++) {
        const ge2_fusion_pattern *pat = patterns[p];
        int count = 0;
        const bool on = set & (1u << p);
        if (pat->rewrite && !on && log)
            fprintf(log, "fuse: %s: off (ge2_compile_options.disable_fusions)\n", pat->name);
        if (pat->rewrite && on)
            GE2_TRY(pat->rewrite(graph, log, &count));
        if (n_fused)
            n_fused[p] = count;
    }
    return GE2_OK;
}

void ge2_fusion_groups_free(ge2_fusion_group *groups, int n_groups)
{
    for (int g = 0; groups && g < n_groups; g++)
        ge2_free(groups[g].phase_of);
    ge2_free(groups);
}

/* Appends *g (its phase_of moves into the list). */
static ge2_status append(ge2_fusion_group **list, int *n, int *cap, ge2_fusion_group *g)
{
    if (!ge2_reserve((void **)list, cap, *n, sizeof **list, 8))
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2 fusion: %d groups", *n + 1);
    (*list)[(*n)++] = *g;
    g->phase_of = NULL;
    return GE2_OK;
}

/* Groups sorted by first position (patterns find theirs in turn). */
static int by_first(const void *a, const void *b)
{
    return ((const ge2_fusion_group *)a)->first - ((const ge2_fusion_group *)b)->first;
}

ge2_status ge2_fusion_find(const ge2_fusion_key *key, ge2_fusion_set set, FILE *log, ge2_fusion_group **groups,
                           int *n_groups)
{
    *groups = NULL;
    *n_groups = 0;
    const int n = key->n;
    bool *taken = ge2_calloc(n > 0 ? (size_t)n : 1, sizeof *taken);
    ge2_fusion_group g = {0};
    g.phase_of = ge2_malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    ge2_status st = taken && g.phase_of ? GE2_OK : ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2 fusion: %d nodes", n);
    int cap = 0;
    for (int p = 0; st == GE2_OK && p < N_PATTERNS; p++) {
        const ge2_fusion_pattern *pat = patterns[p];
        if (!pat->match)
            continue; /* a rewrite: ran on the graph before any key */
        if (!(set & (1u << p))) {
            if (log)
                fprintf(log, "fuse: %s: off (ge2_compile_options.disable_fusions)\n", pat->name);
            continue;
        }
        int found = 0, tried = 0;
        char why[256] = "";
        for (int at = 0; st == GE2_OK && at < n; at++) {
            if (taken[at])
                continue;
            tried++;
            g.pattern = p;
            g.first = at;
            g.count = g.n_phases = 0;
            if (!pat->match(key, at, &g, why, sizeof why))
                continue;
            bool free_span = g.count >= 1 && at + g.count <= n && g.n_phases >= 1;
            for (int i = 0; free_span && i < g.count; i++)
                free_span = !taken[at + i] && g.phase_of[i] >= 0 && g.phase_of[i] < g.n_phases;
            if (!free_span) /* a malformed group: its nodes run one by one */
                continue;
            for (int i = 0; i < g.count; i++)
                taken[at + i] = true;
            if (log) {
                fprintf(log, "fuse: %s: nodes", pat->name);
                for (int i = 0; i < g.count; i++)
                    fprintf(log, " %d", key->nodes[at + i]->id);
                fprintf(log, " as one group (%d phase%s)\n", g.n_phases, g.n_phases == 1 ? "" : "s");
            }
            found++;
            int count = g.count;
            st = append(groups, n_groups, &cap, &g); /* on success g.phase_of moved into the list */
            if (st == GE2_OK && !(g.phase_of = ge2_malloc(sizeof(int) * (size_t)(n > 0 ? n : 1))))
                st = ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2 fusion: %d nodes", n);
            at += count - 1;
        }
        if (log && st == GE2_OK && !found)
            fprintf(log, "fuse: %s: no group (%s)\n", pat->name,
                    !tried   ? "every node is in an earlier pattern's group"
                    : why[0] ? why
                             : "no candidate nodes");
    }
    ge2_free(taken);
    ge2_free(g.phase_of);
    if (st != GE2_OK) {
        ge2_fusion_groups_free(*groups, *n_groups);
        *groups = NULL;
        *n_groups = 0;
        return st;
    }
    if (*n_groups > 1)
        qsort(*groups, (size_t)*n_groups, sizeof **groups, by_first);
    return GE2_OK;
}
