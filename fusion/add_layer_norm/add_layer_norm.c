/* ADD_LAYER_NORM, the residual-add + layer norm pattern's fused op: its
 * definition, inference and CPU kernel, registered when the library loads
 * through the extension API's ge2_op_register, as a user's op would be. */
#include "fusion/add_layer_norm/add_layer_norm.h"
#include "graph/alloc.h"
#include "graph/error.h"
#include "kernels/cpu/cpu_util.h"

/* a, b [..., C] of one shape and dtype, weight [C][, bias [C]] -> s, y [..., C], saved [2, rows] */
static ge2_status infer(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    GE2_TRY(ge2_infer_need_outputs(node, 3, 3));
    GE2_TRY(ge2_norm_check_rows_x(node, &in[0]));
    GE2_TRY(ge2_infer_need_same_dtype(node, &in[0], &in[1]));
    GE2_TRY(ge2_infer_need_same_shape(node, &in[0], &in[1]));
    GE2_TRY(ge2_norm_check_row_vector(node, &in[0], &in[2], "weight"));
    if (node->n_inputs > 3)
        GE2_TRY(ge2_norm_check_row_vector(node, &in[0], &in[3], "bias"));
    const ge2_ln_geom g = ge2_ln_geom_of(in[0].shape);
    if (!ge2_ln_row4_takes(g.c))
        return ge2_error(GE2_ERR_SHAPE, "ge2_add_layer_norm: %s %s has rows of %lld values; the fused op takes a "
                         "multiple of 4 up to %d",
                         in[0].name, GE2_SHAPE_STR(in[0].shape), (long long)g.c, GE2_LN_ROW4_MAX_C);
    const double eps = GE2_ATTRS(ge2_layer_norm_attrs, node->attrs)->eps;
    if (!(eps > 0))
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_add_layer_norm: eps %g must be > 0", eps);
    out[0] = out[1] = (ge2_desc){in[0].dtype, in[0].shape, NULL};
    out[2] = (ge2_desc){in[0].dtype, ge2_shape2(2, g.rows), NULL};
    return GE2_OK;
}

/* s = a + b in the dtype (as ADD rounds it), then LAYER_NORM's own CPU
 * kernel on s; where no key reads s, on a temporary copy of it */
#define ADD_LAYER_NORM(T, SUF)                                                                                    \
    static ge2_status add_layer_norm_##SUF(const ge2_launch *l)                                                 \
    {                                                                                                           \
        const T *a = l->in[0].data, *b = l->in[1].data;                                                         \
        const int64_t n = ge2_shape_numel(l->in[0].shape);                                                      \
        T *s = l->out[0].data, *temporary = NULL;                                                               \
        if (!s && !(s = temporary = ge2_malloc(sizeof(T) * (size_t)(n ? n : 1))))                               \
            return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_add_layer_norm (node %d): %lld values of the sum",     \
                             l->node->id, (long long)n);                                                        \
        for (int64_t i = 0; i < n; i++)                                                                         \
            s[i] = a[i] + b[i];                                                                                 \
        ge2_launch norm = *l;                                                                                   \
        norm.n_in = l->n_in - 1;                                                                                \
        norm.in[0] = l->in[0];                                                                                  \
        norm.in[0].data = s;                                                                                    \
        for (int i = 1; i < norm.n_in; i++)                                                                     \
            norm.in[i] = l->in[i + 1];                                                                          \
        norm.n_out = 2;                                                                                         \
        norm.out[0] = l->out[1];                                                                                \
        norm.out[1] = l->out[2];                                                                                \
        const ge2_status st = ge2_cpu_layer_norm(&norm);                                                        \
        ge2_free(temporary);                                                                                    \
        return st;                                                                                              \
    }

GE2_CPU_DEFINE_BOTH(ADD_LAYER_NORM)

static ge2_status cpu(const ge2_launch *l) { return GE2_CPU_DISPATCH(add_layer_norm, l, l->in[0].dtype); }

/* y (output 1), as LAYER_NORM's y: only GEMMs read it, the backward reads s
 * and the statistics */
static bool stores_bf16(const ge2_node *node, int output)
{
    (void)node;
    return output == 1;
}

static const ge2_op_def add_layer_norm_def = {
    .name = "add_layer_norm",
    .min_inputs = 3,
    .max_inputs = 4,
    .max_outputs = 3,
    .flags = 0,
    .infer = infer,
    .backward = NULL, /* made by the fuse pass, after autograd */
    .cpu = cpu,
    .cuda = {NULL, ge2_cuda_add_layer_norm_launch, NULL, NULL},
    .stores_bf16 = stores_bf16,
};

static ge2_op add_layer_norm_op = -1;

ge2_op ge2_op_add_layer_norm(void) { return add_layer_norm_op; }

/* After the built-in ops (their ids come first); a failure leaves the id -1
 * and the rewrite fails with the registry's message */
__attribute__((constructor(GE2_OP_CANDIDATES_PRIORITY))) static void register_add_layer_norm(void)
{
    if (ge2_op_register(&add_layer_norm_def, &add_layer_norm_op) != GE2_OK)
        add_layer_norm_op = -1;
}
