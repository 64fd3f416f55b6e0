/* Prints ge2's version and whether CUDA is usable here: the first thing to run
 * on a new machine (`bazel run //examples:smoke`). Always exits 0 when it could
 * ask; a missing GPU is information, not an error. */
#include "kernels/cuda/smoke.h"

#include <stdio.h>
#include <stdlib.h>

#ifndef GE2_VERSION
#define GE2_VERSION "unknown"
#endif

int main(void)
{
    printf("ge2 %s\n", GE2_VERSION);
    char msg[256] = "";
    int count = 0;
    if (ge2_cuda_smoke_device_count(&count, msg, sizeof msg) != 0) {
        printf("CUDA: not available (%s)\n", msg);
        return EXIT_SUCCESS;
    }
    if (count == 0) {
        printf("CUDA: not available (no devices)\n");
        return EXIT_SUCCESS;
    }
    for (int d = 0; d < count; d++) {
        char name[256] = "";
        int major = 0, minor = 0;
        size_t bytes = 0;
        if (ge2_cuda_smoke_device_info(d, name, sizeof name, &major, &minor, &bytes, msg,
                                       sizeof msg) != 0) {
            printf("CUDA: device %d: %s\n", d, msg);
            continue;
        }
        printf("CUDA: device %d: %s, sm_%d%d, %.1f GiB\n", d, name, major, minor,
               (double)bytes / (1024.0 * 1024.0 * 1024.0));
    }
    return EXIT_SUCCESS;
}
