// Pinned (page-locked) host memory for cpu tensors that feed a GPU: a
// caching allocator, like PyTorch's host allocator. Sizes round up to a
// power of two; a freed block is reused for the next request of its size,
// but not before the asynchronous copies queued on it have finished (each
// records its stream with record_pinned_use). On emulated devices the
// blocks are ordinary host memory that says it is pinned.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/cuda/stream.h"
#include "tensor/core/storage.h"

namespace tandem::cuda::detail {

// A cpu storage of nbytes in pinned memory. Throws OutOfMemoryError.
std::shared_ptr<Storage> allocate_pinned(size_t nbytes);

// ptr (a pinned storage's data) is read or written by a copy queued on
// stream: its block waits for that copy before being reused.
void record_pinned_use(void* ptr, StreamRef stream);

struct HostMemoryStats {
  int64_t allocated_bytes = 0;  // blocks in use (rounded sizes)
  int64_t reserved_bytes = 0;   // pinned memory held, in use or cached
  int64_t allocations = 0;      // blocks in use
  int64_t num_host_alloc = 0;   // cudaHostAlloc calls
  int64_t num_host_free = 0;
};
HostMemoryStats host_memory_stats();
// Frees every cached pinned block whose copies are done.
void host_empty_cache();

}  // namespace tandem::cuda::detail
