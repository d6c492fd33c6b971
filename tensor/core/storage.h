// Storage: one allocation of device or host memory, shared by every view of
// it. It knows its device, its size, how to free itself, and whether it is
// pinned host memory.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>

#include "tensor/core/device.h"

namespace tandem {

class Storage {
 public:
  using Deleter = std::function<void(void*)>;

  Storage(void* data, size_t nbytes, Device device, Deleter deleter, bool pinned = false)
      : data_(data), nbytes_(nbytes), device_(device), deleter_(std::move(deleter)), pinned_(pinned) {}
  // A destructor must not throw: a deleter that fails (a CUDA call at exit,
  // after the runtime has shut down) becomes a warning on stderr.
  ~Storage() {
    if (!deleter_) return;
    try {
      deleter_(data_);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tandem: warning: freeing a %s storage failed: %s\n", device_.str().c_str(), e.what());
    }
  }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  bool is_pinned() const { return pinned_; }

  // Bumped by every in-place write; autograd compares it with what it saved.
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  void* data_;
  size_t nbytes_;
  Device device_;
  Deleter deleter_;
  bool pinned_;
  std::atomic<uint64_t> version_{0};
};

}  // namespace tandem
