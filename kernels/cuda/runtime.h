// The thin layer over the CUDA runtime that the rest of Tandem calls: device
// queries, raw allocation and copies. In a build without CUDA, stub.cpp
// implements it: queries answer "no devices", everything else throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tandem::cuda_runtime {

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
Properties properties(int device);
// Why device_count() is 0, for messages ("no CUDA driver found", ...).
std::string unavailable_reason();

void* malloc_device(int device, size_t nbytes);  // throws OutOfMemoryError / CudaError
void free_device(int device, void* ptr);
void* malloc_pinned(size_t nbytes);
void free_pinned(void* ptr);

enum class CopyKind { HostToDevice, DeviceToHost, DeviceToDevice };
// Synchronous copy (device-to-device between any two devices).
void memcpy(void* dst, int dst_device, const void* src, int src_device, size_t nbytes, CopyKind kind);
void synchronize(int device);

}  // namespace tandem::cuda_runtime
