/* The storage pass of precision BF16 (docs/mixed-precision.md, step 4):
 * every f32 tensor a GEMM reads as an operand (GE2_OPF_BF16_OPERANDS) is
 * rounded once, by a CAST node placed just before its first such reader,
 * and every GEMM reading it as an operand reads that bf16 copy instead. A
 * GEMM's rounding is then done once per tensor, not once per reader (an
 * activation is read by its forward GEMM and its weight gradient's, a
 * weight by the forward and the input gradient's, an output gradient by
 * both backward GEMMs), and the GEMMs read half the bytes. A GEMM operand
 * has the bits it had when each GEMM rounded it; what changes is what
 * autocast changes too: a bias gradient sums the bf16 output gradient,
 * GELU's derivative reads a bf16 stash, attention's fp32 kernels (where
 * cuDNN declines) read bf16 q, k, v.
 *
 * First, where every reader reads a tensor as bf16 (a GEMM's operand, or an
 * input the op declares: ge2_op_reads_bf16; through reshapes too) and its
 * producer can round it at its store (ge2_op_def.stores_bf16: a layer
 * norm's output, a linear layer's activation beside its z, an input
 * gradient, attention's q, k and v sliced from their projection), the
 * tensor itself becomes bf16 and no cast runs: the f32 copy is never
 * written, and the arena holds half.
 *
 * A parameter a GEMM reads is read through its bf16 copy
 * (GE2_ROLE_PARAMETER_COPY, in the parameter-copy pool), which the
 * optimizer's update writes beside the parameter and the program refreshes
 * after every host write of the parameters: no cast kernel a step. */
#include <stdio.h>
#include <string.h>

#include "graph/alloc.h"
#include "graph/error.h"
#include "graph/rewrite.h"
#include "ops/ops.h" /* CAST, which this pass emits */
#include "passes/passes.h"

/* Appends CAST(t) -> bf16 in phase, named "<t>.bf16", and moves it to
 * position `at`; *copy is its output. */
static ge2_status insert_cast(ge2_graph *g, int t, ge2_phase phase, int at, int *copy)
{
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    GE2_ATTRS(ge2_cast_attrs, a)->to = GE2_BF16;
    int node_id;
    GE2_TRY(ge2_graph_add_node(g, GE2_OP_CAST, phase, &t, 1, 1, &a, &node_id));
    *copy = g->nodes[node_id].outputs[0];
    ge2_tensor *out = g->tensors[*copy];
    snprintf(out->name, sizeof out->name, "%.*s.bf16", (int)sizeof out->name - 6, g->tensors[t]->name);
    ge2_graph_move_node(g, node_id, at);
    return GE2_OK;
}

/* An activation the user does not read back (not a step result): what the
 * pass may turn bf16 */
static bool private_activation(const ge2_tensor *t)
{
    return t->role == GE2_ROLE_ACTIVATION && !t->is_output;
}

/* An input node reads in bf16 exactly where all its outputs are bf16
 * (ge2_op_def.bf16_with_outputs: LINEAR's bias): rule 1 is still deciding
 * those, so rule 2 gives it its bf16 copy, never rule 1 */
static bool bf16_with_outputs(const ge2_node *node, int input)
{
    const ge2_op_def *def = ge2_op_def_of(node->op);
    return def && input < 32 && (def->bf16_with_outputs >> input & 1u);
}

/* Whether node's input `slot` is a bf16 operand: a GEMM's (the op's
 * operands), and an input read in bf16 with the outputs where every output
 * is bf16 */
static bool bf16_operand(const ge2_graph *g, const ge2_node *node, int slot)
{
    if (ge2_op_bf16_operand(node->op, slot))
        return true;
    if (!bf16_with_outputs(node, slot) || node->n_outputs == 0)
        return false;
    for (int k = 0; k < node->n_outputs; k++)
        if (g->tensors[node->outputs[k]]->dtype != GE2_BF16)
            return false;
    return true;
}

/* Whether every reader of tensor t reads it as bf16 (ge2_op_reads_bf16), or
 * through views (GE2_OPF_VIEW: reshapes) whose outputs are private
 * activations every reader reads so; and it has a reader. depth bounds the
 * chains of views. */
static bool read_as_bf16(const ge2_graph *g, int t, int depth)
{
    bool read = false;
    for (int n = 0; n < g->n_nodes; n++) {
        const ge2_node *node = &g->nodes[n];
        for (int i = 0; i < node->n_inputs; i++) {
            if (node->inputs[i] != t)
                continue;
            read = true;
            if (i == 0 && (ge2_op_flags(node->op) & GE2_OPF_VIEW)) {
                /* a view turns bf16 with t (store_bf16): its own readers decide */
                if (depth >= 8 || !private_activation(g->tensors[node->outputs[0]]) ||
                    !read_as_bf16(g, node->outputs[0], depth + 1))
                    return false;
            } else if (!ge2_op_reads_bf16(node, i) || bf16_with_outputs(node, i)) {
                return false;
            }
        }
    }
    return read;
}

/* Can t itself be stored in bf16: an f32 activation (not a step result)
 * only bf16 readers read, made by an op that rounds that output at its
 * store? */
static bool storable(const ge2_graph *g, const ge2_tensor *t)
{
    if (t->dtype != GE2_F32 || !private_activation(t) || t->producer < 0)
        return false;
    const ge2_node *p = &g->nodes[t->producer];
    bool rounds = false;
    for (int k = 0; k < p->n_outputs; k++)
        if (p->outputs[k] == t->id)
            rounds = ge2_op_stores_bf16(p, k);
    return rounds && read_as_bf16(g, t->id, 0);
}

/* t becomes bf16, and so do the views of it its readers make */
static void store_bf16(ge2_graph *g, int t)
{
    g->tensors[t]->dtype = GE2_BF16;
    for (int n = 0; n < g->n_nodes; n++)
        if ((ge2_op_flags(g->nodes[n].op) & GE2_OPF_VIEW) && g->nodes[n].n_inputs > 0 && g->nodes[n].inputs[0] == t)
            store_bf16(g, g->nodes[n].outputs[0]);
}

ge2_status ge2_bf16_storage_pass(ge2_graph *g, int *n_casts, int *n_stored, int *n_copies)
{
    *n_casts = *n_stored = *n_copies = 0;
    /* first the tensors stored in bf16 by their producers */
    for (int t = 0; t < g->n_tensors; t++)
        if (storable(g, g->tensors[t])) {
            store_bf16(g, t);
            (*n_stored)++;
        }
    /* then for each f32 tensor left that GEMMs read as an operand: a
     * parameter's bf16 copy, which the optimizer writes as it updates the
     * parameter (no kernel of its own), or else one cast */
    const int n_tensors = g->n_tensors;
    int *bf16_of = ge2_malloc(sizeof(int) * (size_t)(n_tensors > 0 ? n_tensors : 1));
    if (!bf16_of)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_compile: bf16 storage pass: %d tensors", n_tensors);
    for (int i = 0; i < n_tensors; i++)
        bf16_of[i] = -1; /* tensor i's bf16 operand, once made: its parameter copy or its cast */
    ge2_status st = GE2_OK;
    for (int n = 0; n < g->n_nodes && st == GE2_OK; n++) {
        for (int slot = 0; slot < g->nodes[n].n_inputs && st == GE2_OK; slot++) {
            const int t = g->nodes[n].inputs[slot];
            if (!bf16_operand(g, &g->nodes[n], slot) || t >= n_tensors || g->tensors[t]->dtype != GE2_F32)
                continue;
            if (bf16_of[t] < 0 && g->tensors[t]->role == GE2_ROLE_PARAMETER) {
                st = ge2_graph_parameter_copy(g, t, &bf16_of[t]);
                if (st != GE2_OK)
                    break;
                (*n_copies)++;
            } else if (bf16_of[t] < 0) {
                st = insert_cast(g, t, g->nodes[n].phase, n, &bf16_of[t]);
                if (st != GE2_OK)
                    break;
                n++; /* the GEMM moved one down */
                (*n_casts)++;
            }
            g->nodes[n].inputs[slot] = bf16_of[t];
        }
    }
    ge2_free(bf16_of);
    return st;
}
