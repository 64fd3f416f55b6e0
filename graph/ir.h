/* The graph IR every module works on: tensors, nodes (their attributes
 * as bytes each op family reads as its own struct), and the op registry's
 * lookups.
 *
 * Tensors and nodes are referred to by index (tensor id, node id) inside one
 * graph; the public ge2_tensor* handle is the tensor record itself, which
 * knows its graph, so a tensor from another graph is detected at once.
 */
#ifndef GE2_GRAPH_IR_H
#define GE2_GRAPH_IR_H

#include "ge2/ge2.h"
#include "ge2/extension.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GE2_NAME_MAX 96
/* Number of f32 elements each parameter is aligned to inside the flat pools
 * (256 bytes), so a kernel may sweep the pools as one array. */
#define GE2_PARAM_ALIGN_ELEMS 64

typedef enum ge2_phase {
    GE2_PHASE_FORWARD,  /* forward, loss and metrics: run in train and eval */
    GE2_PHASE_BACKWARD, /* gradient nodes: train only */
    GE2_PHASE_OPTIMIZER,
    GE2_PHASE_COUNT
} ge2_phase;

/* ------------------------------------------------------------- attributes */

/* A node's attributes: bytes each op family reads as its own struct,
 * declared in the family's header (ops/<family>/<family>.h), so adding an op
 * never edits the IR. Read and written through GE2_ATTRS; a registered op's
 * builder gives at most GE2_OP_ATTRS_BYTES of them (ge2_node_attrs). */
#define GE2_NODE_ATTRS_BYTES 256
typedef union ge2_attrs {
    unsigned char bytes[GE2_NODE_ATTRS_BYTES];
    double align_double; /* the strictest member alignment of any family's struct */
    int64_t align_i64;
    void *align_pointer;
} ge2_attrs;

/* attrs (an lvalue of ge2_attrs, e.g. node->attrs) as a family's struct:
 * GE2_ATTRS(ge2_linear_attrs, node->attrs)->act. The same bytes are read
 * and written as several types, which C's type-based aliasing rules do not
 * allow: GCC -O2 then moves a copy of a node before a store to an int field
 * of its attrs. So ge2 compiles with -fno-strict-aliasing
 * (tools/build_defs.bzl), and code outside ge2's build reads a node's attrs
 * by copying them (ge2_node_attrs). */
#define GE2_ATTRS(type, attrs) ((type *)(void *)(attrs).bytes)

/* Declared after each family's struct: it fits a node's attrs. */
#ifdef __cplusplus
#define GE2_ATTRS_FIT(type) \
    static_assert(sizeof(type) <= GE2_NODE_ATTRS_BYTES && alignof(type) <= alignof(ge2_attrs), #type " fits ge2_attrs")
#else
#define GE2_ATTRS_FIT(type) \
    _Static_assert(sizeof(type) <= GE2_NODE_ATTRS_BYTES && _Alignof(type) <= _Alignof(ge2_attrs), #type " fits ge2_attrs")
#endif

/* ---------------------------------------------------------- tensors, nodes */

struct ge2_tensor {
    ge2_graph *graph;
    int id;
    char name[GE2_NAME_MAX];
    ge2_dtype dtype;
    ge2_shape shape; /* as built; a graph key may specialize the first dim of inputs */
    ge2_role role;
    int producer;     /* node id, -1 for leaves */
    int grad;         /* tensor id of this tensor's gradient, -1 if none */
    int grad_of;      /* for a gradient tensor: the tensor it is the gradient of, else -1 */
    int copy_of;      /* GE2_ROLE_PARAMETER_COPY: the parameter it is the bf16 copy of, else -1 */
    bool requires_grad; /* inputs: ge2_require_grad was called */
    bool is_output;     /* loss or metric: lives to the end of the step */
    bool no_weight_decay; /* parameters: the optimizer's weight decay leaves it be */
    char alias[GE2_NAME_MAX]; /* parameters: a second checkpoint name ("": none; ge2_checkpoint_alias) */
    int64_t real_rows;  /* parameters: rows from it on are padding (ge2_parameter_padding); 0: none */
    bool conv1d;        /* parameters: files may hold it transposed, [in, out] (ge2_checkpoint_conv1d) */
    ge2_init init;      /* parameters */
    void *constant_data; /* constants: host copy, owned (ge2_malloc) */
};

struct ge2_node {
    int id;
    ge2_op op;
    ge2_phase phase;
    int n_inputs, n_outputs;
    int inputs[GE2_MAX_INPUTS];   /* tensor ids */
    int outputs[GE2_MAX_OUTPUTS]; /* tensor ids */
    ge2_attrs attrs;
};

struct ge2_graph {
    ge2_tensor **tensors; /* owned; tensors[i]->id == i; stable addresses */
    int n_tensors, cap_tensors;
    ge2_node *nodes; /* nodes[i].id == i, in creation order (a topological order) */
    int n_nodes, cap_nodes;
    uint64_t seed;
    int loss;             /* tensor id given to ge2_backward, -1 before */
    bool has_optimizer;
    /* ge2_optimizer chose GE2_UPDATE_PER_PARAMETER: parameter gradients are
     * inputs of their layer's OPTIMIZER_UPDATE and live in the arena, and
     * the program allocates no gradient pool */
    bool per_parameter_updates;
    int n_parameters;     /* count of PARAMETER tensors */
    /* bumped by every change a compiled program depends on that the node and
     * tensor counts do not show: compile-time rewrites (graph/rewrite.h),
     * weight-decay groups (ge2_no_weight_decay), so a program compiled
     * before one refuses to step */
    unsigned changes;
};

/* ------------------------------------------------------------ op registry */

/* The definition of a registered op, or NULL for an id never registered.
 * The registry holds ge2's own ops (ops/registry.c) and the ones users
 * register (include/ge2/extension.h); the engine knows ops only through it. */
const ge2_op_def *ge2_op_def_of(ge2_op op);
/* Runs launch's CPU kernel. bf16 inputs it reads as such (ge2_op_reads_bf16)
 * are widened into f32 copies first, and a GEMM given one multiplies in
 * bf16; outputs stored in bf16 (ge2_op_def.stores_bf16) are computed into
 * f32 copies and rounded into their tensors after. */
ge2_status ge2_op_run_cpu(const ge2_launch *launch);
/* Whether input `input` of op is one of its GEMM operands
 * (GE2_OPF_BF16_OPERANDS: inputs 0 and 1, or ge2_op_def.operands). */
bool ge2_op_bf16_operand(ge2_op op, int input);
/* Whether a GEMM-class launch multiplies 16-bit operands: precision BF16
 * or FP16, or one of its operands (ge2_op_bf16_operand) is a bf16 tensor */
bool ge2_launch_multiplies_half(const ge2_launch *launch);
/* Whether node's input `input` may be a bf16 tensor where it was built f32:
 * a GEMM operand (ge2_op_bf16_operand), a shape-only
 * reference (GE2_OPF_LIKE1's input 1), or what the op's reads_bf16 allows. */
bool ge2_op_reads_bf16(const ge2_node *node, int input);
/* Whether node draws from the step's random stream (GE2_OPF_RANDOM, or its
 * op's draws_random) */
bool ge2_node_draws_random(const ge2_node *node);
/* Whether node's output `output` may be a bf16 tensor where it was built
 * f32 (ge2_op_def.stores_bf16). */
bool ge2_op_stores_bf16(const ge2_node *node, int output);
/* The input whose memory the node's output 0 may take over where the node
 * reads it last (ge2_op_def.output_over_input), -1 for none */
int ge2_op_output_over_input(const ge2_graph *graph, const ge2_node *node);
/* The output that takes over ge2_op_output_over_input's input (0 for most ops) */
int ge2_op_over_output(const ge2_node *node);
/* The dtype inference sees for a tensor of `dtype` at node's input `input`:
 * f32 for a bf16 tensor the op reads as such, else dtype itself. */
static inline ge2_dtype ge2_infer_input_dtype(const ge2_node *node, int input, ge2_dtype dtype)
{
    return dtype == GE2_BF16 && ge2_op_reads_bf16(node, input) ? GE2_F32 : dtype;
}
/* What an op's inference sees of tensor t as node's input `input`, at shape
 * (t's own, or a graph key's): every caller of ge2_op_def.infer builds its
 * inputs so. */
static inline ge2_desc ge2_infer_input_desc(const ge2_node *node, int input, const ge2_tensor *t, ge2_shape shape)
{
    return (ge2_desc){ge2_infer_input_dtype(node, input, t->dtype), shape, t->name};
}
/* Ops registered so far: valid ids are [0, ge2_op_count()). */
int ge2_op_count(void);

static inline const char *ge2_op_name(ge2_op op)
{
    const ge2_op_def *d = ge2_op_def_of(op);
    return d ? d->name : "?";
}

static inline unsigned ge2_op_flags(ge2_op op)
{
    const ge2_op_def *d = ge2_op_def_of(op);
    return d ? d->flags : 0u;
}

/* ------------------------------------------------------ builder internals */

/* Appends a node, infers its outputs, creates them (role ACTIVATION, named
 * "<op>_<id>" unless names are given) and returns the node id in *node_id.
 * Used by the public op functions and by backward rules. */
ge2_status ge2_graph_add_node(ge2_graph *graph, ge2_op op, ge2_phase phase, const int *inputs, int n_inputs,
                              int n_outputs, const ge2_attrs *attrs, int *node_id);

static inline ge2_tensor *ge2_graph_tensor(const ge2_graph *graph, int id) { return graph->tensors[id]; }

/* Whether nodes a and b read a tensor in common (an in-place op's input is
 * what it writes) */
static inline bool ge2_nodes_share_input(const ge2_node *a, const ge2_node *b)
{
    for (int i = 0; i < a->n_inputs; i++)
        for (int j = 0; j < b->n_inputs; j++)
            if (a->inputs[i] == b->inputs[j])
                return true;
    return false;
}

/* Whether node b reads a tensor node a writes */
static inline bool ge2_node_reads_output_of(const ge2_node *b, const ge2_node *a)
{
    for (int i = 0; i < b->n_inputs; i++)
        for (int o = 0; o < a->n_outputs; o++)
            if (b->inputs[i] == a->outputs[o])
                return true;
    return false;
}

/* The parameter whose final, summed gradient t is (what the optimizer
 * reads), or NULL for any other tensor. */
static inline const ge2_tensor *ge2_param_of_grad(const ge2_graph *graph, const ge2_tensor *t)
{
    if (t->grad_of < 0)
        return NULL;
    const ge2_tensor *p = graph->tensors[t->grad_of];
    return p->role == GE2_ROLE_PARAMETER && p->grad == t->id ? p : NULL;
}

#ifdef __cplusplus
}
#endif

#endif /* GE2_GRAPH_IR_H */
