// Device memory for cuda tensors: a caching allocator per device, on real
// GPUs (over cudaMalloc) and on emulated ones (over host memory, with
// TANDEM_EMULATE_CUDA_MEMORY as the capacity), so that its logic runs and is
// tested everywhere. Storages and kernel workspaces both come from here.
//
// The scheme is PyTorch's: sizes round up to 512 bytes; requests up to 1 MiB
// are carved from 2 MiB segments, larger ones from 20 MiB segments (or their
// own, rounded to 2 MiB, past 10 MiB); a free block is split when the rest is
// worth keeping and merged with free neighbours when it comes back. Blocks
// belong to the stream they were allocated on and are reused only there, so
// freeing a block right after queueing work on it is safe; a block used on
// another stream (record_stream) waits for that stream's work before reuse.
// TANDEM_NO_CUDA_MEMORY_CACHING=1 turns caching off (each tensor its own
// exact-size cudaMalloc, freed at once) for compute-sanitizer runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "kernels/cuda/stream.h"
#include "tensor/core/storage.h"

namespace tandem::cuda::detail {

// nbytes of memory on cuda:device for use on its current stream. Freeing the
// storage returns its block to the cache. Out of memory: the cache is freed
// and the request retried once; then OutOfMemoryError says how much was
// asked, the capacity and free memory, what Tandem holds, and what to do.
std::shared_ptr<Storage> allocate_device(int device, size_t nbytes);

// Marks the block holding ptr as used by work queued on stream, so it is not
// reused before that work is done (libtorch's Tensor::record_stream).
void record_stream(int device, void* ptr, StreamRef stream);

// Gives every cached block that is wholly free back to the device.
void empty_cache(int device);

// TANDEM_NO_CUDA_MEMORY_CACHING set (and not empty or 0): every tensor gets
// its own exact-size allocation, given back at once; read once.
bool caching_disabled();

// One statistic as PyTorch keeps it.
struct Stat {
  int64_t current = 0, peak = 0, allocated = 0, freed = 0;
  void increase(int64_t n);
  void decrease(int64_t n);
};

// Per-pool statistics: index 0 all, 1 the small pool (<= 1 MiB), 2 the large.
struct MemoryStats {
  Stat allocated_bytes[3];                                       // blocks handed out (rounded sizes)
  Stat requested_bytes[3];                                       // what the callers asked for
  Stat reserved_bytes[3];                                        // segments obtained from the device
  Stat inactive_split_bytes[3];                                  // free parts of partly used segments
  Stat allocation[3], segment[3], active[3], inactive_split[3];  // counts
  int64_t num_alloc_retries = 0;                                 // device allocations retried after freeing the cache
  int64_t num_ooms = 0;                                          // OutOfMemoryErrors thrown
  int64_t num_device_alloc = 0;                                  // cudaMalloc (or host allocation when emulated) calls
  int64_t num_device_free = 0;
};

MemoryStats memory_stats(int device);
void reset_peak_memory_stats(int device);
// PyTorch's flat view: "allocated_bytes.all.current", "segment.large_pool.peak", ...
std::map<std::string, int64_t> memory_stats_map(int device);
std::string memory_summary(int device);
// Free and total bytes of the device as the driver (or the emulation) sees them.
void mem_get_info(int device, size_t* free_bytes, size_t* total_bytes);

}  // namespace tandem::cuda::detail
