// The current cuda device and stream, as the kernels see them: this thread's
// current device, the device count, the one DeviceGuard, and per device the
// current stream, the default stream and a pool of created streams. Plain
// C++, in every build: on emulated devices a stream is only a name (work runs
// on the host, in order) and its handle is null.
#pragma once

#include <cstdint>

namespace tandem::cuda {

namespace detail {

// Created streams per device, handed out round robin like libtorch's pool;
// they live as long as the program, so a stream is never invalid.
inline constexpr int kStreamPoolSize = 32;

struct StreamRef {
  int device = 0;
  int id = 0;              // 0: the default stream; 1..kStreamPoolSize: the pool
  void* handle = nullptr;  // cudaStream_t; null for the default stream and when emulated
  bool operator==(const StreamRef&) const = default;
};

StreamRef default_stream(int device);
StreamRef stream_from_pool(int device);
// This thread's current stream on device (the default stream until set).
StreamRef current_stream(int device);
void set_current_stream(StreamRef stream);

// Host synchronisations: each time the host waits for work queued on a cuda
// device, counted per device, over the program's life (all threads). Every
// place that waits calls count_host_sync for each device it waits for: the
// blocking copies (tensor/ops/runtime.cpp: .item(), .to(cpu), pageable
// uploads), the explicit waits (cuda::synchronize, Stream and Event
// synchronize) and the allocator's; and once per device, the zeroing of its
// error record for the index checks (kernels/cuda/device_check.h).
// Emulated devices count where a GPU would wait, except the allocator's
// waits for other streams' work (emulated streams record no uses):
// docs/architecture.md. cuda::host_synchronizations() reads it.
void count_host_sync(int device);
int64_t host_sync_count(int device);

// Sets this thread's current cuda device, unchecked (DeviceGuard and
// cuda::set_device check it).
void set_current_device(int device);
// device, or the current device for -1, checked to exist: a DeviceError
// naming op when it does not (or when there is no cuda device at all).
int checked_device(int device, const char* op);

}  // namespace detail

// These two are tensor/ops/cuda.h's, defined here, where the kernels can
// call them. This thread's current cuda device (0 until set), what "cuda"
// without an index means; on a GPU, kernels launch under a guard for their
// tensor's device whatever this says.
int current_device();
// The number of cuda devices: the emulated ones when emulating, else the
// CUDA runtime's (real or simulated GPUs), read once.
int device_count();

// Makes device the current cuda device for the guard's scope, and the
// previous one current again after: this thread's current device (above),
// and on a GPU (real or simulated) the CUDA runtime's, on which kernels
// launch and cuBLAS and cuDNN work. One class for both: the public guard
// (cuda::DeviceGuard) and every kernel launcher. A device that does not exist
// is a DeviceError.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_;
  int previous_runtime_ = -1;  // the runtime's device before, or -1 on emulated devices
};

}  // namespace tandem::cuda
