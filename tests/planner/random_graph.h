/* Seeded random training graphs for the planner and program suites.
 *
 * Chains, diamonds (one tensor read by several ops that meet again), many
 * consumers, and elementwise ops whose input dies there (in-place
 * candidates), built through the public API from linear, matmul,
 * elementwise, activation and softmax ops, closed by a loss and, when asked,
 * its backward. Every op output reaches the loss, so no node is dead code.
 */
#ifndef GE2_TESTS_PLANNER_RANDOM_GRAPH_H
#define GE2_TESTS_PLANNER_RANDOM_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "ge2/ge2.h"

typedef enum rg_loss_kind { RG_LOSS_MEAN, RG_LOSS_MSE, RG_LOSS_CROSS_ENTROPY, RG_LOSS_KIND_COUNT } rg_loss_kind;

typedef struct rg_graph {
    ge2_graph *graph;
    ge2_tensor *x;     /* input [B, d0] */
    ge2_tensor *label; /* MSE: f32 [B, d]; CROSS_ENTROPY: i32 [B] class ids < classes; MEAN: NULL */
    ge2_tensor *loss;
    rg_loss_kind loss_kind;
    int64_t batch;   /* built dim 0 */
    int64_t classes; /* CROSS_ENTROPY */
    int n_ops;
} rg_graph;

/* Builds graph number `seed`; with_backward adds ge2_backward(loss). */
ge2_status rg_build(uint64_t seed, bool with_backward, rg_graph *out);
void rg_free(rg_graph *g);

/* splitmix64: the tests' one source of randomness. */
uint64_t rg_next(uint64_t *state);
/* Uniform in [0, n). */
int64_t rg_below(uint64_t *state, int64_t n);
/* Uniform in [-1, 1). */
float rg_uniform(uint64_t *state);

/* Fills feed data for batch b: x [b, d0] uniform, label as its kind needs.
 * Returns the number of feeds written to feeds[] (1 or 2); buffers are the caller's,
 * each sized for b rows (x_buf: b * d0 floats, label_buf: b * label row elements of 4 bytes). */
int rg_feeds(const rg_graph *g, int64_t b, uint64_t *state, float *x_buf, void *label_buf, ge2_feed *feeds);
/* Elements per row of x and of the label (0 without label). */
int64_t rg_x_row(const rg_graph *g);
int64_t rg_label_row(const rg_graph *g);

#endif /* GE2_TESTS_PLANNER_RANDOM_GRAPH_H */
