// Programmatic dependent launch (sm_90), for ge2's own kernels that follow
// one another: a kernel launched with the attribute below starts launching
// before its predecessor ends; in it, ge2_pdl_wait() blocks until that
// predecessor has finished and its writes are visible (a no-op for an
// ordinary launch), and ge2_pdl_launch_dependents() lets its own successor
// start launching early. What a kernel does before ge2_pdl_wait() must not
// read what its predecessor writes. CUDA C++ only.
#ifndef GE2_KERNELS_CUDA_PDL_H
#define GE2_KERNELS_CUDA_PDL_H

#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

__device__ __forceinline__ void ge2_pdl_wait()
{
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
}

__device__ __forceinline__ void ge2_pdl_launch_dependents()
{
    asm volatile("griddepcontrol.launch_dependents;\n" ::);
}

// Adds the attribute to attrs[*n] when enabled.
static inline void ge2_cuda_pdl_attribute(cudaLaunchAttribute *attrs, unsigned *n, bool enabled)
{
    if (!enabled)
        return;
    memset(&attrs[*n], 0, sizeof attrs[*n]);
    attrs[*n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[*n].val.programmaticStreamSerializationAllowed = 1;
    (*n)++;
}

// A launch of grid x block on stream, with the attribute when enabled;
// attr: room for it, alive until the launch.
static inline cudaLaunchConfig_t ge2_cuda_pdl_config(dim3 grid, dim3 block, cudaStream_t stream,
                                                     cudaLaunchAttribute *attr, bool enabled)
{
    cudaLaunchConfig_t lc;
    memset(&lc, 0, sizeof lc);
    lc.gridDim = grid;
    lc.blockDim = block;
    lc.stream = stream;
    unsigned n = 0;
    ge2_cuda_pdl_attribute(attr, &n, enabled);
    lc.attrs = attr;
    lc.numAttrs = n;
    return lc;
}

#endif /* GE2_KERNELS_CUDA_PDL_H */
