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

// "cuda" means the current device (cuda::current_device()); checks the index exists.
Device resolve_device(Device device, const char* op = "to");

std::shared_ptr<Storage> allocate_storage(Device device, size_t nbytes, bool pinned = false);

// Throws DeviceError unless pinned memory can be had here (a real or an
// emulated GPU); op names the caller.
void check_pinning_possible(const char* op);

// Copies nbytes between any two devices. A copy that touches a GPU is queued
// on its current stream; it returns before the copy is done only when
// non_blocking is set and the host side is pinned memory (pass the storages
// so that the allocators can keep both alive for the copy). Host-only copies
// are plain memcpy.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes,
                bool non_blocking = false, const Storage* dst_storage = nullptr, const Storage* src_storage = nullptr);

}  // namespace tandem
