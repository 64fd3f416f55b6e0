/* Parameter initial values: a pure function of (graph seed, parameter name,
 * element index), so every backend, every run and every tool that rebuilds
 * the same graph gets the same weights without sharing any RNG state. */
#ifndef GE2_GRAPH_INIT_H
#define GE2_GRAPH_INIT_H

#include "graph/ir.h"

/* Writes numel(param->shape) values of param->dtype (f32 or f64) to dst,
 * following param->init. param must be a PARAMETER of g. */
void ge2_init_fill(const ge2_graph *g, const ge2_tensor *param, void *dst);

/* The generator behind it: a uniform double in [0, 1) for (key, counter). */
double ge2_init_uniform01(uint64_t key, uint64_t counter);
/* The per-parameter key: mixes the graph seed with a hash of the name. */
uint64_t ge2_init_key(uint64_t seed, const char *name);

#endif /* GE2_GRAPH_INIT_H */
