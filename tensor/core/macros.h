// Portability macros shared by g++ and nvcc: the per-element math in
// kernels/*/functors is compiled by both, so it is marked host+device.
#pragma once

// TANDEM_CUDA_SOURCE: this file is CUDA source, compiled by nvcc or, in the
// simulated build (-Dcuda=simulated, TANDEM_CUDA_SIM), by the host compiler
// against kernels/cuda/sim.
#if defined(__CUDACC__) || TANDEM_CUDA_SIM
#define TANDEM_CUDA_SOURCE 1
#else
#define TANDEM_CUDA_SOURCE 0
#endif

#if defined(__CUDACC__)
#define TANDEM_HOST_DEVICE __host__ __device__
#define TANDEM_DEVICE_INLINE __device__ __forceinline__
#else
#define TANDEM_HOST_DEVICE
#define TANDEM_DEVICE_INLINE inline
#endif

#define TANDEM_HD_INLINE TANDEM_HOST_DEVICE inline

#if defined(__CUDACC__)
#define TANDEM_NOINLINE __noinline__
#else
#define TANDEM_NOINLINE __attribute__((noinline))
#endif
