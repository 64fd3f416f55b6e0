/* GE2_HD: a function the CPU kernels and the CUDA kernels share, compiled
 * for both by nvcc (__host__ __device__) and as plain C by the C compiler. */
#ifndef GE2_GRAPH_HOST_DEVICE_H
#define GE2_GRAPH_HOST_DEVICE_H

#ifdef __CUDACC__
#define GE2_HD __host__ __device__
#else
#define GE2_HD
#endif

#endif /* GE2_GRAPH_HOST_DEVICE_H */
