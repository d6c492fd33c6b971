// Portability macros shared by g++ and nvcc: the per-element math in
// kernels/*/functors is compiled by both, so it is marked host+device.
#pragma once

#if defined(__CUDACC__)
#define TANDEM_HOST_DEVICE __host__ __device__
#define TANDEM_DEVICE_INLINE __device__ __forceinline__
#else
#define TANDEM_HOST_DEVICE
#define TANDEM_DEVICE_INLINE inline
#endif

#define TANDEM_HD_INLINE TANDEM_HOST_DEVICE inline
