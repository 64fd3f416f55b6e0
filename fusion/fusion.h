/* Fusion as a pass: a registry of patterns, each one row (fusion/registry.c)
 * with its own folder (fusion/<pattern>/) for its matcher and kernels.
 *
 * A row is one of two kinds.
 *
 * A rewrite (its `rewrite` set) runs once per compile, on the graph, before
 * any key: it replaces a few plain nodes with one fused op that has kernels
 * of its own on every backend (e.g. a backward GEMM with its bias-gradient
 * and activation-derivative epilogues, fusion/backward_gemm). Autograd and
 * the op builders emit plain nodes; what fuses into an op is decided here.
 *
 * A group pattern (its `match` set) runs per graph key, on the key's
 * schedule and concrete shapes, before memory is planned: each one in
 * registry order looks for groups of scheduled nodes that one
 * implementation can run (or says why it declined), and a node belongs to
 * at most one group. What a group is to the rest of the compiler is
 * generic:
 *   - the planner: a group runs its nodes in phases, side by side within a
 *     phase; so an arena tensor one of its nodes reads or writes keeps its
 *     bytes from the first position of the earliest phase that uses it to
 *     the last position of the latest one;
 *   - a backend: runs a group with the pattern's implementation for it, or
 *     node by node when it has none or the implementation declines the
 *     key's buffers. The CPU backend always runs the nodes, so both backends
 *     run the same plan with the same offsets.
 * The matchers see nodes, tensors and shapes only (no backend), so the CPU
 * and CUDA builds find the same groups.
 */
#ifndef GE2_FUSION_FUSION_H
#define GE2_FUSION_FUSION_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "graph/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Concrete shape of a tensor in the key being matched. */
typedef ge2_shape (*ge2_fusion_shape_fn)(const void *ctx, int tensor);

/* What a matcher sees of a key: its scheduled nodes, in order. */
typedef struct ge2_fusion_key {
    const ge2_graph *graph;
    const ge2_node *const *nodes; /* [n] in schedule order */
    int n;
    ge2_fusion_shape_fn shape_of;
    const void *ctx;
} ge2_fusion_key;

/* Schedule positions [first, first + count) run as one, in n_phases phases:
 * position first + i runs in phase phase_of[i]. */
typedef struct ge2_fusion_group {
    int pattern; /* its row in the registry */
    int first, count;
    int n_phases;
    int *phase_of; /* [count], owned */
} ge2_fusion_group;

/* ------------------------------------------------ implementations (CUDA) */

struct ge2_cuda_copy; /* kernels/cuda/step_copy.h */

/* A group as it runs: its launches (feeds possibly read where the step
 * staged them) and, when the group starts or ends the step and its
 * implementation takes them, the step's feed upload and result copies. */
typedef struct ge2_fusion_run {
    const ge2_launch *launches; /* [n] */
    int n;
    void *stream;                         /* cudaStream_t */
    const struct ge2_cuda_copy *upload;   /* NULL: not this group's */
    const struct ge2_cuda_copy *results;  /* [n_results]; NULL: not this group's */
    int n_results;
} ge2_fusion_run;

enum {
    GE2_FUSION_DOES_UPLOAD = 1u << 0,  /* starting a step, it does the feed upload too */
    GE2_FUSION_DOES_RESULTS = 1u << 1, /* ending a step, it does the result copies too */
    /* its kernels do what the launches do under any precision, given f32
     * tensors (no GEMM whose operands a precision rounds): the backend then
     * declines its groups for bf16 tensors only, not for precision BF16 */
    GE2_FUSION_ANY_PRECISION = 1u << 2,
    /* its prepare (or takes) checks every tensor's dtype itself and takes
     * the bf16 tensors it says it does (a layer norm's bf16 result for a
     * GEMM): the backend then does not decline its groups for bf16 tensors */
    GE2_FUSION_TAKES_BF16 = 1u << 3,
};

typedef struct ge2_fusion_impl {
    unsigned does; /* GE2_FUSION_DOES_* */
    /* Per key and staging slot with launches of its own (ge2_exec.
     * slot_launches: the same but for the feeds' addresses) before warm-up
     * and capture, given the group's prepared launches: *state, or NULL
     * with why filled when these buffers or shapes are not its (the
     * backend then runs the nodes). A slot's state is its own: a group's
     * launch gets the one its step's slot made. */
    ge2_status (*prepare)(const ge2_launch *launches, int n, void **state, char *why, size_t why_size);
    /* Enqueues the group; capturable like any kernel launch. Its kernels
     * use none of the launches' ge2_launch.scratch: the planner gives each
     * launch's scratch room at the launch's own position only
     * (planner/scratch.c), which the group's other positions may reuse. */
    ge2_status (*launch)(const void *state, const ge2_fusion_run *run);
    void (*release)(void *state);
    /* The kernel report's line for the group's launches ("in the ..."). */
    const char *(*describe)(const void *state);
    /* Or, for an implementation whose launches carry all it needs (no
     * state; neither upload nor results), these three where prepare,
     * launch and describe are NULL: whether it takes the group's launches
     * (else why), how it enqueues them (on their stream), and the kernel
     * report's line. */
    bool (*takes)(const ge2_launch *launches, int n, char *why, size_t why_size);
    ge2_status (*run)(const ge2_launch *launches, int n);
    const char *what;
} ge2_fusion_impl;

/* A group of `count` positions from its first, side by side in one phase
 * (one kernel does them all at once); true, for a matcher to return */
static inline bool ge2_fusion_one_phase(ge2_fusion_group *group, int count)
{
    group->count = count;
    group->n_phases = 1;
    for (int i = 0; i < count; i++)
        group->phase_of[i] = 0;
    return true;
}

/* A matcher's or an implementation's "no": why's text (fmt as printf's;
 * why NULL or why_size 0: none asked), and false, for it to return */
__attribute__((format(printf, 3, 4))) static inline bool ge2_fusion_no(char *why, size_t why_size, const char *fmt,
                                                                       ...)
{
    if (why && why_size) {
        va_list args;
        va_start(args, fmt);
        vsnprintf(why, why_size, fmt, args);
        va_end(args);
    }
    return false;
}

/* --------------------------------------------------------------- patterns */

typedef struct ge2_fusion_pattern {
    const char *name; /* what ge2_compile_options.disable_fusions names */
    const char *what; /* one line for dumps and docs */
    /* An environment variable whose value 0 switches the row off, for
     * debugging (docs/options.md); NULL for none. capture/options.c reads
     * it through the registry, so it names no pattern. */
    const char *switch_env;
    /* A rewrite row: rewrites the graph (graph/rewrite.h), *n_fused = how
     * many fused nodes it made; `log`, when not NULL, gets a line per fused
     * node and per candidate it declined, with the reason. NULL for a
     * group pattern. */
    ge2_status (*rewrite)(ge2_graph *graph, FILE *log, int *n_fused);
    /* A group pattern: a group whose first node is key->nodes[at]: true
     * with *group filled (count, n_phases, phase_of[0, count); phase_of has
     * room for key->n - at), or false with why (NULL-safe) filled. NULL for
     * a rewrite row. */
    bool (*match)(const ge2_fusion_key *key, int at, ge2_fusion_group *group, char *why, size_t why_size);
    const ge2_fusion_impl *cuda; /* groups: NULL for no CUDA implementation; rewrites: NULL */
    /* A training graph the row fuses something in, for the generic test
     * (tests/fusion): every row has one, so a new pattern is tested the
     * day it is added. */
    ge2_status (*example)(ge2_graph **graph);
    /* A rewrite whose fused nodes compute every value bit for bit as the
     * nodes they replace did on the CPU (tests/fusion holds it to that;
     * other rewrites sum in another order and get fp32 rounding) */
    bool exact;
} ge2_fusion_pattern;

int ge2_fusion_pattern_count(void);
const ge2_fusion_pattern *ge2_fusion_pattern_at(int index);
/* The row called name; GE2_ERR_INVALID_ARGUMENT naming the known ones otherwise. */
ge2_status ge2_fusion_pattern_find(const char *name, int *index);

/* Which patterns a compile uses: bit i for row i. */
typedef unsigned ge2_fusion_set;
/* All rows but those named in `disabled` (comma-separated; NULL or ""
 * for none); an unknown name is an error naming the known ones. */
ge2_status ge2_fusion_set_parse(const char *disabled, ge2_fusion_set *out);

/* The start the layer-norm patterns' examples share: a new graph with
 * input "x" [100, 40], "labels" [100] and h = linear(x) of "fc.weight"
 * [width, 40], no bias (rows of `width` values, 100 rows: a last block of
 * 8 rows not all there); on failure the graph is freed */
ge2_status ge2_fusion_example_rows(int64_t width, ge2_graph **g, ge2_tensor **labels, ge2_tensor **h);

/* ge2_fusion_example_train after a linear head [classes, h's last dim]
 * ("head.weight", "head.bias") on h. */
ge2_status ge2_fusion_example_head(ge2_graph *g, ge2_status st, ge2_tensor *h, int64_t classes, ge2_tensor *labels,
                                   ge2_graph **graph);

/* A pre-norm block's residual adds, for the residual-norm patterns:
 * h = linear(x) (ge2_fusion_example_rows, rows of 48), s = h + gelu(h),
 * n = norm(s), and s + n (a second residual add that reads s again) into
 * the head. */
ge2_status ge2_fusion_example_prenorm(ge2_status (*norm)(ge2_graph *g, ge2_tensor *x, ge2_tensor **y),
                                      ge2_graph **graph);

/* A classifier MLP in[0] -> in[1] -> ... -> in[n-1] (act after each hidden
 * layer, none on the last), cross-entropy, accuracy marked as a metric,
 * its backward and a flat Adam; input "x" [batch, in[0]], label "labels"
 * [batch]. The patterns' examples are such graphs. */
ge2_status ge2_fusion_example_mlp(const int64_t *widths, int n, int64_t batch, ge2_activation act,
                                  ge2_graph **graph);

/* The end of every example: cross-entropy of logits against labels, the
 * accuracy marked as a metric, the backward and a flat Adam; st is the
 * status of the building so far (g is freed on any failure). */
ge2_status ge2_fusion_example_train(ge2_graph *g, ge2_status st, ge2_tensor *logits, ge2_tensor *labels,
                                    ge2_graph **graph);

/* ------------------------------------------------------------------ pass */

/* The rewrite rows in `set`, in registry order, over the graph; n_fused,
 * when not NULL, gets each row's count ([ge2_fusion_pattern_count()], 0
 * for group patterns and rows left out). Run once per compile: a graph
 * compiled again has nothing left to rewrite. */
ge2_status ge2_fusion_rewrite(ge2_graph *graph, ge2_fusion_set set, FILE *log, int *n_fused);

/* The pass over one key: the groups of the group patterns in `set`, in schedule
 * order, in *groups (ge2_fusion_groups_free). `log`, when not NULL, gets a
 * line per group found and per pattern that found none, with its reason. */
ge2_status ge2_fusion_find(const ge2_fusion_key *key, ge2_fusion_set set, FILE *log, ge2_fusion_group **groups,
                           int *n_groups);
void ge2_fusion_groups_free(ge2_fusion_group *groups, int n_groups);

#ifdef __cplusplus
}
#endif

#endif /* GE2_FUSION_FUSION_H */
