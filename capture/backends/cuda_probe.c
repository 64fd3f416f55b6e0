/* Is there a CUDA device this process can use? Asked once, then cached.
 *
 * Any failure (no driver, no device, a driver older than the runtime) means
 * "no": the caller then runs on the CPU or reports GE2_ERR_NO_DEVICE. */
#include <pthread.h>

#include <cuda_runtime_api.h>

#include "ge2/extension.h" /* ge2_error */
#include "ge2/ge2.h"

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static bool probe_result;

static void probe(void)
{
    int count = 0;
    probe_result = cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
    /* A failed probe leaves a sticky-looking error for the next runtime call; clear it. */
    (void)cudaGetLastError();
}

bool ge2_cuda_available(void)
{
    pthread_once(&probe_once, probe);
    return probe_result;
}

ge2_status ge2_cuda_use_device(int index)
{
    int count = 0;
    if (!ge2_cuda_available() || cudaGetDeviceCount(&count) != cudaSuccess || count <= 0)
        return ge2_error(GE2_ERR_NO_DEVICE, "ge2_cuda_use_device: no usable CUDA device");
    int device = (index % count + count) % count;
    cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess)
        return ge2_error(GE2_ERR_CUDA, "ge2_cuda_use_device: cudaSetDevice(%d): %s", device, cudaGetErrorString(e));
    return GE2_OK;
}
