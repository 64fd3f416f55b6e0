/* Shared plumbing for the .cu files: CUDA errors as ge2_status, dtype checks,
 * the stream and grid sizes. C++ (nvcc) only.
 *
 * Every launcher ends with GE2_CUDA_CHECK(launch, "kernel_name") after each
 * <<<>>> so a bad configuration surfaces at the op that caused it, with the
 * op and kernel in the message, instead of at some later synchronization.
 */
#ifndef GE2_KERNELS_CUDA_CHECK_H
#define GE2_KERNELS_CUDA_CHECK_H

#ifndef __CUDACC__
#error "kernels/cuda/check.h is for .cu files"
#endif

#include <cuda_runtime.h>

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The C headers declare functions without extern "C" of their own (ge2.h
 * aside); the system headers they pull in are included above first, so only
 * ge2's declarations get C linkage here. */
extern "C" {
#include "graph/error.h"
#include "graph/control.h"
#include "graph/ir.h"
}

/* Threads per block for the simple one-thread-per-element kernels. */
#define GE2_CUDA_THREADS 256
/* Grid-stride kernels never use more blocks than this: enough to fill any
 * current GPU several times over, few enough that a tiny tensor is not
 * spread over idle blocks. */
#define GE2_CUDA_MAX_BLOCKS 4096

static inline const char *ge2_cuda_op_name(const ge2_launch *launch)
{
    return launch->node ? ge2_op_name(launch->node->op) : "?";
}

static inline cudaStream_t ge2_cuda_stream(const ge2_launch *launch)
{
    return (cudaStream_t)launch->stream;
}

/* Blocks for a grid-stride loop over `work` items, `threads` per block. */
static inline unsigned ge2_cuda_blocks(int64_t work, int threads)
{
    int64_t blocks = (work + threads - 1) / threads;
    if (blocks < 1)
        blocks = 1;
    if (blocks > GE2_CUDA_MAX_BLOCKS)
        blocks = GE2_CUDA_MAX_BLOCKS;
    return (unsigned)blocks;
}

/* After a kernel launch: a launch error (bad configuration, no device, a
 * sticky fault from an earlier kernel) becomes GE2_ERR_CUDA naming the op. */
static inline ge2_status ge2_cuda_check_launch(const ge2_launch *launch, const char *kernel)
{
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess)
        return GE2_OK;
    return ge2_error(GE2_ERR_CUDA, "ge2_%s (node %d): CUDA kernel %s: %s (%s)", ge2_cuda_op_name(launch),
                     launch->node ? launch->node->id : -1, kernel, cudaGetErrorString(e), cudaGetErrorName(e));
}

/* For runtime calls that return a cudaError_t (cudaMemcpyAsync, ...). */
static inline ge2_status ge2_cuda_check_call(const ge2_launch *launch, cudaError_t e, const char *call)
{
    if (e == cudaSuccess)
        return GE2_OK;
    return ge2_error(GE2_ERR_CUDA, "ge2_%s (node %d): %s: %s (%s)", ge2_cuda_op_name(launch),
                     launch->node ? launch->node->id : -1, call, cudaGetErrorString(e), cudaGetErrorName(e));
}

#define GE2_CUDA_CHECK(launch, kernel) GE2_TRY(ge2_cuda_check_launch((launch), (kernel)))

/* The CUDA backend computes in f32 (f64 is a CPU gradient-check dtype);
 * inputs the op reads in bf16 (ge2_op_reads_bf16) and outputs it stores in
 * bf16 (ge2_op_stores_bf16) may be bf16 (the storage pass's). Inputs whose
 * bit is set in int_inputs must be i32 instead (labels). */
static inline ge2_status ge2_cuda_require_f32(const ge2_launch *launch, unsigned int_inputs)
{
    bool like1 = launch->node && (ge2_op_flags(launch->node->op) & GE2_OPF_LIKE1);
    for (int i = 0; i < launch->n_in; i++) {
        if (i == 1 && like1)
            continue; /* shape-only reference: never read */
        ge2_dtype want = (int_inputs >> i) & 1u ? GE2_I32 : GE2_F32;
        const bool read_bf16 = want == GE2_F32 && launch->in[i].dtype == GE2_BF16 && launch->node &&
                               ge2_op_reads_bf16(launch->node, i);
        if (launch->in[i].dtype != want && !read_bf16)
            return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_%s: input %d is %s; the CUDA kernel takes %s",
                             ge2_cuda_op_name(launch), i, ge2_dtype_name(launch->in[i].dtype), ge2_dtype_name(want));
    }
    for (int i = 0; i < launch->n_out; i++) {
        /* an output the op stores in bf16 (ge2_op_def.stores_bf16): its kernel rounds at the store */
        const bool stored_bf16 = launch->out[i].dtype == GE2_BF16 && launch->node && ge2_op_stores_bf16(launch->node, i);
        if (launch->out[i].dtype != GE2_F32 && !stored_bf16)
            return ge2_error(GE2_ERR_UNSUPPORTED, "ge2_%s: output %d is %s; the CUDA kernel takes f32",
                             ge2_cuda_op_name(launch), i, ge2_dtype_name(launch->out[i].dtype));
    }
    return GE2_OK;
}

/* Kernels that finish a reduction across blocks keep their scratch in the
 * control block; a launch without one is a program bug, reported not crashed. */
static inline ge2_status ge2_cuda_require_control(const ge2_launch *launch)
{
    if (launch->control)
        return GE2_OK;
    return ge2_error(GE2_ERR_STATE, "ge2_%s: CUDA kernel needs the control block (launch->control is NULL)",
                     ge2_cuda_op_name(launch));
}

static inline bool ge2_cuda_aligned16(const void *p)
{
    return ((uintptr_t)p & 15u) == 0;
}

#endif /* GE2_KERNELS_CUDA_CHECK_H */
