/* Every user mistake returns a status and a message naming the op, the
 * tensors and their shapes; nothing aborts. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "graph/ir.h"
#include "graph/specialize.h"
#include "graph/verify.h"
#include "tests/support/check_main.h"
#include "ops/ops.h"

static ge2_graph *g;

static void setup(void) { ck_assert_int_eq(ge2_graph_new(&g), GE2_OK); }
static void teardown(void) { ge2_graph_free(g); }

#define EXPECT_ERR(call, status, substr)                                                                   \
    do {                                                                                                   \
        ge2_status st_ = (call);                                                                           \
        ck_assert_msg(st_ == (status), "%s: status %s, expected %s (%s)", #call, ge2_status_name(st_),    \
                      ge2_status_name(status), ge2_last_error());                                          \
        ck_assert_msg(strstr(ge2_last_error(), substr), "%s: message '%s' lacks '%s'", #call,              \
                      ge2_last_error(), substr);                                                           \
    } while (0)

static ge2_tensor *input(const char *name, ge2_dtype dt, ge2_shape s)
{
    ge2_tensor *t;
    ck_assert_int_eq(ge2_input(g, name, dt, s, &t), GE2_OK);
    return t;
}

static ge2_tensor *param(const char *name, ge2_shape s)
{
    ge2_tensor *t;
    ge2_init init = {GE2_INIT_LINEAR_DEFAULT, 0, 0, s.ndim == 1 ? 4 : 0};
    ck_assert_int_eq(ge2_parameter(g, name, GE2_F32, s, init, &t), GE2_OK);
    return t;
}

START_TEST(shape_mismatch_names_op_tensors_and_shapes)
{
    ge2_tensor *x = input("x", GE2_F32, ge2_shape2(64, 784)), *w = param("w", ge2_shape2(256, 785)), *y;
    EXPECT_ERR(ge2_linear(g, x, w, NULL, GE2_ACT_RELU, 0, &y), GE2_ERR_SHAPE,
               "ge2_linear: inner dims differ: x is [64,784], w is [256,785]");
    ge2_tensor *a = input("a", GE2_F32, ge2_shape2(3, 4)), *b = input("b", GE2_F32, ge2_shape2(5, 6));
    EXPECT_ERR(ge2_matmul(g, a, b, false, false, &y), GE2_ERR_SHAPE, "ge2_matmul: inner dims differ: a is [3,4]");
    EXPECT_ERR(ge2_add(g, a, b, &y), GE2_ERR_SHAPE, "ge2_add: shapes do not broadcast: a is [3,4], b is [5,6]");
    EXPECT_ERR(ge2_reshape(g, a, ge2_shape2(5, -1), &y), GE2_ERR_SHAPE, "ge2_reshape: cannot reshape 'a' [3,4]");
    EXPECT_ERR(ge2_slice(g, a, 1, 2, 9, &y), GE2_ERR_SHAPE, "window [2, 9) of axis 1 is outside 'a' [3,4]");
    EXPECT_ERR(ge2_sum(g, a, 2, &y), GE2_ERR_SHAPE, "ge2_sum: axis 2 out of range for 'a' [3,4]");
    ge2_tensor *xs[2] = {a, b};
    EXPECT_ERR(ge2_concat(g, xs, 2, 0, &y), GE2_ERR_SHAPE, "ge2_concat: shapes differ off axis 0");
    ge2_tensor *bias = param("bias", ge2_shape1(7));
    ge2_tensor *w2 = param("w2", ge2_shape2(5, 784));
    EXPECT_ERR(ge2_linear(g, x, w2, bias, GE2_ACT_NONE, 0, &y), GE2_ERR_SHAPE, "bias bias is [7], expected [5]");
    ge2_tensor *labels;
    ck_assert_int_eq(ge2_label(g, "labels", GE2_I32, ge2_shape1(63), &labels), GE2_OK);
    EXPECT_ERR(ge2_cross_entropy(g, x, labels, 0, &y), GE2_ERR_SHAPE, "x is [64,784], labels is [63]");
    /* the failed builds left nothing behind */
    ck_assert_int_eq(g->n_nodes, 0);
}
END_TEST

START_TEST(dtype_mismatch_and_unsupported_dtype)
{
    ge2_tensor *a = input("a", GE2_F32, ge2_shape1(4)), *b = input("b", GE2_F64, ge2_shape1(4)), *y;
    EXPECT_ERR(ge2_add(g, a, b, &y), GE2_ERR_DTYPE, "ge2_add: dtypes differ: 'a' is f32, 'b' is f64");
    ge2_tensor *h = input("h", GE2_BF16, ge2_shape1(4));
    EXPECT_ERR(ge2_activate(g, h, GE2_ACT_RELU, 0, &y), GE2_ERR_DTYPE, "'h' is bf16");
    ge2_tensor *logits = input("logits", GE2_F32, ge2_shape2(2, 3)), *fl = input("fl", GE2_F32, ge2_shape1(2));
    EXPECT_ERR(ge2_cross_entropy(g, logits, fl, 0, &y), GE2_ERR_DTYPE, "labels 'fl' are f32, expected i32");
    EXPECT_ERR(ge2_parameter(g, "pi", GE2_I32, ge2_shape1(2), (ge2_init){0}, &y), GE2_ERR_DTYPE, "'pi' is i32");
    EXPECT_ERR(ge2_input(g, "bad", (ge2_dtype)99, ge2_shape1(2), &y), GE2_ERR_DTYPE, "unknown dtype");
}
END_TEST

START_TEST(null_handles_and_bad_arguments)
{
    ge2_tensor *a = input("a", GE2_F32, ge2_shape1(4)), *y;
    EXPECT_ERR(ge2_add(g, NULL, a, &y), GE2_ERR_INVALID_ARGUMENT, "ge2_add: a is NULL");
    EXPECT_ERR(ge2_add(NULL, a, a, &y), GE2_ERR_INVALID_ARGUMENT, "ge2_add: graph is NULL");
    EXPECT_ERR(ge2_add(g, a, a, NULL), GE2_ERR_INVALID_ARGUMENT, "output pointer is NULL");
    EXPECT_ERR(ge2_graph_new(NULL), GE2_ERR_INVALID_ARGUMENT, "out is NULL");
    EXPECT_ERR(ge2_input(g, "a", GE2_F32, ge2_shape1(4), &y), GE2_ERR_INVALID_ARGUMENT, "'a' already exists");
    EXPECT_ERR(ge2_input(g, "z", GE2_F32, ge2_shape2(0, 3), &y), GE2_ERR_SHAPE, "'z' has invalid shape");
    EXPECT_ERR(ge2_constant(g, "c", GE2_F32, ge2_shape1(2), NULL, &y), GE2_ERR_INVALID_ARGUMENT, "data of 'c' is NULL");
    EXPECT_ERR(ge2_parameter(g, "u", GE2_F32, ge2_shape1(2), ((ge2_init){GE2_INIT_UNIFORM, 1, 0, 0}), &y),
               GE2_ERR_INVALID_ARGUMENT, "uniform init needs a < b");
    EXPECT_ERR(ge2_parameter(g, "bias", GE2_F32, ge2_shape1(2), ((ge2_init){GE2_INIT_LINEAR_DEFAULT, 0, 0, 0}), &y),
               GE2_ERR_INVALID_ARGUMENT, "needs fan_in");
    ge2_activation act;
    EXPECT_ERR(ge2_activation_parse("swish", &act), GE2_ERR_INVALID_ARGUMENT, "unknown activation 'swish'");
    ck_assert_int_eq(ge2_activation_parse("gelu", &act), GE2_OK);
    ck_assert_int_eq(act, GE2_ACT_GELU_TANH);
    ge2_device device = GE2_DEVICE_COUNT;
    EXPECT_ERR(ge2_device_parse("gpu", &device), GE2_ERR_INVALID_ARGUMENT, "unknown device 'gpu'");
    for (int d = 0; d < GE2_DEVICE_COUNT; d++) {
        ck_assert_int_eq(ge2_device_parse(ge2_device_name((ge2_device)d), &device), GE2_OK);
        ck_assert_int_eq(device, d);
    }
    ge2_tensor *logits = input("logits", GE2_F32, ge2_shape2(2, 3)), *labels;
    ck_assert_int_eq(ge2_label(g, "labels", GE2_I32, ge2_shape1(2), &labels), GE2_OK);
    EXPECT_ERR(ge2_cross_entropy(g, logits, labels, 2.0f, &y), GE2_ERR_INVALID_ARGUMENT, "label_smoothing 2");
    EXPECT_ERR(ge2_require_grad(g, labels), GE2_ERR_INVALID_ARGUMENT, "'labels' is a label");
    EXPECT_ERR(ge2_mark_output(g, NULL), GE2_ERR_INVALID_ARGUMENT, "tensor is NULL");
}
END_TEST

START_TEST(tensor_from_another_graph)
{
    ge2_graph *other;
    ck_assert_int_eq(ge2_graph_new(&other), GE2_OK);
    ge2_tensor *a = input("a", GE2_F32, ge2_shape1(4)), *b, *y;
    ck_assert_int_eq(ge2_input(other, "b", GE2_F32, ge2_shape1(4), &b), GE2_OK);
    EXPECT_ERR(ge2_mul(g, a, b, &y), GE2_ERR_GRAPH, "ge2_mul: b 'b' belongs to another graph");
    EXPECT_ERR(ge2_backward(g, b), GE2_ERR_GRAPH, "loss 'b' belongs to another graph");
    EXPECT_ERR(ge2_mark_output(g, b), GE2_ERR_GRAPH, "belongs to another graph");
    ge2_graph_free(other);
}
END_TEST

START_TEST(backward_errors)
{
    ge2_tensor *x = input("x", GE2_F32, ge2_shape2(2, 3)), *s, *y, *loss;
    ck_assert_int_eq(ge2_sum_all(g, x, &s), GE2_OK);
    EXPECT_ERR(ge2_backward(g, s), GE2_ERR_GRAPH, "no parameters");
    EXPECT_ERR(ge2_backward(g, NULL), GE2_ERR_INVALID_ARGUMENT, "loss is NULL");
    ge2_tensor *w = param("w", ge2_shape2(4, 3));
    ck_assert_int_eq(ge2_linear(g, x, w, NULL, GE2_ACT_NONE, 0, &y), GE2_OK);
    EXPECT_ERR(ge2_backward(g, y), GE2_ERR_GRAPH, "loss must be a scalar, 'linear_");
    EXPECT_ERR(ge2_backward(g, y), GE2_ERR_GRAPH, "is [2,4]");
    EXPECT_ERR(ge2_backward(g, s), GE2_ERR_GRAPH, "does not depend on any parameter");
    ck_assert_int_eq(ge2_mean_all(g, y, &loss), GE2_OK);
    ck_assert_int_eq(ge2_backward(g, loss), GE2_OK);
    EXPECT_ERR(ge2_backward(g, loss), GE2_ERR_STATE, "called twice");
    EXPECT_ERR(ge2_require_grad(g, x), GE2_ERR_STATE, "already has its backward");
}
END_TEST

START_TEST(verifier_rejects_corrupted_graphs)
{
    ge2_tensor *x = input("x", GE2_F32, ge2_shape2(2, 3)), *w = param("w", ge2_shape2(3, 3)), *y, *z;
    ck_assert_int_eq(ge2_linear(g, x, w, NULL, GE2_ACT_TANH, 0, &y), GE2_OK);
    ck_assert_int_eq(ge2_activate(g, y, GE2_ACT_RELU, 0, &z), GE2_OK);
    ck_assert_int_eq(ge2_graph_verify(g), GE2_OK);

    /* a node consuming its own output: a cycle the API cannot build */
    int keep = g->nodes[1].inputs[0];
    g->nodes[1].inputs[0] = g->nodes[1].outputs[0];
    EXPECT_ERR(ge2_graph_verify(g), GE2_ERR_GRAPH, "cycle: node 1 (activation) consumes");
    /* an edge to a later node's output */
    g->nodes[1].inputs[0] = keep;
    g->nodes[0].inputs[0] = z->id;
    EXPECT_ERR(ge2_graph_verify(g), GE2_ERR_GRAPH, "cycle: node 0 (linear)");
    g->nodes[0].inputs[0] = x->id;
    /* a dangling id, a shape inference disagrees with, a bad arity */
    g->nodes[1].inputs[0] = 999;
    EXPECT_ERR(ge2_graph_verify(g), GE2_ERR_GRAPH, "tensor 999, not in the graph");
    g->nodes[1].inputs[0] = keep;
    z->shape = ge2_shape2(3, 3);
    EXPECT_ERR(ge2_graph_verify(g), GE2_ERR_GRAPH, "inference says f32 [2,3]");
    z->shape = ge2_shape2(2, 3);
    g->nodes[1].n_inputs = 2;
    EXPECT_ERR(ge2_graph_verify(g), GE2_ERR_GRAPH, "has 2 inputs");
    g->nodes[1].n_inputs = 1;
    ck_assert_int_eq(ge2_graph_verify(g), GE2_OK);
    /* a forward node fed by the backward: eval would read a tensor nobody wrote */
    g->nodes[0].phase = GE2_PHASE_BACKWARD;
    EXPECT_ERR(ge2_graph_verify(g), GE2_ERR_GRAPH, "node 1 (activation, phase 0) consumes");
    g->nodes[0].phase = GE2_PHASE_FORWARD;
    ck_assert_int_eq(ge2_graph_verify(g), GE2_OK);
}
END_TEST

START_TEST(specialization_errors)
{
    ge2_tensor *x = input("x", GE2_F32, ge2_shape2(8, 3)), *w = param("w", ge2_shape2(4, 3)), *y;
    ck_assert_int_eq(ge2_linear(g, x, w, NULL, GE2_ACT_NONE, 0, &y), GE2_OK);
    ge2_shape feeds[8] = {{0}}, out[8];
    feeds[x->id] = ge2_shape3(1, 2, 3);
    EXPECT_ERR(ge2_graph_infer_shapes(g, feeds, out), GE2_ERR_SHAPE, "feed for 'x' is [1,2,3], built as [8,3]");
    feeds[x->id] = ge2_shape2(5, 4);
    EXPECT_ERR(ge2_graph_infer_shapes(g, feeds, out), GE2_ERR_SHAPE, "ge2_linear: inner dims differ");
    feeds[x->id] = ge2_shape2(5, 3);
    ck_assert_int_eq(ge2_graph_infer_shapes(g, feeds, out), GE2_OK);
    int ids[2] = {w->id, y->id};
    EXPECT_ERR(ge2_graph_add_node(g, GE2_OP_REDUCE_TO, GE2_PHASE_FORWARD, ids, 2, 1, NULL, NULL),
               GE2_ERR_INVALID_ARGUMENT, "ge2_reduce_to: ge2_expand_attrs.scale is 0 (1 for a plain sum)");
    ck_assert_int_eq(out[y->id].dim[0], 5);
    ck_assert_int_eq(out[y->id].dim[1], 4);
}
END_TEST

/* The key-value cache's attention: its caches are buffers of their own, and
 * every shape is checked by name */
START_TEST(attention_cached_errors)
{
    ge2_tensor *qkv = input("qkv", GE2_F32, ge2_shape2(2, 12)), *pos = input("pos", GE2_I32, ge2_shape1(2)), *k, *v, *y;
    ge2_tensor *plain = input("plain", GE2_F32, ge2_shape3(2, 8, 4));
    const ge2_init zeros = {GE2_INIT_ZEROS, 0, 0, 0};
    ck_assert_int_eq(ge2_buffer(g, "cache.k", GE2_F32, ge2_shape3(2, 8, 4), zeros, &k), GE2_OK);
    ck_assert_int_eq(ge2_buffer(g, "cache.v", GE2_F32, ge2_shape3(2, 8, 4), zeros, &v), GE2_OK);
    EXPECT_ERR(ge2_attention_cached(g, qkv, plain, v, pos, 2, &y), GE2_ERR_INVALID_ARGUMENT, "persistent buffers");
    EXPECT_ERR(ge2_attention_cached(g, qkv, k, k, pos, 2, &y), GE2_ERR_INVALID_ARGUMENT, "both the k and the v cache");
    EXPECT_ERR(ge2_attention_cached(g, qkv, k, v, pos, 3, &y), GE2_ERR_SHAPE, "3 heads do not divide the 4 channels");
    EXPECT_ERR(ge2_attention_cached(g, input("qkv2", GE2_F32, ge2_shape2(2, 9)), k, v, pos, 2, &y), GE2_ERR_SHAPE,
               "expected qkv [B, 3C]");
    EXPECT_ERR(ge2_attention_cached(g, qkv, k, v, input("pos3", GE2_I32, ge2_shape1(3)), 2, &y), GE2_ERR_SHAPE,
               "expected i32 [2]");
    ck_assert_int_eq(ge2_attention_cached(g, qkv, k, v, pos, 2, &y), GE2_OK);
    ck_assert_int_eq(ge2_tensor_shape(y).dim[1], 4);
}
END_TEST

/* A user may take a name the builder would generate; the builder steps around it. */
START_TEST(generated_names_never_clash)
{
    ge2_tensor *a = input("add_1", GE2_F32, ge2_shape1(2)), *y;
    ck_assert_int_eq(ge2_add(g, a, a, &y), GE2_OK);
    ck_assert_str_eq(ge2_tensor_name(y), "add_1_1");
    ck_assert_ptr_eq(ge2_graph_find(g, "add_1"), a);
    ck_assert_ptr_eq(ge2_graph_find(g, "add_1_1"), y);
}
END_TEST

static ge2_status infer_nothing(const ge2_node *node, const ge2_desc *in, ge2_desc *out)
{
    (void)node;
    out[0] = in[0];
    return GE2_OK;
}

static ge2_status cpu_nothing(const ge2_launch *launch)
{
    (void)launch;
    return GE2_OK;
}

static bool reads_input1(const ge2_node *node, int input)
{
    (void)node;
    return input == 1;
}

/* A definition the registry cannot use is refused, naming the op and the field */
START_TEST(op_definitions_refused)
{
    ge2_op op;
    ge2_op_def def = {.name = "refused_op", .min_inputs = 1, .max_inputs = 2, .max_outputs = 1,
                      .infer = infer_nothing, .cpu = cpu_nothing};
    def.infer = NULL;
    EXPECT_ERR(ge2_op_register(&def, &op), GE2_ERR_INVALID_ARGUMENT, "op 'refused_op' has no infer function");
    def.infer = infer_nothing;
    def.max_inputs = 1;
    def.flags = GE2_OPF_LIKE1;
    EXPECT_ERR(ge2_op_register(&def, &op), GE2_ERR_INVALID_ARGUMENT, "is GE2_OPF_LIKE1 but takes no input 1");
    def.flags = 0;
    def.max_inputs = 2;
    def.bf16_with_outputs = 1u << 2; /* input 2 of an op of two */
    def.reads_bf16 = reads_input1;
    EXPECT_ERR(ge2_op_register(&def, &op), GE2_ERR_INVALID_ARGUMENT, "names inputs past its 2 in bf16_with_outputs");
    def.bf16_with_outputs = 1u << 1;
    def.reads_bf16 = NULL;
    EXPECT_ERR(ge2_op_register(&def, &op), GE2_ERR_INVALID_ARGUMENT, "has bf16_with_outputs but no reads_bf16");
    def.bf16_with_outputs = 0;
    def.over_output = def.max_outputs; /* the output taking over an input: one it makes */
    EXPECT_ERR(ge2_op_register(&def, &op), GE2_ERR_INVALID_ARGUMENT, "has over_output");
    def.over_output = -1;
    EXPECT_ERR(ge2_op_register(&def, &op), GE2_ERR_INVALID_ARGUMENT, "has over_output -1");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("errors");
    TCase *tc = tcase_create("errors");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, shape_mismatch_names_op_tensors_and_shapes);
    tcase_add_test(tc, dtype_mismatch_and_unsupported_dtype);
    tcase_add_test(tc, attention_cached_errors);
    tcase_add_test(tc, null_handles_and_bad_arguments);
    tcase_add_test(tc, tensor_from_another_graph);
    tcase_add_test(tc, backward_errors);
    tcase_add_test(tc, verifier_rejects_corrupted_graphs);
    tcase_add_test(tc, specialization_errors);
    tcase_add_test(tc, generated_names_never_clash);
    tcase_add_test(tc, op_definitions_refused);
    suite_add_tcase(s, tc);
    return ge2_check_run(s);
}
