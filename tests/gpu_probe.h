/* Does this machine have a usable CUDA device? Asked without touching CUDA in
 * the calling process.
 *
 * Check forks every test, and a forked child cannot use a CUDA context its
 * parent created, so a GPU suite's main() must make no CUDA call. The probe
 * forks a child that queries the device count and reports back.
 */
#ifndef GE2_TESTS_GPU_PROBE_H
#define GE2_TESTS_GPU_PROBE_H

#include <stdbool.h>
#include <stddef.h>

/* true if at least one device is usable; otherwise why says why (e.g.
 * "cudaGetDeviceCount: CUDA driver version is insufficient ..."). */
bool ge2_test_gpu_probe(char *why, size_t why_size);

/* For main(): returns true with a device; otherwise prints
 * "<suite>: no CUDA device (<why>); skipping" as its one line. */
bool ge2_test_require_gpu(const char *suite);

#endif /* GE2_TESTS_GPU_PROBE_H */
