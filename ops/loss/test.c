/* The loss family's test cases: for each op a random valid instance (its
 * case body) and its float64 forward reference, registered for the
 * table-driven suites (tests/support/op_cases.h). */
#include <math.h>
#include <string.h>

#include "graph/error.h"
#include "ops/loss/loss.h"
#include "tests/support/op_cases.h"

/* ---------------------------------------------------------- case bodies */

/* logits [B, C] and labels [B] i32 */
static ge2_status logits_labels(ge2_case_ctx *c, bool differentiate, ge2_tensor **logits, ge2_tensor **labels)
{
    int64_t b = ge2_case_irange(c, 1, 5), k = ge2_case_irange(c, 2, 6);
    GE2_TRY(differentiate ? ge2_case_operand(c, ge2_shape2(b, k), logits) : ge2_case_plain(c, ge2_shape2(b, k), logits));
    return ge2_case_feed(c, GE2_ROLE_LABEL, GE2_I32, ge2_shape1(b), k, false, labels);
}

/* logits whose last columns are padding: labels below the classes only;
 * one time in four as wide as a vocabulary (the CUDA kernel's block-per-row
 * form, at widths that do and do not divide by four) */
static ge2_status case_cross_entropy_padded(ge2_case_ctx *c)
{
    bool wide = ge2_case_coin(c) && ge2_case_coin(c);
    int64_t b = ge2_case_irange(c, 1, 5), classes = wide ? ge2_case_irange(c, 1100, 1200) : ge2_case_irange(c, 1, 6),
            k = classes + ge2_case_irange(c, 1, 4);
    ge2_tensor *x, *l, *y;
    GE2_TRY(ge2_case_operand(c, ge2_shape2(b, k), &x));
    GE2_TRY(ge2_case_feed(c, GE2_ROLE_LABEL, GE2_I32, ge2_shape1(b), classes, false, &l));
    GE2_TRY(ge2_cross_entropy_padded(c->inst->graph, x, l, ge2_case_coin(c) ? 0.0f : 0.1f, classes, &y));
    return ge2_case_last_node(c);
}

/* every column a class, or the last ones padding */
static ge2_status case_cross_entropy(ge2_case_ctx *c)
{
    if (ge2_case_coin(c))
        return case_cross_entropy_padded(c);
    ge2_tensor *x, *l, *y;
    GE2_TRY(logits_labels(c, true, &x, &l));
    GE2_TRY(ge2_cross_entropy(c->inst->graph, x, l, ge2_case_coin(c) ? 0.0f : 0.1f, &y));
    return ge2_case_last_node(c);
}

static ge2_status case_accuracy(ge2_case_ctx *c)
{
    ge2_tensor *x, *l, *y;
    GE2_TRY(logits_labels(c, false, &x, &l));
    GE2_TRY(ge2_accuracy(c->inst->graph, x, l, &y));
    return ge2_case_last_node(c);
}

static ge2_status case_mse_loss(ge2_case_ctx *c)
{
    ge2_shape s = ge2_case_random_shape(c, 1, 3);
    ge2_tensor *p, *t, *y;
    GE2_TRY(ge2_case_operand(c, s, &p));
    GE2_TRY(ge2_case_operand(c, s, &t));
    GE2_TRY(ge2_mse_loss(c->inst->graph, p, t, &y));
    return ge2_case_last_node(c);
}

/* The seed, a node of its own (only the backward emits it) */
static ge2_status case_loss_scale(ge2_case_ctx *c)
{
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    GE2_ATTRS(ge2_loss_scale_attrs, a)->dtype = c->dtype;
    return ge2_case_direct(c, GE2_OP_LOSS_SCALE, NULL, 0, 1, &a);
}

/* ------------------------------------------------- float64 references */

static void ref_cross_entropy(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    int64_t B = in[0].shape.dim[0], C = in[0].shape.dim[1];
    int64_t K = GE2_ATTRS(ge2_loss_attrs, node->attrs)->classes ? GE2_ATTRS(ge2_loss_attrs, node->attrs)->classes : C;
    double eps = GE2_ATTRS(ge2_loss_attrs, node->attrs)->label_smoothing, total = 0;
    for (int64_t r = 0; r < B; r++) {
        const double *x = in[0].v + r * C;
        int64_t label = (int64_t)in[1].v[r];
        double z = 0;
        for (int64_t i = 0; i < K; i++) /* the classes; the columns past them are padding */
            z += exp(x[i]);
        for (int64_t i = 0; i < C; i++) {
            double q = (i == label ? 1 - eps : 0) + eps / (double)K, p = exp(x[i]) / z;
            if (i < K)
                total -= q * log(p);
            if (node->n_outputs > 1)
                out[1].v[r * C + i] = i < K ? (p - q) / (double)B : 0.0;
        }
    }
    out[0].v[0] = total / (double)B;
}

static void ref_mse(const ref_tensor *in, ref_tensor *out)
{
    double s = 0;
    for (int64_t i = 0; i < ge2_ref_numel(in[0].shape); i++)
        s += (in[0].v[i] - in[1].v[i]) * (in[0].v[i] - in[1].v[i]);
    out[0].v[0] = s / (double)ge2_ref_numel(in[0].shape);
}

static void ref_accuracy(const ref_tensor *in, ref_tensor *out)
{
    int64_t B = in[0].shape.dim[0], C = in[0].shape.dim[1], hits = 0;
    for (int64_t r = 0; r < B; r++) {
        int64_t best = 0;
        for (int64_t i = 1; i < C; i++)
            if (in[0].v[r * C + i] > in[0].v[r * C + best])
                best = i;
        hits += best == (int64_t)in[1].v[r];
    }
    out[0].v[0] = (double)hits;
}

static void ref_mse_loss(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    (void)node;
    ref_mse(in, out);
}

static void ref_accuracy_of(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    (void)node;
    ref_accuracy(in, out);
}

/* The seed: the control block's loss scale */
static void ref_loss_scale(const ge2_node *node, const ref_tensor *in, ref_tensor *out)
{
    (void)node;
    (void)in;
    out[0].v[0] = ge2_ref_loss_scale;
}

/* --------------------------------------------------------- registration */

GE2_OP_TEST(cross_entropy, GE2_CASE_GRADIENT, case_cross_entropy, ref_cross_entropy)
GE2_OP_TEST(mse_loss, GE2_CASE_GRADIENT, case_mse_loss, ref_mse_loss)
GE2_OP_TEST(accuracy, GE2_CASE_FORWARD, case_accuracy, ref_accuracy_of)
GE2_OP_TEST(loss_scale, GE2_CASE_FORWARD, case_loss_scale, ref_loss_scale)
