// What every .cu launcher uses: the stream to launch on for a tensor, a
// guard that makes the tensor's device current, and grid arithmetic.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/check.h"
#include "kernels/cuda/stream.h"
#include "tensor/core/tensor.h"

namespace tandem::gpu {

// Makes `device` the CUDA runtime's current device for the guard's scope.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// The current stream of t's device, on which every kernel for t launches.
inline cudaStream_t stream_of(const Tensor& t) {
  return static_cast<cudaStream_t>(current_stream(t.device().index()).handle);
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Multiprocessor count of a device (cached), to size grid-stride launches.
int multiprocessor_count(int device);

}  // namespace tandem::gpu
