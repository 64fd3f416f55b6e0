/* The rewrite the residual-add + norm patterns share (fusion/add_rms_norm,
 * fusion/add_layer_norm): an ADD s = a + b (two operands of s's shape and
 * dtype, no broadcast) whose s a row norm normalizes becomes one fused op
 * where the ADD stood, fused(a, b, the norm's other inputs) -> (s, the
 * norm's outputs), with the norm's attributes; the norm's node goes. Every
 * other reader of s (the next residual add, the norm's backward) reads it
 * as before. */
#ifndef GE2_FUSION_RESIDUAL_NORM_H
#define GE2_FUSION_RESIDUAL_NORM_H

#include <stdio.h>

#include "graph/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ge2_residual_norm {
    const char *pattern; /* the row's name, in log lines and errors */
    ge2_op norm;         /* the norm op it fuses (forward nodes with all their outputs) */
    ge2_op fused;        /* the fused op it emits, the norm's outputs after the sum; < 0: it did not register */
    /* Whether the fused op's kernels take this norm node, else why (NULL:
     * every node) */
    bool (*takes)(const ge2_graph *g, const ge2_node *norm, const char **why);
} ge2_residual_norm;

/* The rewrite over g, as a fusion row's (fusion.h: ge2_fusion_pattern.rewrite) */
ge2_status ge2_residual_norm_rewrite(ge2_graph *g, const ge2_residual_norm *r, FILE *log, int *n_fused);

/* The fused op's CPU kernel, f32 or f64: s = a + b in the dtype (as ADD
 * rounds it), then the norm's own CPU kernel (norm_cpu) on s and the fused
 * node's other inputs, into its other outputs. Where no key reads s, the sum
 * is made in y (output 1), which the norm then writes over element by
 * element after reading it (the norms' CPU kernels read a row's values
 * before they write its y); only with neither wanted is it a temporary. */
ge2_status ge2_residual_norm_cpu(const ge2_launch *l, ge2_status (*norm_cpu)(const ge2_launch *l));

#ifdef __cplusplus
}
#endif

#endif /* GE2_FUSION_RESIDUAL_NORM_H */
