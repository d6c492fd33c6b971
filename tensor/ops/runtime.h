// Device runtime inside Tandem: which backend runs a device's ops, the
// emulation switch, memory for storages, and raw copies between devices.
#pragma once

#include <cstddef>
#include <memory>

#include "kernels/cuda/emulation.h"
#include "tensor/core/device.h"
#include "tensor/core/storage.h"

namespace tandem {

// Which kernels compute for a device: emulated cuda devices use the CPU ones.
enum class Backend : int8_t { CPU, CUDA };
Backend backend_of(Device device);

// "cuda" means the current device, cuda:0 for now; checks the index exists.
Device resolve_device(Device device, const char* op = "to");

std::shared_ptr<Storage> allocate_storage(Device device, size_t nbytes, bool pinned = false);

// Bytes held by live storages on an emulated device (the caching allocator of
// the CUDA issue replaces this with its statistics).
size_t emulated_memory_allocated(int device);

// Copies nbytes between any two devices; host-side memory for cpu and
// emulated devices, the CUDA runtime otherwise. Synchronous.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes);

}  // namespace tandem
