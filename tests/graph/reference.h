/* Independent float64 reference math for the graph tests: plain loops over
 * multi-indices, written from the ops' definitions, sharing no code with the
 * kernels (not even activation_math.h). */
#ifndef GE2_TESTS_GRAPH_REFERENCE_H
#define GE2_TESTS_GRAPH_REFERENCE_H

#include "graph/ir.h"

/* A tensor's values as doubles, with its concrete shape. */
typedef struct ref_tensor {
    double *v;
    ge2_shape shape;
} ref_tensor;

/* Fills out[0..node->n_outputs) (shapes given, values written) from in[0..n_inputs). */
void ref_eval(const ge2_node *node, const ref_tensor *in, ref_tensor *out);

double ref_act(ge2_activation act, double z, double slope);

#endif /* GE2_TESTS_GRAPH_REFERENCE_H */
