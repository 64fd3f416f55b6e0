/* The memory plan of one graph key and the persistent layout shared by all keys.
 *
 * A graph key is (mode, concrete shapes of every input and label). Its plan
 * is a schedule (node order), each tensor's concrete shape, its lifetime over
 * the schedule and its place: a persistent pool or an offset in the key's
 * activation arena.
 */
#ifndef GE2_PLANNER_PLAN_H
#define GE2_PLANNER_PLAN_H

#include <stddef.h>

#include "fusion/fusion.h"
#include "graph/ir.h"

#define GE2_ARENA_ALIGN 256
/* Inputs plus labels a graph may have. */
#define GE2_MAX_FEEDS 16

typedef enum ge2_pool {
    GE2_POOL_NONE,      /* not used by this key */
    GE2_POOL_PARAMS,    /* parameter tensors */
    GE2_POOL_GRADS,     /* parameter gradients: same offsets as PARAMS (not with per-parameter updates) */
    GE2_POOL_CONSTANTS, /* constant tensors */
    GE2_POOL_INPUTS,    /* the key's static IO buffer: inputs and labels, then outputs (loss, metrics,
                           required input gradients), which a shared arena would not keep */
    GE2_POOL_ARENA,     /* everything else: the key's activation arena */
    GE2_POOL_BUFFERS,   /* persistent buffers (batch norm's running statistics), shared by every key */
    GE2_POOL_PARAM_COPIES, /* bf16 copies of parameters (GE2_ROLE_PARAMETER_COPY): element i copies PARAMS' i */
    GE2_POOL_COUNT
} ge2_pool;

const char *ge2_pool_name(ge2_pool pool);

/* Persistent layout, computed once per graph (shared by every key). */
typedef struct ge2_layout {
    size_t *offset;         /* [n_tensors] byte offset in its pool (params, grads, constants, buffers); 0 otherwise */
    size_t param_bytes;     /* == gradient bytes; f32 parameters aligned to GE2_PARAM_ALIGN_ELEMS */
    size_t param_decay_bytes; /* the first ones, which take weight decay (the rest: no_weight_decay) */
    size_t constant_bytes;
    size_t buffer_bytes;
    /* param_bytes / 2 when the graph has parameter copies (precision BF16),
     * else 0: a copy sits at half its parameter's offset */
    size_t param_copy_bytes;
    int n_tensors;
} ge2_layout;

ge2_status ge2_layout_new(const ge2_graph *graph, ge2_layout **out);
void ge2_layout_free(ge2_layout *layout);

typedef struct ge2_key {
    ge2_mode mode;
    int n_feeds;                     /* inputs and labels, in tensor-id order */
    int feed_ids[GE2_MAX_FEEDS];
    ge2_shape feed_shapes[GE2_MAX_FEEDS];
    ge2_fusion_set fusions; /* the fuse pass's patterns (all by default): they change the plan */
    uint64_t hash;
} ge2_key;

typedef struct ge2_plan_tensor {
    ge2_pool pool;
    size_t offset; /* bytes, in its pool */
    size_t bytes;
    ge2_shape shape;    /* concrete for this key */
    int first, last;    /* schedule positions of the producer and the last consumer (-1: unused) */
    int reuses;         /* tensor id whose memory this one took over in place, -1 if none */
    int view_of;        /* tensor id whose memory this one shares while both live (GE2_OPF_VIEW), -1 if none */
} ge2_plan_tensor;

typedef struct ge2_plan {
    ge2_key key;
    int n_steps;
    int *schedule;            /* [n_steps] node ids in execution order */
    ge2_plan_tensor *tensors; /* [graph->n_tensors] */
    int n_tensors;
    size_t arena_bytes;
    size_t lower_bound_bytes;
    int peak_position; /* the first schedule position where lower_bound_bytes are live */
    size_t naive_bytes;
    size_t input_bytes; /* the GE2_POOL_INPUTS buffer: feeds, then outputs */
    ge2_fusion_group *groups; /* [n_groups] the fuse pass's, in schedule order */
    int n_groups;
    /* Launch scratch (ge2_plan_scratch_query): [n_steps] the bytes of the
     * arena launch p may use while it runs, and their offset; NULL when no
     * launch asked for any. */
    size_t *scratch_bytes;
    size_t *scratch_offset;
} ge2_plan;

/* What each launch needs of the arena while it runs (ge2_launch.scratch: a
 * bf16 GEMM's operand copies, cuDNN's workspace), as the backend says from
 * the op's kernels. ge2_plan_new asks once per schedule position, after
 * every tensor's pool, shape and lifetime are known and before the plan's
 * only placement, so scratch and tensors are placed together: a launch's
 * scratch lives at its position only (only its own kernel uses it:
 * planner/scratch.c), takes room the tensors live across that position
 * leave, and the arena grows only by what does not fit in its gaps. */
typedef struct ge2_plan_scratch_query {
    /* bytes launch `step` of plan needs (0: none); plan has its schedule,
     * groups and tensors' pools and shapes, no arena offsets yet */
    size_t (*bytes)(void *user, const ge2_plan *plan, int step);
    void *user;
} ge2_plan_scratch_query;

ge2_status ge2_plan_new(const ge2_graph *graph, const ge2_layout *layout, const ge2_key *key, ge2_plan **out);
/* The same, asking scratch (NULL: no launch has any) and printing each
 * pass's result to dump (schedule, fuse, plan) as it goes, for
 * ge2_compile_options.dump (NULL: quiet). */
ge2_status ge2_plan_new_dumped(const ge2_graph *graph, const ge2_layout *layout, const ge2_key *key,
                               const ge2_plan_scratch_query *scratch, FILE *dump, ge2_plan **out);
void ge2_plan_free(ge2_plan *plan);

/* Keys. ge2_key_init lists the graph's inputs and labels (tensor-id order) at
 * their built shapes; a caller changes feed_shapes, then ge2_key_rehash. */
ge2_status ge2_key_init(const ge2_graph *graph, ge2_mode mode, ge2_key *key);
void ge2_key_rehash(ge2_key *key);
bool ge2_key_equal(const ge2_key *a, const ge2_key *b);

/* Text report of one plan; contains "plan: arena_bytes=A lower_bound_bytes=L naive_bytes=N". */
void ge2_plan_report(const ge2_plan *plan, const ge2_graph *graph, FILE *out);
/* DOT of the key's scheduled nodes in order, each fused group a cluster. */
ge2_status ge2_plan_dot(const ge2_plan *plan, const ge2_graph *graph, FILE *out);
/* Standalone SVG of the plan's arena: schedule position across, offset up. */
ge2_status ge2_plan_svg(const ge2_plan *plan, const ge2_graph *graph, FILE *out);

#endif /* GE2_PLANNER_PLAN_H */
