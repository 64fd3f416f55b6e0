/* The graph IR every module works on: tensors, nodes, the attribute
 * structs of ge2's own ops, and the op registry's lookups.
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
/* ge2_reduce_attrs.axis for "all elements". */
#define GE2_AXIS_ALL (-100)
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

typedef struct ge2_linear_attrs {
    ge2_activation act;
    float slope; /* leaky_relu */
} ge2_linear_attrs;

typedef struct ge2_matmul_attrs {
    bool trans_a, trans_b;
} ge2_matmul_attrs;

typedef struct ge2_scale_attrs {
    double alpha;
} ge2_scale_attrs;

typedef struct ge2_act_attrs {
    ge2_activation act;
    float slope;
    /* ACTIVATION_BACKWARD, LINEAR_GRAD_INPUT: the saved input is y = act(z), not z
     * (LINEAR_GRAD_INPUT's relu from z reads LINEAR's U8 bit-mask instead) */
    bool from_output;
    /* LINEAR_GRAD_INPUT with a saved z: output 2 (beside dx and db) is
     * act(z) made again, for the next layer's weight gradient, so the
     * forward's y need not live until the backward (fusion/recompute_act) */
    bool recompute;
} ge2_act_attrs;

typedef struct ge2_reduce_attrs {
    int axis; /* normalized to [0, ndim), or GE2_AXIS_ALL */
} ge2_reduce_attrs;

typedef struct ge2_reshape_attrs {
    ge2_shape shape; /* may hold one -1; unused when the like input is given */
} ge2_reshape_attrs;

/* EXPAND and REDUCE_TO (each is the other's backward): out = (x broadcast
 * up, or summed down, to like's shape) * scale [/ factor when mean]. Builders
 * always set scale (1 for a plain broadcast or sum). */
typedef struct ge2_expand_attrs {
    double scale; /* EXPAND multiplies by this (mean's backward: 1/n) */
    /* Also divide by numel(larger shape) / numel(smaller shape), taken from the
     * launch's concrete shapes: mean's 1/n stays right when a graph key changes
     * the batch, which a literal scale would not. */
    bool mean;
} ge2_expand_attrs;

/* PERMUTE: output dim i is input dim perm[i] (the first ndim entries). */
typedef struct ge2_permute_attrs {
    int perm[GE2_MAX_DIMS];
} ge2_permute_attrs;

typedef struct ge2_concat_attrs {
    int axis;
} ge2_concat_attrs;

typedef struct ge2_slice_attrs {
    int axis;
    int64_t start, end;
} ge2_slice_attrs;

typedef struct ge2_loss_attrs {
    float label_smoothing;
    /* CROSS_ENTROPY: the loss is this node's output itself (set by its
     * backward rule), so its gradient output is the backward's start and
     * carries the control block's loss_scale; else the rule multiplies it
     * by an upstream gradient that carries the scale already */
    bool seeds_backward;
    ge2_dtype dtype; /* LOSS_SCALE: the seed's, which is the loss's */
} ge2_loss_attrs;

typedef struct ge2_optim_attrs {
    ge2_optimizer_config config;
    /* OPTIMIZER_UPDATE: how many update nodes the step runs (1 flat, one per
     * layer per-parameter); the last to finish commits the step
     * (optim/optimizer_math.h). 0 reads as 1. */
    int update_nodes;
} ge2_optim_attrs;

/* CONV2D and its backward ops: PyTorch's Conv2d arguments, per axis (h, w). */
typedef struct ge2_conv2d_attrs {
    int stride[2], padding[2], dilation[2];
    int groups;
} ge2_conv2d_attrs;

/* MAX_POOL2D, AVG_POOL2D and their backward ops, per axis (h, w). Average
 * pooling divides by the whole window, padding included (PyTorch's
 * count_include_pad=True). */
typedef struct ge2_pool2d_attrs {
    int kernel[2], stride[2], padding[2];
} ge2_pool2d_attrs;

/* BATCH_NORM: PyTorch's BatchNorm momentum and eps. relu: y = max(0, ·),
 * and on its backward ops the gradient is taken through that relu (their
 * extra last input is y): the bn_relu fusion's form (fusion/bn_relu). */
typedef struct ge2_batch_norm_attrs {
    double momentum, eps;
    bool relu;
} ge2_batch_norm_attrs;

/* ATTENTION and its backward ops: causal masking (query t sees keys 0..t),
 * the score scale (0: 1/sqrt(D)) and the layout: [..., T, D] (heads
 * outside the positions), or with heads_inner [..., T, H, D] (heads inside
 * them, as a [B, T, C] projection reshaped: no copy to split heads), or
 * packed (heads_inner too): q, k and v are one input [..., T, 3H, D] (q's
 * heads, then k's, then v's), a [B, T, 3C] projection reshaped, and the
 * backward makes one dqkv of that shape: no copies to split q, k, v or to
 * join their gradients. */
typedef struct ge2_attention_attrs {
    bool causal;
    bool heads_inner;
    bool packed;
    double scale;
    double dropout;  /* train steps zero each attention weight with this probability (ge2_attention_dropout) */
    uint32_t stream; /* the dropout's random stream (ge2_philox_step_draw): the node's id when dropout was set */
} ge2_attention_attrs;

/* DROPOUT and DROPOUT_BACKWARD: the probability p of zeroing an element
 * (kept ones scale by 1/(1-p)), and the stream, which tells this dropout's
 * draws from every other's in the step (the forward's and its backward's
 * are the same, so the backward draws the same mask again). */
typedef struct ge2_dropout_attrs {
    double p;
    uint32_t stream;
} ge2_dropout_attrs;

/* EMBEDDING_BACKWARD: the table's row count (the gradient's first dim). */
typedef struct ge2_embedding_attrs {
    int64_t rows;
} ge2_embedding_attrs;

/* LAYER_NORM: PyTorch's LayerNorm eps. */
typedef struct ge2_layer_norm_attrs {
    double eps;
} ge2_layer_norm_attrs;

typedef union ge2_attrs {
    ge2_linear_attrs linear;
    ge2_matmul_attrs matmul;
    ge2_scale_attrs scale;
    ge2_act_attrs act;
    ge2_reduce_attrs reduce;
    ge2_reshape_attrs reshape;
    ge2_expand_attrs expand;
    ge2_concat_attrs concat;
    ge2_permute_attrs permute;
    ge2_slice_attrs slice;
    ge2_loss_attrs loss;
    ge2_optim_attrs optim;
    ge2_conv2d_attrs conv2d;
    ge2_pool2d_attrs pool2d;
    ge2_batch_norm_attrs batch_norm;
    ge2_layer_norm_attrs layer_norm;
    ge2_embedding_attrs embedding;
    ge2_dropout_attrs dropout;
    ge2_attention_attrs attention;
    unsigned char bytes[GE2_OP_ATTRS_BYTES]; /* a registered op's own attrs (ge2_node_attrs) */
} ge2_attrs;

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
