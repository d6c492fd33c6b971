// The thin layer over the CUDA runtime that the rest of Tandem calls: device
// queries, raw allocation and copies. In a build without CUDA, stub.cpp
// implements it: queries answer "no devices", everything else throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tandem::cuda::detail {

struct Properties {
  std::string name;
  int major = 0;
  int minor = 0;
  size_t total_memory = 0;
  int multi_processor_count = 0;
};

bool compiled_with_cuda();
// Number of usable GPUs; 0 when there is no driver or no device (never throws).
int device_count();
// The runtime's current device for this thread, and setting it (cudaGetDevice,
// cudaSetDevice); the callers go through DeviceGuard (kernels/cuda/stream.h).
int get_device();
void set_device(int device);
Properties properties(int device);
// Why device_count() is 0, for messages ("no CUDA driver found", ...).
std::string unavailable_reason();

// cudaMalloc: nullptr when the device is out of memory (the caching
// allocator frees its cache and retries, then builds the message); other
// failures throw CudaError.
void* malloc_device(int device, size_t nbytes);
void free_device(int device, void* ptr);
// cudaMemGetInfo (the allocator's mem_get_info adds the emulation).
void driver_mem_get_info(int device, size_t* free_bytes, size_t* total_bytes);
void* malloc_pinned(size_t nbytes);
void free_pinned(void* ptr);

enum class CopyKind { HostToDevice, DeviceToHost, DeviceToDevice };
// Synchronous copy (device-to-device between any two devices).
void memcpy(void* dst, int dst_device, const void* src, int src_device, size_t nbytes, CopyKind kind);
void synchronize(int device);

// Streams and events; handles are cudaStream_t and cudaEvent_t.
void* stream_create(int device);  // a non-blocking stream
void stream_synchronize(int device, void* stream);
bool stream_query(int device, void* stream);  // true when all its work is done
void stream_wait_event(int device, void* stream, void* event);
void* event_create(int device, bool timing);
void event_destroy(int device, void* event);
void event_record(int device, void* event, void* stream);
void event_synchronize(void* event);
bool event_query(void* event);
float event_elapsed_ms(void* start, void* end);
// Asynchronous copy on stream (device is the one that owns the stream).
void memcpy_async(void* dst, const void* src, size_t nbytes, CopyKind kind, int device, void* stream);

}  // namespace tandem::cuda::detail
