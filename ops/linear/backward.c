/* Backward of the GEMM family. LINEAR: dz = act'(.) * dy (ACTIVATION_BACKWARD,
 * from y or the stashed z), dx = dz · W, dW = dzᵀ · x, db = sum over rows of dz.
 * MATMUL: the two products with the transposes arranged so that no
 * transposed copy is ever made. */
#include <string.h>

#include "ops/linear/linear.h"
#include "ops/elementwise/activation_math.h"

static ge2_status matmul(ge2_autograd *ag, int a, int b, bool ta, bool tb, int *out)
{
    ge2_attrs at;
    memset(&at, 0, sizeof at);
    at.matmul.trans_a = ta;
    at.matmul.trans_b = tb;
    return ge2_ag_emit2(ag, GE2_OP_MATMUL, a, b, &at, out);
}

/* Whether the gradient of x, the input of a LINEAR, may go straight into
 * x's producer's dz (producer_dz): the producer is a LINEAR whose y is x, and
 * nothing but this node reads x or the producer's stash, so dz · w is x's
 * whole gradient and the producer's rule is the only one that will see it. */
static bool can_defer(const ge2_autograd *ag, int x)
{
    const ge2_graph *g = ag->graph;
    const ge2_tensor *t = g->tensors[x];
    if (g->no_backward_fusion || t->producer < 0)
        return false;
    const ge2_node *p = &g->nodes[t->producer];
    if (p->op != GE2_OP_LINEAR || p->phase != GE2_PHASE_FORWARD || p->outputs[0] != x)
        return false;
    /* a LINEAR made by hand without its stash has nothing to fuse with */
    if (p->n_outputs != (ge2_linear_stash_of(p->attrs.linear.act, p->attrs.linear.slope) == GE2_STASH_NONE ? 1 : 2))
        return false;
    int uses = 0;
    for (int n = 0; n < g->n_nodes; n++) {
        const ge2_node *c = &g->nodes[n];
        if (c->phase != GE2_PHASE_FORWARD)
            continue;
        for (int i = 0; i < c->n_inputs; i++)
            uses += c->inputs[i] == x || (p->n_outputs > 1 && c->inputs[i] == p->outputs[1]);
    }
    return uses == 1;
}

/* The LINEAR_GRAD_INPUT of x = producer's y, when x's whole gradient is dz ·
 * w (can_defer): the producer's dz = (dz · w) ⊙ act'(its stash), in one GEMM
 * with its epilogue. db is left to LINEAR_GRAD_WEIGHT, which reads dz whole
 * as its reduction operand: there the sum is one more column of the same
 * GEMM (kernels/cuda/gemm_tiled.cu), where this op would need a reduction
 * across the CTAs that split the batch.
 *
 * Emitted by the consumer's rule before the consumer's LINEAR_GRAD_WEIGHT,
 * so the schedule computes it while dz and x are both still live: no later
 * node's input can share bytes with it, and the whole-step MLP kernel may
 * run a layer's two backward GEMMs side by side (fusion/mlp_step/mlp_step.h). */
static ge2_status producer_dz(ge2_autograd *ag, int x, int dz, int w, int *out)
{
    const ge2_node *producer = &ag->graph->nodes[ag->graph->tensors[x]->producer];
    const ge2_linear_attrs *la = &producer->attrs.linear;
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    a.act.act = la->act;
    a.act.slope = la->slope;
    int in[3] = {dz, w, -1}, n_in = 2;
    if (la->act != GE2_ACT_NONE) {
        a.act.from_output = ge2_linear_stash_of(la->act, la->slope) == GE2_STASH_NONE;
        in[n_in++] = a.act.from_output ? producer->outputs[0] : producer->outputs[1];
    }
    return ge2_ag_emit_n(ag, GE2_OP_LINEAR_GRAD_INPUT, in, n_in, 1, &a, out);
}

/* The generic dz: dy through ACTIVATION_BACKWARD, plus a gradient of the
 * z stash if anything consumed it. */
static ge2_status plain_dz(ge2_autograd *ag, const ge2_node *node, const int *dy, int *dz)
{
    const ge2_linear_attrs *la = &node->attrs.linear;
    ge2_linear_stash stash = ge2_linear_stash_of(la->act, la->slope);
    *dz = GE2_GRAD_NONE;
    if (dy[0] != GE2_GRAD_NONE) {
        GE2_TRY(ge2_ag_dy_tensor(ag, dy[0], dz));
        if (la->act != GE2_ACT_NONE) {
            ge2_attrs a;
            memset(&a, 0, sizeof a);
            a.act.act = la->act;
            a.act.slope = la->slope;
            /* the relu mask is for LINEAR_GRAD_INPUT; ACTIVATION_BACKWARD reads y */
            a.act.from_output = stash != GE2_STASH_Z;
            int saved = a.act.from_output ? node->outputs[0] : node->outputs[1];
            GE2_TRY(ge2_ag_emit2(ag, GE2_OP_ACTIVATION_BACKWARD, *dz, saved, &a, dz));
        }
    }
    if (stash == GE2_STASH_Z && dy[1] != GE2_GRAD_NONE) {
        int dz2;
        GE2_TRY(ge2_ag_dy_tensor(ag, dy[1], &dz2));
        if (*dz == GE2_GRAD_NONE)
            *dz = dz2;
        else
            GE2_TRY(ge2_ag_emit2(ag, GE2_OP_ADD, *dz, dz2, NULL, dz));
    }
    return GE2_OK;
}

/* node: x [B, in], w [out, in], b [out] -> y [B, out][, stash]
 *
 * Fusion happens here, in the rule, rather than in a pass over the finished
 * graph: the rule knows which tensors are whose gradient and that dz feeds
 * exactly the three products below, so nothing has to be pattern-matched
 * back out of MATMUL/SUM/ACTIVATION_BACKWARD nodes and nothing is rewritten.
 *   dW, db: one LINEAR_GRAD_WEIGHT (the bias gradient in the GEMM's epilogue).
 *   dx:     when x's producer is a LINEAR (can_defer), one LINEAR_GRAD_INPUT
 *           = the product times the producer's act', handed to the
 *           producer's rule as its dz (GE2_GRAD_PENDING). Otherwise a MATMUL.
 * With graph->no_backward_fusion the rule emits the generic nodes only. */
ge2_status ge2_backward_linear(ge2_autograd *ag, const ge2_node *node, const int *dy)
{
    const ge2_graph *g = ag->graph;
    int x = node->inputs[0], w = node->inputs[1], b = node->n_inputs > 2 ? node->inputs[2] : -1;
    bool want_db = b >= 0 && ge2_ag_wants(ag, b), fuse = !g->no_backward_fusion;
    int dz, db = GE2_GRAD_NONE, gx, gw;
    if (dy[0] == GE2_GRAD_PENDING)
        dz = ag->pending[node->outputs[0]].dz;
    else
        GE2_TRY(plain_dz(ag, node, dy, &dz));
    if (ge2_ag_wants(ag, x)) {
        if (can_defer(ag, x)) {
            int dz_below;
            GE2_TRY(producer_dz(ag, x, dz, w, &dz_below));
            ag->grad[x] = GE2_GRAD_PENDING;
            ag->pending[x] = (ge2_ag_pending){dz_below};
        } else {
            GE2_TRY(matmul(ag, dz, w, false, false, &gx)); /* [B, out] · [out, in] */
            GE2_TRY(ge2_ag_accumulate(ag, x, gx));
        }
    }
    if (ge2_ag_wants(ag, w) && fuse) {
        int in[2] = {dz, x}, out[2];
        GE2_TRY(ge2_ag_emit_n(ag, GE2_OP_LINEAR_GRAD_WEIGHT, in, 2, want_db ? 2 : 1, NULL, out));
        GE2_TRY(ge2_ag_accumulate(ag, w, out[0]));
        if (want_db)
            db = out[1];
    } else if (ge2_ag_wants(ag, w)) {
        GE2_TRY(matmul(ag, dz, x, true, false, &gw)); /* [B, out]ᵀ · [B, in] */
        GE2_TRY(ge2_ag_accumulate(ag, w, gw));
    }
    if (want_db && db == GE2_GRAD_NONE) {
        ge2_attrs a;
        memset(&a, 0, sizeof a);
        a.reduce.axis = 0;
        GE2_TRY(ge2_ag_emit(ag, GE2_OP_SUM, &dz, 1, &a, &db));
    }
    if (want_db)
        GE2_TRY(ge2_ag_accumulate(ag, b, db));
    return GE2_OK;
}

/* node: y = op(a) · op(b), op = transpose when trans_* (last two dims).
 *   plain    (y = a b):    da = dy bᵀ,      db = aᵀ dy
 *   trans_a  (y = aᵀ b):   da = b dyᵀ,      db = a dy
 *   trans_b  (y = a bᵀ):   da = dy b,       db = dyᵀ a
 *   both     (y = aᵀ bᵀ):  da = bᵀ dyᵀ,     db = dyᵀ aᵀ */
ge2_status ge2_backward_matmul(ge2_autograd *ag, const ge2_node *node, const int *dy)
{
    int a = node->inputs[0], b = node->inputs[1], d, g;
    bool ta = node->attrs.matmul.trans_a, tb = node->attrs.matmul.trans_b;
    GE2_TRY(ge2_ag_dy_tensor(ag, dy[0], &d));
    if (ge2_ag_wants(ag, a)) {
        if (!ta)
            GE2_TRY(matmul(ag, d, b, false, !tb, &g));
        else
            GE2_TRY(matmul(ag, b, d, tb, true, &g));
        GE2_TRY(ge2_ag_accumulate(ag, a, g));
    }
    if (ge2_ag_wants(ag, b)) {
        if (!tb)
            GE2_TRY(matmul(ag, a, d, !ta, false, &g));
        else
            GE2_TRY(matmul(ag, d, a, true, ta, &g));
        GE2_TRY(ge2_ag_accumulate(ag, b, g));
    }
    return GE2_OK;
}
