/* The context: which device a program runs on, decided once. */
#include "graph/alloc.h"
#include "graph/error.h"

struct ge2_context {
    ge2_device device; /* CPU or CUDA, never AUTO */
};

ge2_status ge2_context_new(ge2_device device, ge2_context **out)
{
    if (!out)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_context_new: out must not be NULL");
    *out = NULL;
    if ((unsigned)device >= GE2_DEVICE_COUNT)
        return ge2_error(GE2_ERR_INVALID_ARGUMENT, "ge2_context_new: unknown device %d", (int)device);
    if (device == GE2_DEVICE_AUTO)
        device = ge2_cuda_available() ? GE2_DEVICE_CUDA : GE2_DEVICE_CPU;
    else if (device == GE2_DEVICE_CUDA && !ge2_cuda_available())
        return ge2_error(GE2_ERR_NO_DEVICE,
                         "ge2_context_new: CUDA requested but no usable CUDA device or driver was found "
                         "(use GE2_DEVICE_AUTO or GE2_DEVICE_CPU to run on the CPU)");
    ge2_context *ctx = ge2_calloc(1, sizeof *ctx);
    if (!ctx)
        return ge2_error(GE2_ERR_OUT_OF_MEMORY, "ge2_context_new: context");
    ctx->device = device;
    *out = ctx;
    return GE2_OK;
}

void ge2_context_free(ge2_context *ctx) { ge2_free(ctx); }

ge2_device ge2_context_device(const ge2_context *ctx) { return ctx ? ctx->device : GE2_DEVICE_CPU; }
