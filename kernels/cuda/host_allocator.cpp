// The caching pinned host allocator (see host_allocator.h).
#include "kernels/cuda/host_allocator.h"

#include <bit>
#include <cstdlib>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "kernels/cuda/emulation.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/stream.h"
#include "tensor/core/errors.h"

namespace tandem::cuda::detail {

namespace {

constexpr size_t kMinPinnedBlock = 512;

struct HostBlock {
  size_t size = 0;
  bool allocated = false;
  std::vector<std::pair<int, void*>> events;  // (device, event) of copies still queued
};

class HostAllocator {
 public:
  void* allocate(size_t nbytes) {
    size_t size = std::bit_ceil(std::max(nbytes, kMinPinnedBlock));
    std::lock_guard<std::mutex> lock(mu_);
    process_events();
    auto& list = free_[size];
    void* ptr = nullptr;
    if (!list.empty()) {
      ptr = list.back();
      list.pop_back();
    } else {
      ptr = raw_allocate(size);
      if (ptr == nullptr) {
        release_cached();
        ptr = raw_allocate(size);
      }
      TANDEM_CHECK(ptr != nullptr, OutOfMemoryError, "pin_memory: cannot allocate ", nbytes,
                   " bytes of pinned host memory (", stats_.reserved_bytes,
                   " bytes of pinned memory are held by Tandem). Pin smaller batches, or use fewer loader workers");
      blocks_[ptr].size = size;
      stats_.reserved_bytes += static_cast<int64_t>(size);
      ++stats_.num_host_alloc;
    }
    HostBlock& b = blocks_[ptr];
    b.allocated = true;
    stats_.allocated_bytes += static_cast<int64_t>(b.size);
    ++stats_.allocations;
    return ptr;
  }

  void free(void* ptr) {
    std::lock_guard<std::mutex> lock(mu_);
    HostBlock& b = blocks_.at(ptr);
    b.allocated = false;
    stats_.allocated_bytes -= static_cast<int64_t>(b.size);
    --stats_.allocations;
    if (b.events.empty())
      free_[b.size].push_back(ptr);
    else
      pending_.push_back(ptr);
  }

  void record_use(void* ptr, StreamRef stream) {
    if (emulated_device_count() > 0) return;  // emulated copies are synchronous
    std::lock_guard<std::mutex> lock(mu_);
    auto it = blocks_.find(ptr);
    if (it == blocks_.end()) return;  // pinned by someone else (from_blob): not ours to track
    void* event = cuda::detail::event_create(stream.device, false);
    cuda::detail::event_record(stream.device, event, stream.handle);
    it->second.events.emplace_back(stream.device, event);
  }

  HostMemoryStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

  void empty_cache() {
    std::lock_guard<std::mutex> lock(mu_);
    process_events();
    release_cached();
  }

 private:
  static void* raw_allocate(size_t size) {
    if (emulated_device_count() > 0) return std::aligned_alloc(kMinPinnedBlock, size);
    try {
      return cuda::detail::malloc_pinned(size);
    } catch (const OutOfMemoryError&) {
      return nullptr;
    }
  }

  static void raw_free(void* ptr) {
    if (emulated_device_count() > 0)
      std::free(ptr);
    else
      cuda::detail::free_pinned(ptr);
  }

  // Blocks whose copies have all finished become reusable.
  void process_events() {
    for (auto it = pending_.begin(); it != pending_.end();) {
      HostBlock& b = blocks_.at(*it);
      std::erase_if(b.events, [](const std::pair<int, void*>& e) {
        if (!cuda::detail::event_query(e.second)) return false;
        cuda::detail::event_destroy(e.first, e.second);
        return true;
      });
      if (!b.events.empty()) {
        ++it;
        continue;
      }
      free_[b.size].push_back(*it);
      it = pending_.erase(it);
    }
  }

  void release_cached() {
    // cudaFreeHost waits for every device: one wait each, counted when
    // anything is given back (on emulated devices too, as a GPU would).
    bool any = false;
    for (const auto& entry : free_) any = any || !entry.second.empty();
    if (any)
      for (int d = 0; d < cuda::device_count(); ++d) cuda::detail::count_host_sync(d);
    for (auto& [size, list] : free_) {
      for (void* ptr : list) {
        raw_free(ptr);
        blocks_.erase(ptr);
        stats_.reserved_bytes -= static_cast<int64_t>(size);
        ++stats_.num_host_free;
      }
      list.clear();
    }
  }

  std::mutex mu_;
  std::unordered_map<void*, HostBlock> blocks_;
  std::map<size_t, std::vector<void*>> free_;  // by rounded size
  std::vector<void*> pending_;                 // freed, copies still queued
  HostMemoryStats stats_;
};

// Never destroyed: pinned storages freed during static destruction still find it.
HostAllocator& host_allocator() {
  static HostAllocator* a = new HostAllocator;
  return *a;
}

}  // namespace

std::shared_ptr<Storage> allocate_pinned(size_t nbytes) {
  HostAllocator& a = host_allocator();
  void* ptr = a.allocate(nbytes);
  return std::make_shared<Storage>(
      ptr, nbytes, Device(DeviceType::CPU), [&a](void* p) { a.free(p); }, true);
}

void record_pinned_use(void* ptr, StreamRef stream) { host_allocator().record_use(ptr, stream); }
HostMemoryStats host_memory_stats() { return host_allocator().stats(); }
void host_empty_cache() { host_allocator().empty_cache(); }

}  // namespace tandem::cuda::detail
