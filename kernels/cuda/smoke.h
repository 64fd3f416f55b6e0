/* CUDA smoke launchers: the smallest end-to-end use of the toolkit (device
 * query, one kernel, one cuBLASLt SGEMM) so GPU staging and the toolchain can
 * be checked before any real kernel exists. Used by tests/gpu_smoke_test.c,
 * tests/gpu_probe.c and examples/smoke.c.
 *
 * All take and return host memory; each call creates and destroys its own CUDA
 * state. Return 0 on success, -1 on failure with a message in msg (which may be
 * NULL). Calling any of them initializes CUDA in the calling process.
 */
#ifndef GE2_KERNELS_CUDA_SMOKE_H
#define GE2_KERNELS_CUDA_SMOKE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* *count = number of CUDA devices (0 is not an error when the runtime says so). */
int ge2_cuda_smoke_device_count(int *count, char *msg, size_t msg_size);

/* Name, compute capability and memory of device `device`. */
int ge2_cuda_smoke_device_info(int device, char *name, size_t name_size, int *cc_major,
                               int *cc_minor, size_t *total_bytes, char *msg, size_t msg_size);

/* y = a * x + y on device 0, copied back into y. */
int ge2_cuda_smoke_axpy(int n, float a, const float *x /* [n] */, float *y /* [n] */, char *msg,
                        size_t msg_size);

/* c = a @ b in FP32 (TF32 off) through cuBLASLt on device 0; row-major. */
int ge2_cuda_smoke_sgemm(int m, int n, int k, const float *a /* [m, k] */,
                         const float *b /* [k, n] */, float *c /* [m, n] */, char *msg,
                         size_t msg_size);

#ifdef __cplusplus
}
#endif

#endif /* GE2_KERNELS_CUDA_SMOKE_H */
