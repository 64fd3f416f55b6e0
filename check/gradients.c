#include "check/gradients.h"

#include <math.h>
#include <stdio.h>

#include "graph/error.h"

#include "check/naive.h"

static double loss_at(ge2_naive *n, const ge2_tensor *loss, bool *ok)
{
    *ok = ge2_naive_exec(n, false) == GE2_OK;
    return *(const double *)ge2_naive_data(n, loss);
}

bool ge2_grad_check_close(double analytic, double numeric, double atol, double rtol, double *err)
{
    *err = fabs(analytic - numeric) - (atol + rtol * fabs(numeric));
    return *err <= 0;
}

bool ge2_check_note(ge2_check_result *r, double got, double want, double atol, double rtol)
{
    double err;
    const bool close = ge2_grad_check_close(got, want, atol, rtol, &err);
    /* negated so a NaN error sticks: it is the worst there is */
    if (!isnan(r->worst_error) && !(err <= r->worst_error)) {
        r->worst_error = err;
        r->worst_difference = fabs(got - want);
        r->worst_bound = atol + rtol * fabs(want);
    }
    return close;
}

ge2_check_result ge2_grad_check(const ge2_graph *g, const ge2_tensor *loss, const ge2_feed *feeds, int n_feeds,
                                     ge2_tensor *const *wrt, int n_wrt, double atol, double rtol)
{
    ge2_check_result r = {.ok = true, .worst_error = -INFINITY};
    ge2_naive *n;
    if (loss->dtype != GE2_F64 || ge2_naive_run(g, feeds, n_feeds, &n) != GE2_OK) {
        snprintf(r.message, sizeof r.message, "cannot run: loss '%s' is %s (%s)", loss->name,
                 ge2_dtype_name(loss->dtype), ge2_last_error());
        r.ok = false;
        return r;
    }
    for (int w = 0; w < n_wrt && r.ok; w++) {
        const ge2_tensor *t = wrt[w], *gt = ge2_grad(t);
        if (!gt || t->dtype != GE2_F64) {
            snprintf(r.message, sizeof r.message, "'%s' has no f64 gradient", t->name);
            r.ok = false;
            break;
        }
        double *x = ge2_naive_data(n, t);
        const double *analytic = ge2_naive_data(n, gt);
        for (int64_t k = 0; k < ge2_shape_numel(n->shape[t->id]); k++) {
            const double h = 1e-5, keep = x[k];
            bool ok_p, ok_m;
            x[k] = keep + h;
            double lp = loss_at(n, loss, &ok_p);
            x[k] = keep - h;
            double lm = loss_at(n, loss, &ok_m);
            x[k] = keep;
            const double numeric = (lp - lm) / (2 * h);
            const bool close = ge2_check_note(&r, analytic[k], numeric, atol, rtol);
            if ((!close || !ok_p || !ok_m) && r.ok) {
                snprintf(r.message, sizeof r.message, "d %s / d %s[%lld]: backward %.10g, finite difference %.10g",
                         loss->name, t->name, (long long)k, analytic[k], numeric);
                r.ok = false;
            }
        }
    }
    ge2_naive_free(n);
    return r;
}

ge2_status ge2_check_gradients(const ge2_graph *graph, const ge2_tensor *loss, const ge2_feed *feeds, int n_feeds,
                               ge2_tensor *const *wrt, int n_wrt, double atol, double rtol, ge2_check_result *out)
{
    if (!graph || !loss || !out || (n_wrt > 0 && !wrt) || (n_feeds > 0 && !feeds))
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_check_gradients: graph, loss, out, wrt and feeds must be given");
    if (graph->loss != loss->id)
        return ge2_error(GE2_ERR_STATE, "ge2_check_gradients: call ge2_backward(graph, '%s') first", loss->name);
    for (int w = 0; w < n_wrt; w++)
        if (!wrt[w] || wrt[w]->graph != graph || wrt[w]->dtype != GE2_F64 || !ge2_grad(wrt[w]))
            return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_check_gradients: wrt[%d] ('%s') is not an f64 tensor of "
                             "the graph with a gradient",
                             w, wrt[w] ? wrt[w]->name : "NULL");
    if (loss->dtype != GE2_F64)
        return ge2_error(GE2_ERR_DTYPE, "ge2_check_gradients: loss '%s' is %s; the check runs in f64", loss->name,
                         ge2_dtype_name(loss->dtype));
    *out = ge2_grad_check(graph, loss, feeds, n_feeds, wrt, n_wrt, atol, rtol);
    return GE2_OK;
}
