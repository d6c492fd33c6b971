// Device memory for cuda tensors: a caching allocator per device, on real
// GPUs (over cudaMalloc) and on emulated ones (over host memory, with
// TANDEM_EMULATE_CUDA_MEMORY as the capacity). Storages and kernel
// workspaces both come from here.
#pragma once

#include <cstddef>
#include <memory>

#include "tensor/core/storage.h"

namespace tandem::gpu {

// nbytes of memory on cuda:device for use on the current stream. Freeing
// the storage returns its block to the cache. Throws OutOfMemoryError.
std::shared_ptr<Storage> allocate_device(int device, size_t nbytes);

}  // namespace tandem::gpu
