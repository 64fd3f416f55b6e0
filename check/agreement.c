/* ge2_check_agreement: one step on each backend through the public API,
 * the same graph, parameters and feeds, and the marked outputs compared. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "check/gradients.h"
#include "graph/error.h"

/* One step of mode on device; outputs' values into vals[i] (caller frees). */
static ge2_status run_on(ge2_device device, ge2_graph *graph, ge2_mode mode, const ge2_feed *feeds, int n_feeds,
                         ge2_tensor *const *outputs, int n_outputs, float **vals)
{
    ge2_context *ctx = NULL;
    ge2_program *program = NULL;
    ge2_status st = ge2_context_new(device, &ctx);
    if (st == GE2_OK)
        st = ge2_compile(ctx, graph, NULL, &program);
    if (st == GE2_OK)
        st = ge2_program_step(program, mode, feeds, n_feeds);
    for (int i = 0; st == GE2_OK && i < n_outputs; i++) {
        const size_t bytes = (size_t)ge2_shape_numel(outputs[i]->shape) * sizeof(float);
        vals[i] = malloc(bytes ? bytes : 1);
        st = vals[i] ? ge2_program_read_output(program, mode, outputs[i], vals[i], bytes)
                     : ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_check_agreement: %zu bytes", bytes);
    }
    ge2_program_free(program);
    ge2_context_free(ctx);
    return st;
}

static void compare(const ge2_tensor *t, const float *cuda, const float *cpu, double atol, double rtol,
                    ge2_check_result *r)
{
    for (int64_t k = 0; k < ge2_shape_numel(t->shape); k++) {
        const bool close = ge2_check_note(r, cuda[k], cpu[k], atol, rtol);
        if (!close && r->ok) {
            snprintf(r->message, sizeof r->message, "'%s'[%lld]: cuda %.9g, cpu %.9g", t->name, (long long)k,
                     cuda[k], cpu[k]);
            r->ok = false;
        }
    }
}

ge2_status ge2_check_agreement(ge2_graph *graph, ge2_mode mode, const ge2_feed *feeds, int n_feeds,
                               ge2_tensor *const *outputs, int n_outputs, double atol, double rtol,
                               ge2_check_result *out)
{
    if (out)
        *out = (ge2_check_result){.ok = false, .worst_error = NAN, .message = "the check did not run"};
    if (!graph || !out || n_outputs < 1 || !outputs || (n_feeds > 0 && !feeds))
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_check_agreement: graph, outputs and out must be given");
    if (mode == GE2_MODE_TRAIN && graph->has_optimizer)
        return ge2_error(GE2_ERR_STATE, "ge2_check_agreement: the graph has an optimizer; check a graph without one "
                                        "(the backends would update the parameters each their own way)");
    for (int i = 0; i < n_outputs; i++)
        if (!outputs[i] || outputs[i]->graph != graph || outputs[i]->dtype != GE2_F32)
            return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_check_agreement: outputs[%d] is not an f32 tensor of the "
                                                       "graph", i);
    float **cpu = calloc((size_t)n_outputs, sizeof *cpu), **cuda = calloc((size_t)n_outputs, sizeof *cuda);
    ge2_status st = cpu && cuda ? GE2_OK : ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_check_agreement");
    if (st == GE2_OK)
        st = run_on(GE2_DEVICE_CPU, graph, mode, feeds, n_feeds, outputs, n_outputs, cpu);
    if (st == GE2_OK)
        st = run_on(GE2_DEVICE_CUDA, graph, mode, feeds, n_feeds, outputs, n_outputs, cuda);
    if (st == GE2_OK)
        *out = (ge2_check_result){.ok = true, .worst_error = -INFINITY};
    else
        snprintf(out->message, sizeof out->message, "%s", ge2_last_error());
    for (int i = 0; st == GE2_OK && i < n_outputs; i++)
        compare(outputs[i], cuda[i], cpu[i], atol, rtol, out);
    for (int i = 0; i < n_outputs; i++) {
        free(cpu ? cpu[i] : NULL);
        free(cuda ? cuda[i] : NULL);
    }
    free(cpu);
    free(cuda);
    return st;
}
