/* ge2 — graph executor v2: the public C API.
 *
 * Build a static graph, ask for its backward and optimizer, compile it once,
 * then train by calling ge2_program_step() per batch. On CUDA each step is one
 * replay of a captured CUDA Graph.
 *
 * Conventions: every function that can fail returns ge2_status; on failure
 * ge2_last_error() names the op, the tensor(s) and their shapes. Output
 * handles are returned through the last argument(s). A user mistake never
 * aborts the process. Handles are opaque; _new/_free pairs own them.
 */
#ifndef GE2_GE2_H
#define GE2_GE2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ status */

typedef enum ge2_status {
    GE2_OK = 0,
    GE2_ERR_INVALID_ARGUMENT, /* null handle, bad attribute or flag value */
    GE2_ERR_SHAPE,            /* shapes do not fit the op */
    GE2_ERR_DTYPE,            /* dtype mismatch, or a dtype the op lacks */
    GE2_ERR_GRAPH,            /* foreign tensor, cycle, non-scalar loss, ... */
    GE2_ERR_UNSUPPORTED,      /* valid request the backend cannot run */
    GE2_ERR_OUT_OF_MEMORY,
    GE2_ERR_IO,               /* a file could not be opened, read or written */
    GE2_ERR_FORMAT,           /* a file's contents are malformed */
    GE2_ERR_NO_DEVICE,        /* CUDA requested, none present */
    GE2_ERR_CUDA,             /* CUDA runtime or cuBLASLt failure */
    GE2_ERR_STATE,            /* call not valid now (e.g. graph already has a backward) */
    GE2_ERR_COLLECTIVE,       /* data parallel: a collective failed or timed out (another rank failed?) */
    GE2_STATUS_COUNT
} ge2_status;

const char *ge2_status_name(ge2_status status);
/* Message of the last failing call on this thread ("" if none). */
const char *ge2_last_error(void);

/* ------------------------------------------------------------------ dtypes */

typedef enum ge2_dtype {
    GE2_F32,
    GE2_F64, /* CPU only: gradient checks */
    GE2_BF16,
    GE2_F16,
    GE2_I32,
    GE2_U8,
    GE2_I64, /* counters in persistent buffers (batch norm's num_batches_tracked) */
    GE2_DTYPE_COUNT
} ge2_dtype;

size_t ge2_dtype_size(ge2_dtype dtype);
const char *ge2_dtype_name(ge2_dtype dtype);

/* ------------------------------------------------------------------ shapes */

#define GE2_MAX_DIMS 4

/* ndim 0 is a scalar (one element). */
typedef struct ge2_shape {
    int ndim;
    int64_t dim[GE2_MAX_DIMS];
} ge2_shape;

static inline ge2_shape ge2_shape0(void) { ge2_shape s = {0, {0, 0, 0, 0}}; return s; }
static inline ge2_shape ge2_shape1(int64_t a) { ge2_shape s = {1, {a, 0, 0, 0}}; return s; }
static inline ge2_shape ge2_shape2(int64_t a, int64_t b) { ge2_shape s = {2, {a, b, 0, 0}}; return s; }
static inline ge2_shape ge2_shape3(int64_t a, int64_t b, int64_t c) { ge2_shape s = {3, {a, b, c, 0}}; return s; }
static inline ge2_shape ge2_shape4(int64_t a, int64_t b, int64_t c, int64_t d) { ge2_shape s = {4, {a, b, c, d}}; return s; }

int64_t ge2_shape_numel(ge2_shape shape);
/* Writes e.g. "[64,784]" into buf (always NUL-terminated); returns buf. */
char *ge2_shape_str(ge2_shape shape, char *buf, size_t size);

/* ----------------------------------------------------------------- devices */

typedef enum ge2_device {
    GE2_DEVICE_CPU,
    GE2_DEVICE_CUDA,
    GE2_DEVICE_AUTO, /* CUDA when a GPU is present, else CPU */
    GE2_DEVICE_COUNT
} ge2_device;

const char *ge2_device_name(ge2_device device); /* "cpu", "cuda", "auto" */
/* The device a name says (the trainers' --device); an unknown name is an error. */
ge2_status ge2_device_parse(const char *name, ge2_device *out);
/* True when a CUDA device can be used by this process. */
bool ge2_cuda_available(void);
/* Makes GPU index % (the GPUs' count) this thread's current device, the one
 * contexts made after it run on (data parallel: one GPU per rank). */
ge2_status ge2_cuda_use_device(int index);

typedef struct ge2_context ge2_context;

ge2_status ge2_context_new(ge2_device device, ge2_context **out);
void ge2_context_free(ge2_context *ctx);
/* The resolved device: CPU or CUDA, never AUTO. */
ge2_device ge2_context_device(const ge2_context *ctx);

/* ------------------------------------------------------------------ graph */

typedef struct ge2_graph ge2_graph;
typedef struct ge2_tensor ge2_tensor;

typedef enum ge2_role {
    GE2_ROLE_INPUT,      /* fed per step */
    GE2_ROLE_LABEL,      /* fed per step, never differentiated */
    GE2_ROLE_PARAMETER,  /* trained; lives in the parameter pool */
    GE2_ROLE_CONSTANT,   /* fixed data given at build time */
    GE2_ROLE_ACTIVATION, /* produced by an op (gradients too) */
    /* persistent state that is not trained (batch norm's running
     * statistics): lives in the buffer pool, shared by every graph key,
     * written by the train step on the device, saved in checkpoints */
    GE2_ROLE_BUFFER,
    /* the bf16 copy of a parameter GEMMs read under precision BF16 (the
     * storage pass makes it; ge2_tensor.copy_of names the parameter): lives
     * in the parameter-copy pool, written by the optimizer as it updates the
     * parameter and by every host write of the parameters */
    GE2_ROLE_PARAMETER_COPY,
    GE2_ROLE_COUNT
} ge2_role;

const char *ge2_role_name(ge2_role role);

ge2_status ge2_graph_new(ge2_graph **out);
void ge2_graph_free(ge2_graph *graph);
/* Seed of the counter-based RNG used by initializers (default 0). */
ge2_status ge2_graph_set_seed(ge2_graph *graph, uint64_t seed);

ge2_status ge2_input(ge2_graph *graph, const char *name, ge2_dtype dtype, ge2_shape shape, ge2_tensor **out);
ge2_status ge2_label(ge2_graph *graph, const char *name, ge2_dtype dtype, ge2_shape shape, ge2_tensor **out);
/* Copies numel(shape) elements from data. */
ge2_status ge2_constant(ge2_graph *graph, const char *name, ge2_dtype dtype, ge2_shape shape, const void *data,
                        ge2_tensor **out);

typedef enum ge2_init_kind {
    GE2_INIT_ZEROS,
    GE2_INIT_CONSTANT,       /* a */
    GE2_INIT_UNIFORM,        /* U[a, b) */
    GE2_INIT_NORMAL,         /* N(mean a, std b) */
    GE2_INIT_LINEAR_DEFAULT, /* PyTorch nn.Linear: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) */
    GE2_INIT_COUNT
} ge2_init_kind;

typedef struct ge2_init {
    ge2_init_kind kind;
    double a, b;
    /* LINEAR_DEFAULT: fan_in; 0 = the last dim of a 2-D weight [out, in]. A bias [out] must give it. */
    int64_t fan_in;
} ge2_init;

/* Values are a pure function of (graph seed, parameter name, element index). */
ge2_status ge2_parameter(ge2_graph *graph, const char *name, ge2_dtype dtype, ge2_shape shape, ge2_init init,
                         ge2_tensor **out);

/* The optimizer's weight decay leaves this parameter be (a parameter
 * group of its own: nanoGPT's biases and norm gains). Call before
 * ge2_compile: the parameter pool puts decayed parameters first. */
ge2_status ge2_no_weight_decay(ge2_graph *graph, ge2_tensor *param);

/* Marks the rows of a parameter from real_rows on as padding: a vocabulary
 * rounded up to a multiple of 128 for the GEMMs, as llm.c pads GPT-2's 50257
 * to 50304. They start at zero and a checkpoint holds the first real_rows
 * only (in the file the parameter and its optimizer state are [real_rows,
 * ...]; a load zeroes the rest). The model keeps them out of its results
 * (an embedding never indexes them, a loss leaves their logits out:
 * ge2_cross_entropy_padded), so no
 * gradient reaches them and they stay zero. Call before ge2_compile. */
ge2_status ge2_parameter_padding(ge2_graph *graph, ge2_tensor *param, int64_t real_rows);

/* A persistent buffer (GE2_ROLE_BUFFER): f32 (f64 on the CPU) or i64, its
 * first values from init (as a parameter's), then whatever the ops that own
 * it write in train steps (batch norm's running statistics). */
ge2_status ge2_buffer(ge2_graph *graph, const char *name, ge2_dtype dtype, ge2_shape shape, ge2_init init,
                      ge2_tensor **out);

ge2_shape ge2_tensor_shape(const ge2_tensor *t);
ge2_dtype ge2_tensor_dtype(const ge2_tensor *t);
const char *ge2_tensor_name(const ge2_tensor *t);
ge2_role ge2_tensor_role(const ge2_tensor *t);
/* Looks a tensor up by name; NULL if absent. */
ge2_tensor *ge2_graph_find(const ge2_graph *graph, const char *name);

/* Marks a tensor as a program output (loss, metric): it lives to the end of
 * the step and can be read back. ge2_backward marks its loss. */
ge2_status ge2_mark_output(ge2_graph *graph, ge2_tensor *t);

/* -------------------------------------------------------------------- ops */

typedef enum ge2_activation {
    GE2_ACT_NONE,
    GE2_ACT_RELU,
    GE2_ACT_LEAKY_RELU, /* slope */
    GE2_ACT_GELU_TANH,
    GE2_ACT_GELU_ERF,
    GE2_ACT_SIGMOID,
    GE2_ACT_TANH,
    GE2_ACT_SILU,
    GE2_ACT_COUNT
} ge2_activation;

const char *ge2_activation_name(ge2_activation act);
/* Parses "relu", "gelu" (= gelu_tanh), "gelu_erf", ...; GE2_ERR_INVALID_ARGUMENT otherwise. */
ge2_status ge2_activation_parse(const char *name, ge2_activation *out);

/* y = act(x · wᵀ + b). x [B, in], w [out, in] (PyTorch layout), b [out] or NULL. */
ge2_status ge2_linear(ge2_graph *graph, ge2_tensor *x, ge2_tensor *w, ge2_tensor *b, ge2_activation act,
                      float slope, ge2_tensor **y);
/* 2-D [M,K]·[K,N] or batched 3-D [N,M,K]·[N,K,N2], with optional transposes of the last two dims. */
ge2_status ge2_matmul(ge2_graph *graph, ge2_tensor *a, ge2_tensor *b, bool trans_a, bool trans_b, ge2_tensor **y);
/* Elementwise with broadcasting (right-aligned; each dim equal or 1). */
ge2_status ge2_add(ge2_graph *graph, ge2_tensor *a, ge2_tensor *b, ge2_tensor **y);
ge2_status ge2_sub(ge2_graph *graph, ge2_tensor *a, ge2_tensor *b, ge2_tensor **y);
ge2_status ge2_mul(ge2_graph *graph, ge2_tensor *a, ge2_tensor *b, ge2_tensor **y);
ge2_status ge2_scale(ge2_graph *graph, ge2_tensor *x, double alpha, ge2_tensor **y);
ge2_status ge2_activate(ge2_graph *graph, ge2_tensor *x, ge2_activation act, float slope, ge2_tensor **y);
/* Over the last axis. */
ge2_status ge2_softmax(ge2_graph *graph, ge2_tensor *x, ge2_tensor **y);
ge2_status ge2_log_softmax(ge2_graph *graph, ge2_tensor *x, ge2_tensor **y);
/* Reductions: over all elements (scalar result) or one axis (negative counts from the end; dropped). */
ge2_status ge2_sum_all(ge2_graph *graph, ge2_tensor *x, ge2_tensor **y);
ge2_status ge2_mean_all(ge2_graph *graph, ge2_tensor *x, ge2_tensor **y);
ge2_status ge2_sum(ge2_graph *graph, ge2_tensor *x, int axis, ge2_tensor **y);
ge2_status ge2_mean(ge2_graph *graph, ge2_tensor *x, int axis, ge2_tensor **y);
/* One dim of shape may be -1 (inferred), so the graph re-specializes for other batch sizes. */
ge2_status ge2_reshape(ge2_graph *graph, ge2_tensor *x, ge2_shape shape, ge2_tensor **y);
ge2_status ge2_transpose(ge2_graph *graph, ge2_tensor *x, ge2_tensor **y); /* 2-D */
/* y's dim i is x's dim perm[i], as PyTorch's x.permute(perm) made
 * contiguous (a copy): perm holds each of 0..n-1 once, n = x's ndim. Split
 * heads: [B, T, C] -> reshape [B, T, H, D] -> permute {0, 2, 1, 3}. */
ge2_status ge2_permute(ge2_graph *graph, ge2_tensor *x, const int *perm, int n, ge2_tensor **y);
ge2_status ge2_concat(ge2_graph *graph, ge2_tensor *const *xs, int n, int axis, ge2_tensor **y);
ge2_status ge2_slice(ge2_graph *graph, ge2_tensor *x, int axis, int64_t start, int64_t end, ge2_tensor **y);

/* Mean cross-entropy of logits [B, C] f32 against labels [B] i32; scalar.
 *
 * Labels (and ge2_embedding's ids) are untrusted per-step values: one
 * outside [0, C) is never used as an index. On the CPU the step fails at
 * once, GE2_ERR_INVALID_ARGUMENT with "ge2_cross_entropy (node 7):
 * labels[37] is 12, outside [0, 10)". On CUDA a kernel cannot fail: it
 * reads such a row as no class (zero loss, zero gradient), counts it in the
 * control block, and the count comes back with the step's results, without
 * a sync; when the host next folds that step (ge2_program_take_metrics, or
 * a step reusing its staging slot, two steps later) the call fails with the
 * same message. ge2_accuracy checks its labels alike. */
ge2_status ge2_cross_entropy(ge2_graph *graph, ge2_tensor *logits, ge2_tensor *labels, float label_smoothing,
                             ge2_tensor **loss);
/* ge2_cross_entropy over the first `classes` columns of logits [B, C]
 * (classes <= C; 0 or C: every column, ge2_cross_entropy itself): the
 * columns past them are padding, as a tied head over an
 * embedding with ge2_parameter_padding gives (llm.c's 50,304 columns for
 * GPT-2's 50,257 tokens). They are left out of the softmax, their gradient
 * is zero, and a label must be below `classes`. Costs nothing over
 * ge2_cross_entropy, where slicing the logits first would copy them. */
ge2_status ge2_cross_entropy_padded(ge2_graph *graph, ge2_tensor *logits, ge2_tensor *labels, float label_smoothing,
                                    int64_t classes, ge2_tensor **loss);
/* Mean of (pred - target)^2; scalar. */
ge2_status ge2_mse_loss(ge2_graph *graph, ge2_tensor *pred, ge2_tensor *target, ge2_tensor **loss);
/* Number of rows whose argmax equals the label (f32 scalar; a metric, not differentiable). */
ge2_status ge2_accuracy(ge2_graph *graph, ge2_tensor *logits, ge2_tensor *labels, ge2_tensor **correct);

/* ------------------------------------------------------ convolutional ops */

/* PyTorch's Conv2d arguments, per axis (h, w). */
typedef struct ge2_conv2d_params {
    int stride[2], padding[2], dilation[2];
    int groups;
} ge2_conv2d_params;

/* stride 1, padding 0, dilation 1, groups 1 */
ge2_conv2d_params ge2_conv2d_defaults(void);
/* y = conv2d(x, w) + b, as PyTorch's Conv2d. x [N, C, H, W], w [O, C/groups,
 * kh, kw] (PyTorch's layout), b [O] or NULL; y [N, O, OH, OW] with
 * OH = (H + 2·padding - dilation·(kh - 1) - 1) / stride + 1. params NULL:
 * the defaults. */
ge2_status ge2_conv2d(ge2_graph *graph, ge2_tensor *x, ge2_tensor *w, ge2_tensor *b, const ge2_conv2d_params *params,
                      ge2_tensor **y);

/* PyTorch's MaxPool2d / AvgPool2d arguments, per axis (h, w); floor mode,
 * padding at most half the kernel. */
typedef struct ge2_pool2d_params {
    int kernel[2], stride[2], padding[2];
} ge2_pool2d_params;

/* A square window: kernel, stride (0: the kernel, PyTorch's default) and padding on both axes. */
ge2_pool2d_params ge2_pool2d_square(int kernel, int stride, int padding);
/* x [N, C, H, W] -> [N, C, OH, OW]. Max pooling's gradient goes to each
 * window's first maximum (PyTorch's rule on ties); average pooling divides
 * by the whole window, padding included (count_include_pad). */
ge2_status ge2_max_pool2d(ge2_graph *graph, ge2_tensor *x, const ge2_pool2d_params *params, ge2_tensor **y);
ge2_status ge2_avg_pool2d(ge2_graph *graph, ge2_tensor *x, const ge2_pool2d_params *params, ge2_tensor **y);
/* x [N, C, H, W] -> [N, C]: the mean over H and W (AdaptiveAvgPool2d(1), then flatten). */
ge2_status ge2_global_avg_pool2d(ge2_graph *graph, ge2_tensor *x, ge2_tensor **y);
/* x [N, d1, ...] -> [N, d1·...], as x.flatten(1) (NCHW order, so a linear layer after it takes PyTorch's weights). */
ge2_status ge2_flatten(ge2_graph *graph, ge2_tensor *x, ge2_tensor **y);

/* Batch normalization over dim 1 of x [N, C], [N, C, L] or [N, C, H, W], as
 * PyTorch's BatchNorm1d/2d with affine weight [C] and bias [C]. A train step
 * normalizes by the batch's mean and biased variance and moves the
 * persistent buffers running_mean and running_var [C] (ge2_buffer) by
 * momentum towards the batch's mean and unbiased variance;
 * num_batches_tracked (an i64 scalar buffer, or NULL) counts the train
 * steps. An eval step normalizes by the running statistics. */
ge2_status ge2_batch_norm(ge2_graph *graph, ge2_tensor *x, ge2_tensor *weight, ge2_tensor *bias,
                          ge2_tensor *running_mean, ge2_tensor *running_var, ge2_tensor *num_batches_tracked,
                          double momentum, double eps, ge2_tensor **y);
/* The same with its tensors made under PyTorch's names and first values:
 * "<prefix>.weight" (ones) and ".bias" (zeros), parameters; buffers
 * ".running_mean" (zeros), ".running_var" (ones) and ".num_batches_tracked"
 * (i64 0). PyTorch's defaults are momentum 0.1, eps 1e-5. */
ge2_status ge2_batch_norm_layer(ge2_graph *graph, const char *prefix, ge2_tensor *x, double momentum, double eps,
                                ge2_tensor **y);

/* Scaled dot-product attention over q, k, v [..., T, D] (leading dims are
 * batch and heads, e.g. [B, H, T, D]): y = softmax(q·kᵀ / sqrt(D)) · v, with
 * query t seeing keys 0..t when causal. The T x T scores are never stored:
 * the forward keeps each query's log-sum-exp and the backward recomputes
 * the scores from it (flash attention's scheme); the backward's sums run in
 * a fixed order, the same bits every run. */
ge2_status ge2_attention(ge2_graph *graph, ge2_tensor *q, ge2_tensor *k, ge2_tensor *v, bool causal, ge2_tensor **y);
/* The same over q, k, v [..., T, H, D] (e.g. [B, T, H, D]), y likewise: the
 * heads inside the positions, as a [B·T, C] projection reshaped, so
 * splitting and merging heads are reshapes (views, no copies) instead of
 * permutes. */
ge2_status ge2_attention_bthd(ge2_graph *graph, ge2_tensor *q, ge2_tensor *k, ge2_tensor *v, bool causal,
                              ge2_tensor **y);
/* The same with q, k and v packed in one tensor qkv [..., T, 3H, D], q's H
 * heads then k's then v's (e.g. a [B·T, 3C] projection reshaped to
 * [B, T, 3H, D]), y [..., T, H, D]:
 * no copies to split q, k, v, and the backward writes one gradient of
 * qkv's shape, so none to join theirs either. */
ge2_status ge2_attention_qkv(ge2_graph *graph, ge2_tensor *qkv, bool causal, ge2_tensor **y);

/* One decoding step of causal self-attention with a key-value cache (text
 * generation, one token per step): qkv [B, 3C] is each sequence's newest
 * token through the c_attn projection (q's heads, then k's, then v's, as
 * ge2_attention_qkv reads them), k_cache and v_cache [B, T, C] are
 * persistent buffers (ge2_buffer) of the tokens before it, positions [B]
 * i32 its place in each sequence. The step writes the token's k and v into
 * row positions[b] of the caches, then attends its q over rows [0,
 * positions[b]], scaled by 1/sqrt(C / n_head): y [B, C] (the heads inside
 * the channels). Inference only: no gradient flows through it. A position
 * outside [0, T) is an untrusted value, as ge2_embedding's ids are. */
ge2_status ge2_attention_cached(ge2_graph *graph, ge2_tensor *qkv, ge2_tensor *k_cache, ge2_tensor *v_cache,
                                ge2_tensor *positions, int n_head, ge2_tensor **y);

/* Dropout on the attention weights of the attention that made y (any of
 * the three above), as PyTorch's scaled_dot_product_attention(dropout_p=p):
 * in a train step each weight softmax(...)_tj is zeroed with probability
 * p and the rest scale by 1/(1 - p); eval steps use every weight. The
 * masks are drawn again in the backward, never stored. The CPU and ge2's
 * CUDA kernels draw the same masks (Philox, as ge2_dropout; p applied in
 * steps of 1/65536); under precision BF16, cuDNN's attention draws its own
 * from the same seed and step offset. Call it before ge2_backward. */
ge2_status ge2_attention_dropout(ge2_graph *graph, ge2_tensor *y, double p);

/* Dropout: in a train step each element of x is zeroed with probability p
 * (in [0, 1)) and the rest scale by 1/(1 - p); an eval step passes x
 * through. The draws are Philox counters of the graph's seed, the step's
 * random offset (the control block's, which every train step's optimizer
 * commit advances on the device, so each replay draws a fresh mask) and
 * this dropout's stream: the same seed gives the same masks on the CPU and
 * on CUDA. The backward draws the mask again instead of storing it. */
ge2_status ge2_dropout(ge2_graph *graph, ge2_tensor *x, double p, ge2_tensor **y);

/* x in another float dtype: f32 or f64 to bf16 (nearest, ties to even; an
 * f64 through f32 first; past the largest bf16, infinity; any NaN, 0x7fff),
 * or bf16 to f32 or f64 (exact). Its gradient passes straight through, cast
 * back. A piece of mixed precision (docs/mixed-precision.md); CUDA
 * casts f32 and bf16. */
ge2_status ge2_cast(ge2_graph *graph, ge2_tensor *x, ge2_dtype to, ge2_tensor **y);

/* Rows of table [V, C] picked by ids (i32, any shape, each in [0, V)): y
 * [ids..., C], as PyTorch's F.embedding(ids, table). The table's gradient
 * adds each position's dy into its row in position order, the same bits
 * every run. An id outside [0, V) fails the step on the CPU; on CUDA it
 * gives a row of zeros, is counted and fails the program's next call that
 * folds the step, as ge2_cross_entropy's labels do. */
ge2_status ge2_embedding(ge2_graph *graph, ge2_tensor *ids, ge2_tensor *table, ge2_tensor **y);

/* Layer normalization over the last dim of x [..., C], as PyTorch's
 * LayerNorm(C): (x - mean) / sqrt(var + eps) · weight + bias with each row's
 * mean and biased variance; weight [C], bias [C] or NULL. */
ge2_status ge2_layer_norm(ge2_graph *graph, ge2_tensor *x, ge2_tensor *weight, ge2_tensor *bias, double eps,
                          ge2_tensor **y);
/* The same with "<prefix>.weight" (ones) and, with bias, "<prefix>.bias"
 * (zeros) made as parameters. PyTorch's default eps is 1e-5. */
ge2_status ge2_layer_norm_layer(ge2_graph *graph, const char *prefix, ge2_tensor *x, bool bias, double eps,
                                ge2_tensor **y);
/* Root-mean-square normalization over the last dim of x [..., C], as
 * PyTorch's RMSNorm(C) with its weight: x / sqrt(mean(x²) + eps) · weight,
 * weight [C]. */
ge2_status ge2_rms_norm(ge2_graph *graph, ge2_tensor *x, ge2_tensor *weight, double eps, ge2_tensor **y);
/* The same with "<prefix>.weight" (ones) made as a parameter. PyTorch's
 * default eps is the dtype's machine epsilon; Llama's is 1e-5 or 1e-6. */
ge2_status ge2_rms_norm_layer(ge2_graph *graph, const char *prefix, ge2_tensor *x, double eps, ge2_tensor **y);

/* --------------------------------------------------------------- autograd */

/* Ask for the gradient of an input tensor too (call before ge2_backward). */
ge2_status ge2_require_grad(ge2_graph *graph, ge2_tensor *input);
/* Appends gradient nodes for every parameter (and required inputs). loss must be a scalar.
 * A parameter the loss does not depend on gets no gradient and never
 * trains: ge2_backward warns on stderr naming them (ge2_backward_with
 * chooses). */
ge2_status ge2_backward(ge2_graph *graph, ge2_tensor *loss);
/* What ge2_backward does about parameters that receive no gradient. */
typedef enum ge2_unused_parameters {
    GE2_UNUSED_PARAMETERS_WARN,  /* one "ge2: warning:" line on stderr listing them (ge2_backward's choice) */
    GE2_UNUSED_PARAMETERS_ERROR, /* GE2_ERR_GRAPH naming them; the graph is left as it was */
    GE2_UNUSED_PARAMETERS_ALLOW, /* silent: they are frozen on purpose */
    GE2_UNUSED_PARAMETERS_COUNT
} ge2_unused_parameters;
typedef struct ge2_backward_options {
    ge2_unused_parameters unused_parameters;
} ge2_backward_options;
/* ge2_backward with options (NULL: ge2_backward's). */
ge2_status ge2_backward_with(ge2_graph *graph, ge2_tensor *loss, const ge2_backward_options *options);
/* Gradient of t after ge2_backward; NULL if it has none. */
ge2_tensor *ge2_grad(const ge2_tensor *t);

/* -------------------------------------------------------------- optimizer */

typedef enum ge2_optimizer_kind { GE2_OPT_SGD, GE2_OPT_ADAM, GE2_OPT_ADAMW, GE2_OPT_COUNT } ge2_optimizer_kind;

typedef enum ge2_schedule_kind {
    GE2_SCHEDULE_CONSTANT,
    GE2_SCHEDULE_STEP,   /* lr * gamma^(step / step_size) */
    GE2_SCHEDULE_COSINE, /* linear warm-up, then cosine from lr to min_lr over total_steps */
    GE2_SCHEDULE_COUNT
} ge2_schedule_kind;

typedef struct ge2_schedule {
    ge2_schedule_kind kind;
    int64_t step_size;
    double gamma;
    int64_t warmup_steps;
    int64_t total_steps;
    double min_lr;
} ge2_schedule;

/* How the optimizer's update is laid out in the step (ge2_optimizer).
 * FLAT: every parameter gradient lives in the gradient pool until one update
 * sweeps all parameters after the backward (one kernel). PER_PARAMETER: each
 * layer is updated right after its gradients are complete, by one node per
 * gradient-producing node (a layer's weight and bias together); the gradients
 * then live in the activation arena only until their update, so the gradient
 * pool is not allocated (ge2_plan_stats.gradient_bytes 0) and the planner
 * reuses their bytes. Data parallel, each update runs after its layer's
 * all-reduce, at the backward's end (the gradients live until then). The results are bitwise the same (same update math,
 * same step counter and bias corrections for every node). */
typedef enum ge2_update_mode {
    /* PER_PARAMETER where it is allowed and the gradients are large: at least
     * 24 MiB of gradients per update node (optim/optim.c says why), so the
     * extra launches cost under 1% of a step; FLAT otherwise. With
     * data_parallel each layer's gradients then get an all-reduce of their
     * own, and the updates run after the whole backward, so the updates of
     * the layers the backward finished first overlap the last all-reduces */
    GE2_UPDATE_AUTO,
    GE2_UPDATE_FLAT,
    /* Allowed without clip_norm (the global norm needs every gradient before
     * any update), without dynamic loss scaling (likewise: every gradient
     * is checked for infs first), without accumulation_steps > 1 (gradients outlive the
     * step), when every parameter has a gradient and none is a marked output
     * (ge2_mark_output before ge2_optimizer); ge2_optimizer refuses it
     * otherwise, saying which */
    GE2_UPDATE_PER_PARAMETER,
    GE2_UPDATE_COUNT
} ge2_update_mode;

const char *ge2_update_mode_name(ge2_update_mode mode); /* "auto", "flat", "per_parameter" */

/* Dynamic loss scaling with torch.amp.GradScaler's rules, all on the device
 * (the scale lives in the control block: no host sync, no re-capture): the
 * backward starts from the loss times the scale, and the update divides
 * the gradients by it. An update step whose gradients hold an inf or a NaN
 * is skipped (parameters, optimizer state and the step count untouched)
 * and the scale multiplied by backoff_factor; after growth_interval clean
 * steps in a row it is multiplied by growth_factor. What precision FP16
 * needs, whose small gradients would flush to zero; in fp32 and bf16 a
 * power-of-two scale changes no bit of a step that neither overflows nor
 * reaches the subnormals. "inf or NaN": the unscaled gradients' sum of
 * squares is not finite in float. A skipped step does not advance the
 * learning-rate schedule, which counts the updates taken. Checkpoints keep
 * the scale, its clean-step count and the skips (GradScaler's state). */
typedef struct ge2_loss_scaling {
    bool dynamic;          /* off by default */
    double init_scale;     /* 65536, GradScaler's */
    double growth_factor;  /* 2 */
    double backoff_factor; /* 0.5 */
    int64_t growth_interval; /* 2000 */
} ge2_loss_scaling;

/* torch.optim semantics. */
typedef struct ge2_optimizer_config {
    ge2_optimizer_kind kind;
    double lr;
    double weight_decay;
    /* Weight decay for parameters with at least 2 dims only (nanoGPT's
     * rule: weights decay, biases and norm gains do not); see also
     * ge2_no_weight_decay for single parameters. */
    bool decay_matrices_only;
    /* SGD */
    double momentum, dampening;
    bool nesterov;
    /* Adam, AdamW */
    double beta1, beta2, eps;
    bool amsgrad;
    /* Clip gradients to this global L2 norm first; 0 = off. */
    double clip_norm;
    ge2_schedule schedule;
    /* Micro-batches whose gradients are summed before one update; 1 = none. */
    int accumulation_steps;
    /* ge2's, not torch's: where the update runs and the gradients live (default AUTO). */
    ge2_update_mode update_mode;
    /* Data parallel (DistributedDataParallel's semantics): each parameter
     * gradient is summed over the ranks of the program's process group
     * (ge2_compile_options.collective) by an all-reduce node placed as soon
     * as the gradients of its bucket are complete, and the update divides
     * by the ranks. Without a group (one process) the all-reduces do
     * nothing, so one graph serves any number of ranks. */
    bool data_parallel;
    /* Gradient bytes one all-reduce node gathers, as DDP's bucket_cap_mb:
     * layers, last first, until a bucket holds this many (0: 25 MiB, DDP's
     * default) or GE2_MAX_INPUTS gradients. With per-parameter updates each
     * update node's gradients are one bucket. */
    int64_t bucket_bytes;
    /* Off by default; with it the update is FLAT (every gradient is checked
     * before any update), and ge2_program_loss_scale reads the scale. */
    ge2_loss_scaling loss_scaling;
} ge2_optimizer_config;

/* PyTorch's defaults for the kind (Adam: lr 1e-3, betas 0.9/0.999, eps 1e-8; SGD: lr 0.01). */
ge2_optimizer_config ge2_optimizer_defaults(ge2_optimizer_kind kind);
const char *ge2_optimizer_name(ge2_optimizer_kind kind);
/* Appends the update after the backward: one flat update, or one per layer
 * placed right after its gradients (config->update_mode). */
ge2_status ge2_optimizer(ge2_graph *graph, const ge2_optimizer_config *config);

/* ---------------------------------------------------------------- viewing */

/* Graphviz DOT: ops, shapes, forward and gradient nodes in two colours. */
ge2_status ge2_graph_dump_dot(const ge2_graph *graph, FILE *out);
/* One-screen text summary: ops, parameters, parameter count. */
ge2_status ge2_graph_summary(const ge2_graph *graph, FILE *out);

/* ---------------------------------------------------------------- program */

typedef struct ge2_program ge2_program;

typedef enum ge2_mode {
    GE2_MODE_TRAIN, /* forward, loss, backward, optimizer */
    GE2_MODE_EVAL,  /* forward, loss and metrics only */
    GE2_MODE_COUNT
} ge2_mode;

/* Which GEMM kernels the CUDA kernel registry may choose from. */
typedef enum ge2_gemm_kernels {
    GE2_GEMM_KERNELS_ANY,      /* both; the faster per GEMM shape wins */
    GE2_GEMM_KERNELS_CUBLASLT, /* cuBLASLt's only */
    GE2_GEMM_KERNELS_TILED,    /* ge2's tiled GEMM only (where it applies) */
    GE2_GEMM_KERNELS_COUNT
} ge2_gemm_kernels;

/* The arithmetic of GEMM-class ops (linear, matmul, conv2d, attention and
 * their backward GEMMs). Reductions, normalizations, losses and the
 * optimizer stay fp32. docs/mixed-precision.md is the design. */
typedef enum ge2_precision {
    GE2_PRECISION_FP32, /* fp32 GEMMs: CUDA matches the CPU */
    GE2_PRECISION_TF32, /* CUDA: TF32 tensor-core GEMMs and attention; the CPU stays fp32 */
    /* operands rounded to bf16 (nearest even), products accumulated in fp32,
     * as a bf16 tensor-core GEMM computes (PyTorch's autocast numbers), and
     * every tensor only GEMMs read stored in bf16. Convolutions round their
     * results to bf16 too (cuDNN's bf16 engines write bf16); CUDA attention
     * is cuDNN's bf16 flash attention, the CPU's stays fp32. */
    GE2_PRECISION_BF16,
    /* operands rounded to fp16 (IEEE half, nearest even: 5 exponent bits,
     * 10 mantissa bits, largest 65504), products accumulated in fp32;
     * convolutions round their results to fp16 too. Tensors stay f32 (no
     * fp16 storage yet: every GEMM rounds its operands into scratch), and
     * attention computes in fp32. Small gradients flush to zero in fp16:
     * train with dynamic loss scaling (ge2_loss_scaling), as PyTorch's
     * autocast-fp16 runs with a GradScaler. */
    GE2_PRECISION_FP16,
    GE2_PRECISION_COUNT
} ge2_precision;

const char *ge2_precision_name(ge2_precision precision); /* "fp32", "tf32", "bf16", "fp16" */
/* Parses those names; GE2_ERR_INVALID_ARGUMENT otherwise. */
ge2_status ge2_precision_parse(const char *name, ge2_precision *out);

/* Every behaviour switch of a compiled program. Start from
 * ge2_compile_defaults(); the environment may override some of them for
 * debugging (docs/options.md). A switch that changes the plan or the
 * kernels is part of every graph key of the program. */
typedef struct ge2_compile_options {
    ge2_precision precision; /* the GEMMs' arithmetic (GE2_PRECISION_FP32: fp32, CUDA matches the CPU) */
    bool separate_arenas;   /* one activation allocation per graph key instead of one shared */
    bool disable_capture;   /* CUDA: run every step eagerly instead of replaying a captured graph */
    /* Fusion patterns to leave out, comma-separated names (NULL or "":
     * none): "backward_gemm" (a LINEAR's backward GEMMs with the bias
     * gradient and activation derivative in their epilogues; a rewrite of
     * the graph itself, so a graph compiled once keeps it),
     * "recompute_act" (a GELU layer's output made again in the backward by
     * the next layer's input gradient instead of kept from the forward;
     * also a rewrite), "add_into" (an add of a dropout's or a layer norm
     * input gradient's output done by that op; a rewrite), "bn_relu" (a
     * batch norm's relu and its derivative in the batch norm's kernels;
     * also a rewrite), "mlp_step" (a
     * small MLP's step in one kernel), "head" (a classifier head's launch
     * pairs), "ln_backward" (a layer norm's parameter and input gradients
     * in one kernel), "tail_copies" (the last optimizer update also copies the
     * results back). An unknown name is an error. */
    const char *disable_fusions;
    /* CUDA kernel selection: time every applicable candidate once per GEMM
     * shape (true), or take cuBLASLt's first heuristic algorithm */
    bool autotune;
    bool autotune_log;          /* print every candidate's time as it is tuned */
    ge2_gemm_kernels gemm_kernels;
    /* Where tuned choices are kept across runs (an untrusted file): NULL is
     * ~/.cache/ge2/kernels.txt, "" keeps them in memory only. */
    const char *kernel_cache;
    /* CUDA: programmatic dependent launch for ge2's kernels that support it */
    bool pdl;
    /* CUDA: the copy engine lands each batch in a device staging while the
     * step before runs (false: the step reads pinned host memory itself) */
    bool feed_ahead;
    /* Debugging output on stderr: each key's kernels at prepare, and why a
     * fused group runs node by node */
    bool print_kernels;
    /* CUDA: fused kernels stamp their phases; the last step's timings print
     * when the key is freed */
    bool profile_fused;
    /* Time each launch: the kernel report (ge2_program_kernel_report) then
     * gives its mean over the steps after a key's first. On CUDA every step
     * runs eagerly (no capture) with an event between launches, behind a
     * hold kernel so the GPU runs them back to back, and waits for the GPU
     * at its end: for profiling. On the CPU, the host clock per kernel. */
    bool time_launches;
    /* After each compile pass (verify, fuse, select kernels, schedule, plan)
     * a text dump of its result, per graph key as keys are made; NULL: none */
    FILE *dump;
    /* Also DOT drawings: "<dump_dot>-graph.dot" after verify and
     * "<dump_dot>-key<N>.dot" (fused groups as clusters) per key; NULL: none */
    const char *dump_dot;
    /* Data parallel: the process group whose ranks each run this program on
     * their own batches (ge2/dist.h's ge2_dist_collective over MPI and NCCL);
     * NULL: this process trains alone. The gradients of a graph whose
     * optimizer has data_parallel are summed over the group by its
     * all-reduce nodes and averaged by the update; a group of more than one
     * rank needs such a graph. */
    const struct ge2_collective *collective;
    /* CUDA, with autotune: where cuBLASLt fuses an activation (or its
     * derivative) into a GEMM, time that against the plain GEMM and ge2's
     * activation kernel and keep the faster (true), or always fuse
     * (GE2_TIME_EPILOGUES=0) */
    bool time_epilogues;
    /* Precision BF16: the storage pass stores in bf16 what only bf16 readers
     * read (GEMM operands, attention's q, k, v, ...) where its producer can
     * round it, and rounds each other f32 tensor a GEMM reads once, into a
     * bf16 tensor every GEMM reading it shares (true); false: f32 storage,
     * each GEMM rounding its operands into scratch (GE2_BF16_STORAGE=0);
     * docs/mixed-precision.md, step 4 */
    bool bf16_storage;
    /* CUDA, with autotune: time the kernel candidates registered for an op
     * (ge2_kernel_candidate_register: yours, and ge2's own, such as
     * attention's 3xTF32 kernels) against its own kernel and run the
     * faster (true); false: every op runs its own kernel
     * (GE2_KERNEL_CANDIDATES=0) */
    bool kernel_candidates;
    /* CUDA: ge2_program_run runs a run's full batches in device loops,
     * many steps a launch (a WHILE node in the captured graph, the batches
     * gathered on the device), instead of a launch a step (false,
     * GE2_DEVICE_LOOP=1 turns it on). The CPU always runs its loop in C. */
    bool device_loop;
} ge2_compile_options;

ge2_compile_options ge2_compile_defaults(void);

/* Verifies, schedules and plans the graph; the graph must outlive the program. */
ge2_status ge2_compile(ge2_context *ctx, ge2_graph *graph, const ge2_compile_options *options, ge2_program **out);
void ge2_program_free(ge2_program *program);

/* One batch: data for an input or label tensor; shape may differ from the
 * built shape in its first dim (a new graph key). */
typedef struct ge2_feed {
    const ge2_tensor *tensor;
    const void *data;
    ge2_shape shape;
} ge2_feed;

/* Runs one step. Results are read later. Each feed's data is copied into
 * ge2's pinned staging, unless it already is the buffer
 * ge2_program_feed_buffers gave for it (then the step copies nothing: see
 * there). Each graph key has two staging buffers, used in turn: before
 * writing one the step waits for the key's step that used it last (two
 * steps of the key ago), so the host runs at most two steps of a key ahead
 * of the GPU and never waits otherwise. */
ge2_status ge2_program_step(ge2_program *program, ge2_mode mode, const ge2_feed *feeds, int n_feeds);

/* Zero-copy feeding: the pinned host buffers the next ge2_program_step with
 * this mode and these feed shapes (one graph key) uploads from. ptrs[i]
 * receives feeds[i]'s buffer (feeds[i].data is ignored; every input and
 * label must be given, as for a step). Write the batch there, then call
 * ge2_program_step with feeds[i].data = ptrs[i]: the step uploads without
 * copying. A data pointer not from here is copied as usual, so both ways mix.
 *
 * Waits only while the step that used that buffer last (two steps of the
 * key ago) is still running. The key is planned and prepared here if it is new,
 * as its first step would. Calling again before that step returns the same
 * buffers with what was written kept; steps of other keys (another batch
 * size, the other mode) in between do not touch them. The buffers belong to
 * one step: ge2_program_step refuses (GE2_ERR_STATE) one of the key's
 * buffers not handed out for that step (e.g. kept from its previous step),
 * so call this before every step, and refuses (GE2_ERR_INVALID_ARGUMENT)
 * data inside them that is not the feed's own; another key's buffers are
 * plain data to it (copied). The memory stays ge2's, lives as long as the
 * program, and is 256-byte aligned. */
ge2_status ge2_program_feed_buffers(ge2_program *program, ge2_mode mode, const ge2_feed *feeds, int n_feeds,
                                    void **ptrs);
/* Waits for all submitted work. */
ge2_status ge2_program_sync(ge2_program *program);
/* Copies an output's value from the most recent step of the given mode (synchronizes). */
ge2_status ge2_program_read_output(ge2_program *program, ge2_mode mode, const ge2_tensor *t, void *dst, size_t bytes);

/* Running sums of the loss and the first metric, per mode, over every step.
 * Each step copies them, and every other one-element marked output, into
 * pinned host memory as its last work (inside its CUDA Graph on a replay),
 * so no step reads anything back on its own. */
typedef struct ge2_metrics {
    int64_t steps;      /* steps whose values are included */
    double loss_sum;    /* sum over those steps of the loss output */
    double metric_sum;  /* sum of the first marked metric (e.g. correct count), 0 if none */
    int64_t examples;   /* sum of batch sizes */
    /* The first of those steps whose loss was not finite, numbered among
     * every step of the mode the program ran (1: its first); 0: none. A
     * sum over many steps names its culprit so. */
    int64_t first_nonfinite;
} ge2_metrics;
/* Non-blocking: the sums of what has arrived so far, i.e. of the steps of
 * mode that the GPU has finished, not taken before; resets the sums. The
 * latest steps may still be missing (a later call includes them); after
 * ge2_program_sync every step is included, each exactly once. Programs
 * without a loss count nothing. Fails (GE2_ERR_INVALID_ARGUMENT, naming the
 * op, the position and the value) when a step it folds read a label or an
 * id out of range on CUDA (ge2_cross_entropy says how). */
ge2_status ge2_program_take_metrics(ge2_program *program, ge2_mode mode, ge2_metrics *out);
/* Every step copies back the loss and every one-element tensor marked with
 * ge2_mark_output, however many; this is one's sum over the steps the last
 * ge2_program_take_metrics of mode counted (ge2_metrics.steps of them). */
ge2_status ge2_program_taken_sum(ge2_program *program, ge2_mode mode, const ge2_tensor *output, double *sum);

/* ---------------------------------------- many steps per call: a kept data set
 *
 * A program may keep a copy of a data set for each mode and run many steps
 * of it per call: ge2_program_run cuts each epoch's examples into batches
 * in the order graph/epoch_order.h defines (the same order the trainers'
 * batcher takes), writes each batch into the step's feeds itself and runs
 * the steps as that many ge2_program_step calls on the same batches would,
 * bit for bit. Under data parallelism (ge2_compile_options.collective)
 * each rank's training runs take its shard of every epoch, as PyTorch's
 * DistributedSampler: positions rank, rank + world, ... padded by the
 * order's first examples; eval runs take the whole data set. A run's full
 * batches go through a loop of the backend: the CPU's, in C; on CUDA,
 * with ge2_compile_options.device_loop, many steps to one launch once
 * their key is captured: the data set is copied to the device once, and a
 * loop in the captured graph (a WHILE conditional node) gathers each
 * batch, runs the step and sums its results there. Either way the bits
 * are those of the steps one at a time. */

/* One field of a kept data set: every example's row of one feed (an input
 * or label of the graph; a row is the feed's built shape without its first
 * dim). */
typedef struct ge2_dataset_field {
    const ge2_tensor *feed;
    const void *data; /* [examples][row] in dtype; copied */
    /* the feed's own dtype, or GE2_U8 for an f32 feed: each byte becomes
     * (float)byte / divisor, as the trainers' loader makes pixels (a
     * quarter of the memory) */
    ge2_dtype dtype;
    float divisor;
} ge2_dataset_field;

typedef struct ge2_dataset_desc {
    int64_t examples;
    const ge2_dataset_field *fields; /* one per input and label of the graph */
    int n_fields;
    bool shuffle;     /* each epoch in its order under seed; off: examples 0, 1, ... */
    uint64_t seed;
    size_t max_bytes; /* the most the copy may take; 0: 2 GiB */
} ge2_dataset_desc;

/* Keeps a copy of the data set for mode's runs, replacing one given
 * before. Fails naming the field when a feed is missing, repeated or not
 * an input or label, when a dtype does not fit its feed, and with both
 * figures when the copy exceeds max_bytes or the memory left. */
ge2_status ge2_program_set_dataset(ge2_program *program, ge2_mode mode, const ge2_dataset_desc *desc);

/* Where a run starts and how far it goes. Each epoch of the kept data set
 * has ceil(shard / batch) batches, the shard being the examples (one
 * process) or a rank's share of them; the last batch is partial unless
 * batch divides the shard (it is its own graph key). */
typedef struct ge2_run {
    int64_t batch;                 /* examples a step: the feeds' first dim */
    int64_t epoch, batch_in_epoch; /* where the run starts; where the next one would */
    int64_t steps;                 /* steps to run, across epochs' ends */
    /* out: how many of the call's steps ran inside the backend's loops
     * (CUDA: many steps a launch); the rest ran one ge2_program_step each */
    int64_t device_loop_steps;
} ge2_run;

/* run->steps steps of mode over the kept data set from (epoch,
 * batch_in_epoch), then moves run's position past them. Steps and their
 * metrics are those of ge2_program_step (ge2_program_take_metrics counts
 * them). Fails (GE2_ERR_STATE) without a data set for mode, and as a step
 * fails, the position then at the failed step. */
ge2_status ge2_program_run(ge2_program *program, ge2_mode mode, ge2_run *run);
/* Why some of mode's runs' steps go one at a time rather than through a
 * loop of the backend (the CPU's in C, CUDA's device loop): data parallel
 * training, launches timed, device loops off or the key not captured, a
 * data set too large for the device, or the loop's own failure, said once
 * it is known. NULL while they may loop. The string lives with the
 * program. */
const char *ge2_program_run_per_step(const ge2_program *program, ge2_mode mode);
/* A learning rate for each train step ge2_program_run makes, computed by
 * the host (nanoGPT's warmup and cosine in double, say): the train step
 * the program counts as number s (from 0, ge2_program_step's included)
 * takes lrs[s / steps_each] as its base LR, the last entry past the
 * table's end, set as ge2_set_lr would before it. A device loop sets it
 * between its steps, so a run of many steps in one launch follows the
 * schedule with the bits of ge2_set_lr before each step. Entries 0 removes
 * the table; an lr that is negative or not finite is refused, naming it. */
ge2_status ge2_program_set_lr_table(ge2_program *program, const double *lrs, int64_t entries, int64_t steps_each);
/* Batches per epoch of mode's kept data set at this batch size (0 without one). */
int64_t ge2_program_run_batches(const ge2_program *program, ge2_mode mode, int64_t batch);

ge2_status ge2_set_lr(ge2_program *program, double lr);
ge2_status ge2_get_lr(ge2_program *program, double *lr);
/* Optimizer steps taken. */
ge2_status ge2_program_step_count(ge2_program *program, int64_t *steps);
/* Dynamic loss scaling (ge2_optimizer_config.loss_scaling): the scale the
 * next step's backward starts from, and the update steps skipped so far
 * for gradients with an inf or a NaN. Without it: 1 and 0. Reads the
 * device's control block (waits for the steps enqueued). */
ge2_status ge2_program_loss_scale(ge2_program *program, double *scale, int64_t *skipped_steps);

/* Parameter values, as host copies in the parameter's dtype. */
ge2_status ge2_program_get_parameter(ge2_program *program, const ge2_tensor *param, void *dst, size_t bytes);
ge2_status ge2_program_set_parameter(ge2_program *program, const ge2_tensor *param, const void *src, size_t bytes);
/* Persistent buffers' values (ge2_buffer), the same way: host copies in the
 * buffer's dtype, as the last finished step left them. */
ge2_status ge2_program_get_buffer(ge2_program *program, const ge2_tensor *buffer, void *dst, size_t bytes);
ge2_status ge2_program_set_buffer(ge2_program *program, const ge2_tensor *buffer, const void *src, size_t bytes);

/* Memory plan of one graph key. */
typedef struct ge2_plan_stats {
    size_t arena_bytes;       /* activation arena */
    size_t lower_bound_bytes; /* max over schedule positions of live bytes */
    size_t naive_bytes;       /* every tensor its own buffer */
    size_t parameter_bytes, gradient_bytes, optimizer_state_bytes, input_bytes, workspace_bytes;
    /* precision BF16: the parameters' bf16 copies GEMMs read (half of
     * parameter_bytes), else 0 */
    size_t parameter_copy_bytes;
    /* CUDA: the feeds' device copies, one per staging slot, where the copy
     * engine lands a batch while the step before still runs; 0 on the CPU */
    size_t device_staging_bytes;
    int n_nodes;
    int n_tensors;
    /* FLAT or PER_PARAMETER, as ge2_optimizer chose (FLAT without an
     * optimizer); PER_PARAMETER: gradient_bytes is 0, the gradients are in
     * arena_bytes */
    ge2_update_mode update_mode;
    int update_nodes; /* optimizer update nodes per train step (0 without an optimizer) */
    /* The fuse pass's groups of scheduled nodes (fusion/fusion.h) and the
     * nodes in them: what a backend may run as one implementation each. The
     * CPU backend finds the same groups and runs their nodes one by one. */
    int fused_groups, fused_nodes;
    /* What the key takes on the device, planned: the pools (parameters,
     * their copies, gradients, optimizer state), the arena, the inputs, the device
     * staging and the backend's workspace (CUDA: cuBLASLt's; the launches'
     * bf16 operand scratch is in the arena); what PyTorch's
     * max_memory_allocated compares with */
    size_t device_bytes;
} ge2_plan_stats;

ge2_status ge2_program_plan_stats(ge2_program *program, ge2_mode mode, ge2_plan_stats *out);
/* Printable report of every key planned so far; contains a line
 * "plan: arena_bytes=A lower_bound_bytes=L naive_bytes=N" per key. */
ge2_status ge2_program_plan_report(ge2_program *program, FILE *out);
/* SVG of the train key's arena (schedule across, offset up, one rectangle per tensor). */
ge2_status ge2_program_plan_svg(ge2_program *program, ge2_mode mode, const char *path);

/* Which kernel each scheduled node of the most recent key of mode runs, one
 * line per node: id, op, shapes (inputs -> outputs) and the backend's
 * description (CUDA GEMMs: cuBLASLt epilogue, algorithm, tile, split-K and
 * whether the kernel registry tuned it; CPU: "cpu <op>"); with
 * ge2_compile_options.time_launches, each launch's mean µs per step and its
 * share, and the step's sum; on CUDA with data parallel, each all-reduce's
 * time on the side stream and when it ran (µs into the step), and how long
 * a launch that needed the side stream's result waited for it (the
 * communication the step did not hide). GE2_ERR_STATE before the first step of mode:
 * kernels are chosen when a key first runs. */
ge2_status ge2_program_kernel_report(ge2_program *program, ge2_mode mode, FILE *out);

/* Number of graph keys compiled (planned + captured on CUDA). */
int ge2_program_key_count(const ge2_program *program);
int ge2_program_capture_count(const ge2_program *program);
/* Launches one step of the most recent key of mode makes (one per scheduled
 * node; on CUDA the nodes of its captured graph); 0 before its first step.
 * For benchmarks and tests that count kernels per step. */
int ge2_program_launch_count(const ge2_program *program, ge2_mode mode);
/* Kernels one replay of the mode's most recent key runs, counted in its
 * captured CUDA graph (a library GEMM may run more than one); -1 when that
 * key is not captured (CPU backend, capture off, or before its first step). */
int ge2_program_graph_kernel_count(const ge2_program *program, ge2_mode mode);

/* ------------------------------------------------------------ checkpoints */

/* Training state beyond the pools that a checkpoint carries for exact resume. */
typedef struct ge2_resume_state {
    int64_t epoch;
    int64_t batch_in_epoch;
    uint64_t data_seed;
    /* Where in the epoch, counted in examples of the one-process order
     * (batch_in_epoch x batch x data-parallel ranks), so a run with another
     * batch or number of ranks resumes at the same example; 0 in files
     * that predate it (batch_in_epoch then). */
    int64_t examples_in_epoch;
} ge2_resume_state;

/* Checkpoints also carry parameter `param` under `name`: a weight a PyTorch
 * model ties to another module keeps both names in its state_dict
 * (nanoGPT's lm_head.weight is transformer.wte.weight). Loading takes the
 * alias when present and requires it to equal the parameter. */
ge2_status ge2_checkpoint_alias(ge2_graph *graph, ge2_tensor *param, const char *name);

/* safetensors: parameters under their names (PyTorch layout), optimizer state, step, resume state. Atomic. */
ge2_status ge2_checkpoint_save(ge2_program *program, const char *path, const ge2_resume_state *resume);
/* Untrusted file: every size and offset is checked. resume may be NULL. */
ge2_status ge2_checkpoint_load(ge2_program *program, const char *path, ge2_resume_state *resume);
/* Parameters only (e.g. --init): names and shapes must match the model. */
ge2_status ge2_checkpoint_load_parameters(ge2_program *program, const char *path);

/* A caller's entry of a checkpoint's __metadata__, beside ge2's own: the
 * settings that built the model ("model.*"), so a resume can rebuild it
 * without flags, and the run's ("train.*": what a resume must continue
 * with). Keys begin with "model." or "train." (the rest of the namespace is
 * ge2's). */
typedef struct ge2_checkpoint_entry {
    const char *key, *value; /* value: at most 1023 bytes */
} ge2_checkpoint_entry;
/* ge2_checkpoint_save with n entries of the caller's. */
ge2_status ge2_checkpoint_save_with(ge2_program *program, const char *path, const ge2_resume_state *resume,
                                    const ge2_checkpoint_entry *entries, int n);
/* Marks a 2-D parameter [out, in] as one Hugging Face's GPT-2 keeps in a
 * Conv1D module, whose weight is stored transposed, [in, out]. Loading takes
 * such parameters in either layout: the file's shape of the first marked
 * parameter that is not square decides for all of them (a file of
 * transformers' GPT2LMHeadModel, or ge2's own), and ge2_checkpoint_export
 * writes them [in, out] when asked. */
ge2_status ge2_checkpoint_conv1d(ge2_graph *graph, ge2_tensor *param);

typedef struct ge2_checkpoint_export_options {
    bool conv1d_transposed; /* parameters marked by ge2_checkpoint_conv1d as [in, out] */
    const ge2_checkpoint_entry *entries; /* the caller's __metadata__ entries, as ge2_checkpoint_save_with's */
    int n_entries;
} ge2_checkpoint_export_options;
/* The model alone, for another framework: the parameters (a padded one's
 * real rows) and persistent buffers under their names, without aliases
 * (a tied parameter is written once), optimizer state or ge2's training
 * state, and __metadata__ "format": "pt" (transformers' from_pretrained
 * requires it) with the caller's entries. ge2_checkpoint_load_parameters
 * reads it back. options may be NULL. */
ge2_status ge2_checkpoint_export(ge2_program *program, const char *path, const ge2_checkpoint_export_options *options);

/* The values of n of a checkpoint's __metadata__ entries, keys[i] into
 * values[i][size]; found[i] false when the file has none. The file is
 * untrusted: read once and checked whole, as a load does. */
ge2_status ge2_checkpoint_read_entries(const char *path, const char *const *keys, int n, char *const *values,
                                       size_t size, bool *found);

#ifdef __cplusplus
}
#endif

#endif /* GE2_GE2_H */
