/* ge2 extension API: ops and kernels from outside the library.
 *
 * An op is one definition struct (ge2_op_def): its name, arity, flags,
 * shape/dtype inference, backward rule, CPU kernel and CUDA kernel.
 * ge2_op_register adds it to the process-wide op registry and returns its id;
 * ge2's own ops register through this same call (ops/registry.c), so a
 * registered op is built into graphs, differentiated, planned, run on both
 * backends and captured exactly like a built-in one.
 *
 * What a kernel receives is a ge2_launch: views of its inputs and outputs at
 * the addresses the memory plan gave them, plus the per-program resources.
 * The CPU backend and the CUDA backend run the same plan with the same
 * offsets, so a kernel sees the same launch on both (host pointers on the CPU,
 * device pointers on CUDA).
 *
 * CUDA kernels must be capturable: the step that runs them is recorded once
 * into a CUDA Graph and replayed for every later batch. So `launch` enqueues
 * its work on launch->stream only, allocates nothing (host or device), never
 * synchronizes, and reads no host value that changes from step to step
 * (anything that does lives in the device control block, launch->control).
 * One-time work (descriptors, algorithm choice, workspace sizing) belongs in
 * `prepare`, which runs once per graph key before warm-up and capture, and
 * what it made is freed by `release`.
 */
#ifndef GE2_EXTENSION_H
#define GE2_EXTENSION_H

#include "ge2/ge2.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------- ops */

/* An op's id in the registry: ge2's own ops first, then registered ones in
 * registration order; ge2_op_find gives any op's id by its name. */
typedef int ge2_op;

/* Most ops the registry holds, ge2's own included. */
#define GE2_OP_MAX 256
#define GE2_MAX_INPUTS 8
#define GE2_MAX_OUTPUTS 3 /* attention_grad: dq, dk, dv */
/* Bytes of attributes a node of a registered op carries. */
#define GE2_OP_ATTRS_BYTES 64

/* ge2_op_def.flags */
enum {
    GE2_OPF_ELEMENTWISE = 1u << 0, /* output 0 may reuse input 0's memory when input 0 dies here */
    GE2_OPF_LIKE1 = 1u << 1,       /* input 1 is a shape-only reference: kernels never read it */
    GE2_OPF_LOSS = 1u << 2,        /* output 0 is a scalar loss */
    GE2_OPF_NO_GRAD = 1u << 3,     /* a metric: never differentiated */
    GE2_OPF_OPTIMIZER = 1u << 4,   /* works on the flat pools, runs after the backward */
    GE2_OPF_UPDATE = 1u << 5,      /* with OPTIMIZER: updates parameters (one or more nodes a step) */
    /* draws from the step's random stream (the control block's rng_offset,
     * which the optimizer's commit advances): its backward must run before
     * the last update of the step, so such graphs take the flat update. An
     * op that draws for some nodes only says so per node instead
     * (ge2_op_def.draws_random). */
    GE2_OPF_RANDOM = 1u << 6,
    /* writes its inputs in place and makes no outputs (the data-parallel
     * all-reduce). The schedule runs it as soon as its inputs are made and
     * every earlier node reading them has run, and runs every later reader
     * after it. The CUDA backend runs it on a side stream beside the step
     * (it touches nothing else), joined before anything reads what it
     * wrote. */
    GE2_OPF_IN_PLACE = 1u << 7,
    /* output 0 is input 0's bytes under another shape (a reshape): the
     * planner may give it input 0's memory while both live, and the kernel
     * then has nothing to do (it must check out == in) */
    GE2_OPF_VIEW = 1u << 8,
    /* a GEMM-class op whose inputs 0 and 1 (or those ge2_op_def.operands
     * names) are its operands: they may be bf16 tensors (read as they are,
     * the other operand rounded to bf16, fp32 sums), which is how precision
     * BF16's storage pass (docs/mixed-precision.md) hands every GEMM
     * reading a tensor one rounded copy of it */
    GE2_OPF_BF16_OPERANDS = 1u << 9,
};

/* A node of the graph (opaque here; its op's functions receive it). */
typedef struct ge2_node ge2_node;

/* What shape inference sees of a tensor. */
typedef struct ge2_desc {
    ge2_dtype dtype;
    ge2_shape shape;
    const char *name;
} ge2_desc;

/* Fills out[0..outputs) from in[0..inputs). Runs when the node is built and
 * again whenever a graph key specializes input shapes (another batch size).
 * Errors name the op, the tensors and their shapes. */
typedef ge2_status (*ge2_infer_fn)(const ge2_node *node, const ge2_desc *in, ge2_desc *out);

/* Reverse-mode differentiation of one node (autograd/autograd.h has the
 * calls a rule makes). dy[i] is the gradient of the node's output i. */
typedef struct ge2_autograd ge2_autograd;
typedef ge2_status (*ge2_backward_rule)(ge2_autograd *ag, const ge2_node *node, const int *dy);

/* ----------------------------------------------------------------- kernels */

/* A tensor at its planned address (host memory on CPU, device memory on CUDA). */
typedef struct ge2_view {
    void *data;
    ge2_dtype dtype;
    ge2_shape shape;
} ge2_view;

/* The persistent flat buffers (f32) the optimizer ops work on. Padding
 * between parameters is zero and stays zero, so a kernel may sweep all n. */
typedef struct ge2_flat_pools {
    float *params; /* [n] */
    float *grads;  /* [n] same layout as params */
    float *state;  /* [slots * n] optimizer state: SGD momentum; Adam m, v(, v_max); accumulation buffer last */
    int slots;
    int64_t n;
    /* the last no_decay_n elements take no weight decay (ge2_no_weight_decay's
     * parameters; 0, the default: every element takes it) */
    int64_t no_decay_n;
    /* [n] bf16 bits (round to nearest even) of params, which every update
     * writes as it writes params; NULL when no GEMM reads a copy (the
     * storage pass of precision BF16 makes them: GE2_ROLE_PARAMETER_COPY).
     * An op of one's own that writes params must write these too where
     * they exist, or the GEMMs read stale weights. */
    uint16_t *copies;
} ge2_flat_pools;

struct ge2_control; /* the device control block: what changes from step to step */

/* A process group for data parallelism: what the all-reduce's kernels call
 * (ge2_compile_options.collective). ge2/dist.h makes one over MPI (host
 * memory, the CPU backend) and NCCL (device memory, CUDA); a test may
 * supply its own. Every rank makes the same calls with the same sizes in
 * the same order, as each rank runs the same compiled program. */
typedef struct ge2_collective {
    int rank, world;
    void *self; /* the implementation's state */
    /* Seconds a host wait for the device (a fence, a sync, a read-back) may
     * take in a program with this group before it fails (GE2_ERR_COLLECTIVE):
     * a device collective whose peer died or hangs never finishes, and the
     * rank must not wait forever. 0: wait as long as it takes. */
    double timeout_s;
    /* Sums data[s][0, n[s]) over the ranks in place, for s < spans; blocks
     * until done, or fails (a rank gone, a timeout) with a message naming
     * the rank. */
    ge2_status (*sum_host)(const struct ge2_collective *c, float *const *data, const int64_t *n, int spans);
    /* CUDA: once per graph key before its warm-up and capture (never while
     * capturing): makes what sum_device needs on the current device. NULL:
     * nothing to make. */
    ge2_status (*prepare_device)(const struct ge2_collective *c);
    /* CUDA: enqueues the same sum of device memory on stream (a
     * cudaStream_t); capturable. NULL: the CUDA backend refuses the program. */
    ge2_status (*sum_device)(const struct ge2_collective *c, float *const *data, const int64_t *n, int spans,
                             void *stream);
    /* The halves of the sum for a sharded optimizer (ZeRO-1), host memory:
     * reduce_scatter_host leaves in data[lo, hi), this rank's shard
     * (ge2_collective_shard), the sum over the ranks that sum_host gives
     * there over the same one span [0, n), bit for bit (the rest of data
     * is undefined after it);
     * all_gather_host fills every other rank's shard of data with that
     * rank's. NULL: the group cannot shard. */
    ge2_status (*reduce_scatter_host)(const struct ge2_collective *c, float *data, int64_t n);
    ge2_status (*all_gather_host)(const struct ge2_collective *c, float *data, int64_t n);
} ge2_collective;

/* Rank `rank`'s shard [*lo, *hi) of n values among `world` ranks: equal
 * contiguous parts of ceil(n / world), the last ones shorter or empty. */
static inline void ge2_collective_shard(int64_t n, int rank, int world, int64_t *lo, int64_t *hi)
{
    const int64_t part = world > 1 ? (n + world - 1) / world : n;
    *lo = (int64_t)rank * part < n ? (int64_t)rank * part : n;
    *hi = *lo + part < n ? *lo + part : n;
}

/* The compile options a kernel's choice depends on (ge2_compile_options). */
typedef struct ge2_kernel_settings {
    bool autotune;      /* time the applicable candidates once per problem shape */
    bool autotune_log;  /* print each GEMM candidate's time as it is tuned */
    ge2_gemm_kernels gemm_kernels;
    const char *kernel_cache; /* file of tuned choices; NULL: memory only */
    bool pdl;           /* programmatic dependent launch where a kernel supports it */
    bool profile;       /* fused kernels stamp their phases */
    bool time_epilogues; /* fused GEMM epilogue or plain GEMM + ge2 kernel, by time (autotune) */
    bool kernel_candidates; /* ops' registered candidates timed against their own kernels (autotune) */
} ge2_kernel_settings;

/* The settings of ge2_compile_defaults(), as an initializer: what a launch
 * made without a program (tests, the naive executor) chooses kernels by. */
#define GE2_KERNEL_SETTINGS_DEFAULTS                                                                              \
    {.autotune = true,                                                                                          \
     .gemm_kernels = GE2_GEMM_KERNELS_ANY,                                                                      \
     .pdl = true,                                                                                               \
     .time_epilogues = true,                                                                                    \
     .kernel_candidates = true}

typedef struct ge2_launch {
    const ge2_node *node; /* op and attrs */
    int n_in, n_out;
    ge2_view in[GE2_MAX_INPUTS];
    ge2_view out[GE2_MAX_OUTPUTS]; /* out[i].data == NULL: not needed by this key, don't write it */
    struct ge2_control *control;   /* device pointer on CUDA */
    ge2_flat_pools pools;          /* optimizer ops */
    void *workspace;               /* CUDA: cuBLASLt workspace, allocated before capture */
    size_t workspace_bytes;
    /* CUDA: device memory a kernel uses while it runs (its operands'
     * 16-bit copies under precision BF16 or FP16, cuDNN's workspace): at
     * least what its ge2_cuda_kernel.bf16_scratch_bytes asked, room in the
     * key's arena that other launches use before and after, so valid from
     * the launch's start to its end only. NULL when none was asked. */
    void *scratch;
    size_t scratch_bytes;
    void *stream;       /* CUDA: cudaStream_t the step runs on */
    void *blas;         /* CUDA: cublasLtHandle_t */
    bool tf32;          /* CUDA: allow TF32 GEMMs */
    /* GEMM-class ops: round their operands to bf16 before multiplying,
     * accumulate in fp32 (ge2_compile_options.precision BF16). An operand
     * that is a bf16 tensor already (GE2_OPF_BF16_OPERANDS) is read as it
     * is; ge2_launch_half_gemm says whether a launch multiplies 16-bit
     * operands (bf16 or, with f16_operands, fp16). */
    bool bf16_operands;
    /* The same in fp16 (ge2_compile_options.precision FP16): operands
     * rounded to IEEE half, fp32 sums; convolutions round their results
     * to fp16. Never set together with bf16_operands. */
    bool f16_operands;
    const ge2_kernel_settings *settings; /* never NULL when a backend runs the launch */
    /* A train step (false: eval). Ops whose forward differs by mode read
     * it (batch norm: batch statistics and running-statistics updates in
     * training, running statistics in eval); each mode is its own graph key. */
    bool training;
    /* The program's process group (ge2_compile_options.collective); NULL
     * when this process trains alone */
    const ge2_collective *collective;
    void *backend_data; /* per-launch state made by prepare (descriptors, chosen algorithm) */
    /* CUDA: the fused kernel that does this launch's work with others',
     * described; NULL when the launch runs its own kernel */
    const char *fused_into;
    /* CUDA: the kernel the backend runs the launch with: the op's own, or
     * the registered candidate that won (ge2_kernel_candidate_register),
     * and why, for the kernel report */
    const struct ge2_cuda_kernel *kernel;
    char kernel_choice[128];
} ge2_launch;

/* Bytes a bf16 copy of n elements takes in ge2_launch.scratch, rounded up
 * so the next copy starts 256-byte aligned. */
static inline size_t ge2_bf16_copy_bytes(int64_t n) { return ((size_t)n * 2 + 255) / 256 * 256; }

/* Whether a GEMM-class launch whose operands are inputs 0 and 1 (the
 * linear family's) multiplies 16-bit operands: under precision BF16 or
 * FP16, or when one of them is a bf16 tensor. Kernels that compute in fp32
 * only (ge2's tiled GEMM, the fused groups) decline such a launch. */
static inline bool ge2_launch_half_gemm(const ge2_launch *l)
{
    return l->bf16_operands || l->f16_operands ||
           (l->n_in > 1 && (l->in[0].dtype == GE2_BF16 || l->in[1].dtype == GE2_BF16));
}

struct ge2_cuda_kernel;

/* A CPU kernel: computes the node's outputs from its inputs. */
typedef ge2_status (*ge2_cpu_kernel_fn)(const ge2_launch *launch);

/* A CUDA kernel. prepare runs once per graph key before warm-up and capture
 * (never during capture); launch enqueues on launch->stream and must be
 * capturable (see the top of this file); release frees what prepare made.
 * prepare, release and describe may be NULL. */
typedef struct ge2_cuda_kernel {
    ge2_status (*prepare)(ge2_launch *launch);
    ge2_status (*launch)(const ge2_launch *launch);
    void (*release)(ge2_launch *launch);
    const char *(*describe)(const ge2_launch *launch); /* which kernel/algorithm this node got */
    /* The bytes of ge2_launch.scratch the launch needs, 0 for none: its
     * operands' 16-bit copies under precision BF16 or FP16 (bf16_operands,
     * f16_operands), say. Asked for every launch of the op (a candidate's
     * before its applies) while the key is planned, before its arena
     * exists, so the launch's views point at a provisional base
     * (capture/backend.h); the planner places the most any of the op's
     * kernels asks in the arena, live at the launch. NULL: none. */
    size_t (*bf16_scratch_bytes)(const ge2_launch *launch);
} ge2_cuda_kernel;

/* ------------------------------------------------------ kernel candidates */

/* Another CUDA kernel for an op (ge2's own or registered): for every launch
 * of the op it applies to, the backend times it against the op's own
 * kernel and the other applicable candidates once per problem shape (when
 * the compile option autotune is on), remembers the choice in the kernel
 * cache file (next to the GEMM choices), and runs the fastest;
 * ge2_program_kernel_report names the winner. A candidate that does not
 * apply, or fails to prepare or to run while timed, is left out with its
 * reason, and the op's own kernel remains. */
typedef struct ge2_kernel_candidate {
    const char *name; /* unique per op; in the kernel report and the cache */
    /* Whether it takes this launch (shapes, dtypes, alignment, precision);
     * when not, why filled. NULL: every launch. Called after the op's own
     * kernel prepared the launch, so it may read what that prepare chose
     * (launch->backend_data). A candidate must compute what the op's own
     * kernel computes to the same precision: timing picks between them,
     * never the numerics. */
    bool (*applies)(const ge2_launch *launch, char *why, size_t why_size);
    ge2_cuda_kernel cuda; /* as an op's: capturable */
} ge2_kernel_candidate;

/* Adds candidate for op; the struct must outlive every program. At most
 * GE2_OP_MAX_CANDIDATES per op. */
#define GE2_OP_MAX_CANDIDATES 8
ge2_status ge2_kernel_candidate_register(ge2_op op, const ge2_kernel_candidate *candidate);

/* ---------------------------------------------------------- op definitions */

typedef struct ge2_op_def {
    const char *name; /* unique; messages say "ge2_<name>" */
    int min_inputs, max_inputs, max_outputs;
    unsigned flags;              /* GE2_OPF_* */
    ge2_infer_fn infer;          /* required */
    ge2_backward_rule backward;  /* NULL: not differentiable (metrics, ops only a backward emits) */
    ge2_cpu_kernel_fn cpu;       /* required: the CPU backend runs every op */
    ge2_cuda_kernel cuda;        /* cuda.launch NULL: the CUDA backend refuses the op */
    /* Whether this node's output `output`, inferred f32, may be stored as
     * a bf16 tensor: its CUDA kernel then computes it in f32 and rounds at
     * the store (the CPU kernel writes f32 into a copy the backend rounds,
     * ge2_op_run_cpu). Precision BF16's storage pass stores an output so
     * when every reader reads it as bf16 (ge2_op_reads_bf16, through
     * reshapes). NULL: never. */
    bool (*stores_bf16)(const ge2_node *node, int output);
    /* Whether this node's input `input`, built f32, may be a bf16 tensor
     * (the storage pass's): its CUDA kernel reads bf16 there, the CPU's
     * reads a widened f32 copy (ge2_op_run_cpu), and inference sees f32.
     * A GEMM's operands (GE2_OPF_BF16_OPERANDS) always may. NULL: no other. */
    bool (*reads_bf16)(const ge2_node *node, int input);
    /* GE2_OPF_BF16_OPERANDS: the inputs that are the GEMM's operands, a bit
     * each (1u << input); 0 means inputs 0 and 1. A convolution's backward
     * ops multiply inputs 0 and 2 (input 1 is a shape). */
    unsigned operands;
    /* Whether this node draws from the step's random stream, as
     * GE2_OPF_RANDOM says of every node of an op (attention: where its
     * dropout is on). NULL: the flag says. */
    bool (*draws_random)(const ge2_node *node);
    /* Which input's memory an output (over_output, 0 unless set) may take
     * over where this node is that input's last reader (the planner then
     * places the output there, as it does an elementwise op's over input
     * 0): every kernel of the op reads each element of that input before it
     * writes the output's element over it, and the two are the same size.
     * -1: none. NULL: input 0 for GE2_OPF_ELEMENTWISE ops, else none. */
    int (*output_over_input)(const ge2_graph *graph, const ge2_node *node);
    /* The inputs (a bit each) this node reads in bf16 exactly where every
     * one of its outputs is stored in bf16: a bias a GEMM's epilogue adds
     * in the type the GEMM writes (LINEAR's). The storage pass decides the
     * outputs first, then gives such an input a bf16 copy; its producer
     * never stores it in bf16 for this reader. reads_bf16 must allow it. */
    unsigned bf16_with_outputs;
    /* The output that takes over output_over_input's input (0 unless set):
     * cross-entropy writes its logits' gradient, output 1, over the logits,
     * as a fused classifier does, where nothing reads them after it. */
    int over_output;
} ge2_op_def;

/* Adds def to the registry; its id in *op. The struct (and the strings it
 * points to) must outlive every graph that uses the op. Fails on a missing
 * name, infer or CPU kernel, an arity out of range, a name already taken,
 * or a full registry. */
ge2_status ge2_op_register(const ge2_op_def *def, ge2_op *op);
/* The id of the registered op called name. */
ge2_status ge2_op_find(const char *name, ge2_op *op);

/* Records "fmt ..." as the message ge2_last_error() returns and returns
 * status: how an op's inference or kernel reports a user's mistake (name
 * the op, the tensors and their shapes). */
ge2_status ge2_error(ge2_status status, const char *fmt, ...);

/* ------------------------------------------------------- building a node */

/* Appends a forward node of op over inputs[0, n_inputs) with a copy of
 * attrs (attrs_bytes <= GE2_OP_ATTRS_BYTES; NULL and 0 for none); its
 * inference runs now, and its n_outputs outputs come back in outputs[]. A
 * public builder for a registered op is this call with the op's attrs. */
ge2_status ge2_apply(ge2_graph *graph, ge2_op op, ge2_tensor *const *inputs, int n_inputs, const void *attrs,
                     size_t attrs_bytes, int n_outputs, ge2_tensor **outputs);

/* -------------------------------------- what an op's functions read of a node */

int ge2_node_id(const ge2_node *node);
ge2_op ge2_node_op(const ge2_node *node);
int ge2_node_input_count(const ge2_node *node);
int ge2_node_output_count(const ge2_node *node);
/* Tensor ids (what backward rules pass around). */
int ge2_node_input(const ge2_node *node, int i);
int ge2_node_output(const ge2_node *node, int i);
/* The GE2_OP_ATTRS_BYTES its builder gave (zeros past them). */
const void *ge2_node_attrs(const ge2_node *node);
/* The op's registered name, for messages ("ge2_<name>: ..."). */
const char *ge2_node_op_name(const ge2_node *node);

/* ------------------------------------------------------- backward rules */

/* dy[i] a rule receives, besides a tensor id: */
#define GE2_GRAD_NONE (-1) /* no gradient flows into this output */
/* the loss itself: d loss / d loss, 1 times the loss scale under dynamic
 * loss scaling (ge2_loss_scaling). A rule must not treat it as 1: take
 * ge2_ag_dy_tensor, which makes it the LOSS_SCALE op's output. */
#define GE2_GRAD_SEED (-2)

/* Whether tensor wants a gradient (a rule skips the work otherwise). */
bool ge2_ag_wants(const ge2_autograd *ag, int tensor);
/* dy as a tensor id: the seed becomes a scalar the LOSS_SCALE op writes
 * each step (the control block's loss_scale: 1 without loss scaling). */
ge2_status ge2_ag_dy_tensor(ge2_autograd *ag, int dy, int *out);
/* Appends a backward node of op (any registered op: ge2's own through
 * ge2_op_find, or the user's backward op) over tensor ids; its outputs'
 * ids in outputs[0, n_outputs). attrs as for ge2_apply. */
ge2_status ge2_ag_emit_op(ge2_autograd *ag, ge2_op op, const int *inputs, int n_inputs, const void *attrs,
                          size_t attrs_bytes, int n_outputs, int *outputs);
/* Adds grad to tensor's gradient (summed when several rules contribute). */
ge2_status ge2_ag_accumulate(ge2_autograd *ag, int tensor, int grad);

/* --------------------------------------------------------- check helpers */

/* What a check found. Both helpers return GE2_OK when the check ran (its
 * verdict in ok) and an error status when it could not run. */
typedef struct ge2_check_result {
    bool ok;
    /* largest |got - want| - (atol + rtol |want|) over all elements: <= 0
     * passes; NaN once any element is NaN */
    double worst_error;
    /* at that element: |got - want| and its bound atol + rtol |want|, the
     * two figures to print ("worst difference 3.1e-09, bound 1.0e-06") */
    double worst_difference, worst_bound;
    char message[512]; /* the first element out of tolerance, or why the check failed */
} ge2_check_result;

/* Gradients against float64 central differences on the CPU: after
 * ge2_backward(graph, loss) on a graph of f64 tensors, each wrt tensor
 * (a parameter, or an input given ge2_require_grad) gets its gradient from
 * the backward and, element by element, (L(x + h) - L(x - h)) / 2h with
 * h = 1e-5; they must agree within atol + rtol |numeric|. Parameters take
 * their initializers' values; feeds give the inputs and labels. */
ge2_status ge2_check_gradients(const ge2_graph *graph, const ge2_tensor *loss, const ge2_feed *feeds, int n_feeds,
                               ge2_tensor *const *wrt, int n_wrt, double atol, double rtol, ge2_check_result *out);

/* One step of mode on the CPU backend and on the CUDA backend, same
 * parameters and feeds: each of outputs (tensors marked with
 * ge2_mark_output, f32) must agree within atol + rtol |cpu|. The graph
 * must have no optimizer when mode is GE2_MODE_TRAIN (a step would update
 * the parameters differently on the two sides). GE2_ERR_NO_DEVICE without
 * a GPU. */
ge2_status ge2_check_agreement(ge2_graph *graph, ge2_mode mode, const ge2_feed *feeds, int n_feeds,
                               ge2_tensor *const *outputs, int n_outputs, double atol, double rtol,
                               ge2_check_result *out);

#ifdef __cplusplus
}
#endif

#endif /* GE2_EXTENSION_H */
