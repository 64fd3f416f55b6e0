/* Backward of the GEMM family. LINEAR: dz = act'(.) * dy (ACTIVATION_BACKWARD,
 * from y or the stashed z), dx = dz · W, dW = dzᵀ · x, db = sum over rows of dz;
 * the fused GEMMs (LINEAR_GRAD_INPUT, LINEAR_GRAD_WEIGHT) are the fuse pass's.
 * MATMUL: the two products with the transposes arranged so that no
 * transposed copy is ever made. */
#include <string.h>

#include "ops/linear/linear.h"
#include "kernels/activation_math.h"
#include "ops/reduce/reduce.h"

static ge2_status matmul(ge2_autograd *ag, int a, int b, bool ta, bool tb, int *out)
{
    ge2_attrs at;
    memset(&at, 0, sizeof at);
    GE2_ATTRS(ge2_matmul_attrs, at)->trans_a = ta;
    GE2_ATTRS(ge2_matmul_attrs, at)->trans_b = tb;
    return ge2_ag_emit2(ag, GE2_OP_MATMUL, a, b, &at, out);
}

/* The generic dz: dy through ACTIVATION_BACKWARD, plus a gradient of the
 * z stash if anything consumed it. */
static ge2_status plain_dz(ge2_autograd *ag, const ge2_node *node, const int *dy, int *dz)
{
    const ge2_linear_attrs *la = GE2_ATTRS(ge2_linear_attrs, node->attrs);
    ge2_linear_stash stash = ge2_linear_stash_of(la->act, la->slope);
    *dz = GE2_GRAD_NONE;
    if (dy[0] != GE2_GRAD_NONE) {
        GE2_TRY(ge2_ag_dy_tensor(ag, dy[0], dz));
        if (la->act != GE2_ACT_NONE) {
            ge2_attrs a;
            memset(&a, 0, sizeof a);
            GE2_ATTRS(ge2_act_attrs, a)->act = la->act;
            GE2_ATTRS(ge2_act_attrs, a)->slope = la->slope;
            /* the relu mask is for LINEAR_GRAD_INPUT; ACTIVATION_BACKWARD reads y */
            GE2_ATTRS(ge2_act_attrs, a)->from_output = stash != GE2_STASH_Z;
            int saved = GE2_ATTRS(ge2_act_attrs, a)->from_output ? node->outputs[0] : node->outputs[1];
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
 *   dz = act'(.) * dy (ACTIVATION_BACKWARD), dx = dz · w (MATMUL),
 *   dW = dzᵀ · x (MATMUL), db = the column sums of dz (SUM).
 * Plain nodes only: the fuse pass's backward_gemm rewrite
 * (fusion/backward_gemm) turns dW and db into one LINEAR_GRAD_WEIGHT and
 * dx with the producer's act' into one LINEAR_GRAD_INPUT, when compiling. */
ge2_status ge2_backward_linear(ge2_autograd *ag, const ge2_node *node, const int *dy)
{
    int x = node->inputs[0], w = node->inputs[1], b = node->n_inputs > 2 ? node->inputs[2] : -1;
    int dz, g;
    GE2_TRY(plain_dz(ag, node, dy, &dz));
    if (ge2_ag_wants(ag, x)) {
        GE2_TRY(matmul(ag, dz, w, false, false, &g)); /* [B, out] · [out, in] */
        GE2_TRY(ge2_ag_accumulate(ag, x, g));
    }
    if (ge2_ag_wants(ag, w)) {
        GE2_TRY(matmul(ag, dz, x, true, false, &g)); /* [B, out]ᵀ · [B, in] */
        GE2_TRY(ge2_ag_accumulate(ag, w, g));
    }
    if (b >= 0 && ge2_ag_wants(ag, b)) {
        ge2_attrs a;
        memset(&a, 0, sizeof a);
        GE2_ATTRS(ge2_reduce_attrs, a)->axis = 0;
        GE2_TRY(ge2_ag_emit(ag, GE2_OP_SUM, &dz, 1, &a, &g));
        GE2_TRY(ge2_ag_accumulate(ag, b, g));
    }
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
    bool ta = GE2_ATTRS(ge2_matmul_attrs, node->attrs)->trans_a, tb = GE2_ATTRS(ge2_matmul_attrs, node->attrs)->trans_b;
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
