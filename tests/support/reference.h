/* Independent float64 reference math for the table-driven suites: each
 * op's forward in its folder (ops/<family>/test.c), the shared index and
 * activation helpers here. No code shared with the kernels. */
#ifndef GE2_TESTS_SUPPORT_REFERENCE_H
#define GE2_TESTS_SUPPORT_REFERENCE_H

#include "graph/ir.h"

/* A tensor's values as doubles, with its concrete shape. */
struct ref_tensor {
    double *v;
    ge2_shape shape;
};
typedef struct ref_tensor ref_tensor;

/* Fills out[0..node->n_outputs) (shapes given, values written) from
 * in[0..n_inputs), through the op's registered reference. */
void ref_eval(const ge2_node *node, const ref_tensor *in, ref_tensor *out);

double ge2_ref_act(ge2_activation act, double z, double slope);
/* d act / dz from z, or from y when from_output. */
double ge2_ref_act_grad(ge2_activation act, double saved, bool from_output, double slope);
void ge2_ref_unravel(int64_t i, ge2_shape s, int64_t idx[GE2_MAX_DIMS]);
int64_t ge2_ref_ravel(const int64_t idx[GE2_MAX_DIMS], ge2_shape s);
/* idx in big's coordinates, as an offset into small broadcast up to big */
int64_t ge2_ref_broadcast_index(const int64_t idx[GE2_MAX_DIMS], ge2_shape big, ge2_shape small);
int64_t ge2_ref_numel(ge2_shape s);

/* The bf16 value nearest (float)v, by exact distances from the two bf16
 * values around it (the even one on a tie; past the largest bf16 by half a
 * unit, infinity; NaN stays NaN): rounding worked out on values, for
 * checking graph/bf16.h's bit arithmetic and the cast op. */
double ge2_ref_bf16(double v);
/* v as float, rounded to the nearest fp16 value (ties to even; 65520 and
 * past to infinity), worked out on values in double */
double ge2_ref_f16(double v);

/* The random stream the node under test drew from (the control block's
 * seed and offset when it ran), set by the suite before ref_eval: the
 * references of ops that draw (dropout) draw the same. */
extern uint64_t ge2_ref_rng_seed, ge2_ref_rng_offset;
/* ... and its loss scale (1 unless the suite sets it), for the references
 * of ops that read it (loss_scale, the backward's seed) */
extern double ge2_ref_loss_scale;

#endif /* GE2_TESTS_SUPPORT_REFERENCE_H */
