/* Launches timed one by one (the compile option time_launches): events
 * between a key's launches on eager steps, summed after each step; the
 * kernel report prints their means (ge2_program_kernel_report). */
#include "capture/backends/backend_cuda_internal.h"

void ge2_cuda_timing_free(launch_timing *t, int n_launches)
{
    if (!t)
        return;
    destroy_events(t->marks, n_launches + 1);
    destroy_events(t->joined, n_launches);
    destroy_events(t->beside, 2 * n_launches);
    ge2_free(t->next);
    ge2_free(t->ms);
    ge2_free(t->wait_ms);
    ge2_free(t->beside_ms);
    ge2_free(t->beside_at_ms);
    ge2_free(t);
}

ge2_status ge2_cuda_timing_new(const ge2_exec *exec, launch_timing **out)
{
    const int n_launches = exec->n_launches;
    launch_timing *t = ge2_calloc(1, sizeof *t);
    const size_t n = (size_t)n_launches + 1;
    if (t) {
        t->marks = ge2_calloc(n, sizeof *t->marks);
        t->next = ge2_calloc(n, sizeof *t->next);
        t->ms = ge2_calloc(n, sizeof *t->ms);
        t->joined = ge2_calloc(n, sizeof *t->joined);
        t->beside = ge2_calloc(2 * n, sizeof *t->beside);
        t->wait_ms = ge2_calloc(n, sizeof *t->wait_ms);
        t->beside_ms = ge2_calloc(n, sizeof *t->beside_ms);
        t->beside_at_ms = ge2_calloc(n, sizeof *t->beside_at_ms);
    }
    if (!t || !t->marks || !t->next || !t->ms || !t->joined || !t->beside || !t->wait_ms || !t->beside_ms ||
        !t->beside_at_ms) {
        ge2_cuda_timing_free(t, -1);
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2 cuda backend: launch timing for %d launches", n_launches);
    }
    cudaError_t e = cudaSuccess;
    for (int i = 0; i <= n_launches && e == cudaSuccess; i++)
        e = cudaEventCreate(&t->marks[i]);
    for (int i = 0; i < n_launches && e == cudaSuccess; i++) {
        if (ge2_cuda_side_wait_of(exec, i) != SIDE_NONE)
            e = cudaEventCreate(&t->joined[i]);
        if (e == cudaSuccess && ge2_cuda_goes_beside(exec, i)) {
            e = cudaEventCreate(&t->beside[2 * i]);
            if (e == cudaSuccess)
                e = cudaEventCreate(&t->beside[2 * i + 1]);
        }
    }
    if (e != cudaSuccess) {
        ge2_cuda_timing_free(t, n_launches);
        return cuda_fail(e, "cudaEventCreate");
    }
    *out = t;
    return GE2_OK;
}

/* Adds ms from a to b to *sum. */
static ge2_status add_elapsed(cudaEvent_t a, cudaEvent_t b, double *sum)
{
    float ms = 0.0f;
    CUDA_TRY(cudaEventElapsedTime(&ms, a, b));
    *sum += ms;
    return GE2_OK;
}

/* Adds the step just enqueued to the sums, once the GPU has run it (the
 * side stream too: the step's last mark follows its join). */
ge2_status ge2_cuda_timing_collect(launch_timing *t, int n_launches)
{
    CUDA_TRY(cudaEventSynchronize(t->marks[n_launches]));
    if (t->steps++ == 0)
        return GE2_OK;
    for (int i = 0; i < n_launches; i++) {
        if (t->next[i])
            GE2_TRY(add_elapsed(t->marks[i], t->marks[t->next[i]], &t->ms[i]));
        if (t->joined[i] && t->next[i])
            GE2_TRY(add_elapsed(t->marks[i], t->joined[i], &t->wait_ms[i]));
        if (t->beside[2 * i] && t->next[i]) {
            GE2_TRY(add_elapsed(t->beside[2 * i], t->beside[2 * i + 1], &t->beside_ms[i]));
            GE2_TRY(add_elapsed(t->marks[0], t->beside[2 * i], &t->beside_at_ms[i]));
        }
    }
    return GE2_OK;
}

double ge2_cuda_launch_us(const ge2_backend_ctx *ctx, const ge2_exec *exec, int i, int *steps)
{
    (void)ctx;
    const ge2_cuda_exec *ce = exec->backend_data;
    const launch_timing *t = ce ? ce->timing : NULL;
    *steps = t && t->steps > 1 ? t->steps - 1 : 0;
    if (!*steps || i < 0 || i >= exec->n_launches)
        return -1.0;
    return 1000.0 * t->ms[i] / *steps;
}

bool ge2_cuda_side_stream_us(const ge2_backend_ctx *ctx, const ge2_exec *exec, int i, ge2_side_stream_us *out)
{
    int steps;
    if (ge2_cuda_launch_us(ctx, exec, i, &steps) < 0)
        return false;
    const launch_timing *t = ((const ge2_cuda_exec *)exec->backend_data)->timing;
    *out = (ge2_side_stream_us){.waited = 1000.0 * t->wait_ms[i] / steps,
                                .beside = t->beside[2 * i] != NULL,
                                .run = 1000.0 * t->beside_ms[i] / steps,
                                .start = 1000.0 * t->beside_at_ms[i] / steps};
    return out->beside || t->joined[i];
}
