/* What the CUDA backend exposes beyond capture/backend.h: a test seam.
 *
 * The backend launches every node through this table (default
 * ge2_cuda_kernels). Tests point it at a copy with a kernel that breaks
 * stream capture, to exercise the eager fallback, which no real kernel
 * triggers. Set it before exec_prepare and restore it after exec_release.
 */
#ifndef GE2_CAPTURE_BACKEND_CUDA_H
#define GE2_CAPTURE_BACKEND_CUDA_H

#include "kernels/kernel.h"

extern const ge2_cuda_kernel *ge2_backend_cuda_kernels;

#endif /* GE2_CAPTURE_BACKEND_CUDA_H */
