// Streams of the cuda devices, as the kernels see them: which stream is
// current on each device for this thread, the default stream and a pool of
// created streams. Plain C++, in every build: on emulated devices a stream
// is only a name (work runs on the host, in order) and its handle is null.
#pragma once

#include <cstdint>

namespace tandem::gpu {

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

// This thread's current cuda device (0 until set), what "cuda" without an
// index means. On a real GPU, kernels launch under a guard for their
// tensor's device whatever this says.
int current_device();
void set_current_device(int device);

}  // namespace tandem::gpu
