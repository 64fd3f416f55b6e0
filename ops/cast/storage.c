/* The storage pass of precision BF16 (docs/mixed-precision.md, step 4):
 * every f32 tensor a GEMM reads as an operand (GE2_OPF_BF16_OPERANDS) is
 * rounded once, by a CAST node placed just before its first such reader,
 * and every GEMM reading it as an operand reads that bf16 copy instead. A
 * GEMM's rounding is then done once per tensor, not once per reader (an
 * activation is read by its forward GEMM and its weight gradient's, a
 * weight by the forward and the input gradient's, an output gradient by
 * both backward GEMMs), and the GEMMs read half the bytes. The numbers do
 * not change: a GEMM under BF16 rounds an f32 operand to the same bits. */
#include <stdio.h>
#include <string.h>

#include "graph/alloc.h"
#include "graph/rewrite.h"
#include "ops/cast/cast.h"

/* Appends CAST(t) -> bf16 in phase, named "<t>.bf16", and moves it to
 * position `at`; *copy is its output. */
static ge2_status insert_cast(ge2_graph *g, int t, ge2_phase phase, int at, int *copy)
{
    ge2_attrs a;
    memset(&a, 0, sizeof a);
    const ge2_cast_attrs c = {GE2_BF16};
    memcpy(a.bytes, &c, sizeof c);
    int node_id;
    GE2_TRY(ge2_graph_add_node(g, GE2_OP_CAST, phase, &t, 1, 1, &a, &node_id));
    *copy = g->nodes[node_id].outputs[0];
    ge2_tensor *out = g->tensors[*copy];
    snprintf(out->name, sizeof out->name, "%.*s.bf16", (int)sizeof out->name - 6, g->tensors[t]->name);
    ge2_graph_move_node(g, node_id, at);
    return GE2_OK;
}

ge2_status ge2_bf16_storage_pass(ge2_graph *g, int *n_casts)
{
    *n_casts = 0;
    const int n_tensors = g->n_tensors;
    int *copy_of = ge2_malloc(sizeof(int) * (size_t)(n_tensors > 0 ? n_tensors : 1));
    if (!copy_of)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_compile: bf16 storage pass: %d tensors", n_tensors);
    for (int i = 0; i < n_tensors; i++)
        copy_of[i] = -1;
    ge2_status st = GE2_OK;
    for (int n = 0; n < g->n_nodes && st == GE2_OK; n++) {
        if (!(ge2_op_flags(g->nodes[n].op) & GE2_OPF_BF16_OPERANDS))
            continue;
        for (int slot = 0; slot < 2 && slot < g->nodes[n].n_inputs && st == GE2_OK; slot++) {
            const int t = g->nodes[n].inputs[slot];
            if (t >= n_tensors || g->tensors[t]->dtype != GE2_F32)
                continue;
            if (copy_of[t] < 0) {
                st = insert_cast(g, t, g->nodes[n].phase, n, &copy_of[t]);
                if (st != GE2_OK)
                    break;
                n++; /* the GEMM moved one down */
                (*n_casts)++;
            }
            g->nodes[n].inputs[slot] = copy_of[t];
        }
    }
    ge2_free(copy_of);
    return st;
}
