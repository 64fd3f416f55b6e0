/* Central-difference gradient check on the naive executor (float64
 * graphs): ge2_check_gradients, and the table-driven suites' form of it. */
#ifndef GE2_CHECK_GRADIENTS_H
#define GE2_CHECK_GRADIENTS_H

#include <stdbool.h>
#include <stddef.h>

#include "graph/ir.h"

/* After ge2_backward(g, loss) on an f64 graph: runs it once with feeds, then
 * compares each wrt tensor's gradient (ge2_grad) element by element with
 * (L(x + h) - L(x - h)) / 2h, h = 1e-5, within atol + rtol * |numeric|. */
/* One element's verdict: sets *err = |analytic - numeric| - (atol + rtol
 * |numeric|) and returns whether it is within tolerance. NaN on either side
 * is never within tolerance (every comparison with NaN is false, so the test
 * is written as !(err <= 0), not err > 0). */
bool ge2_grad_check_close(double analytic, double numeric, double atol, double rtol, double *err);
/* ge2_grad_check_close of got against want, kept in r's worst figures
 * when it is the worst so far; returns whether it is within tolerance. */
bool ge2_check_note(ge2_check_result *r, double got, double want, double atol, double rtol);

ge2_check_result ge2_grad_check(const ge2_graph *g, const ge2_tensor *loss, const ge2_feed *feeds, int n_feeds,
                                     ge2_tensor *const *wrt, int n_wrt, double atol, double rtol);

#endif /* GE2_CHECK_GRADIENTS_H */
