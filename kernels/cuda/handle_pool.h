// Library handles (cuBLAS, cuDNN) per thread and device. A thread makes its
// handle for a device on first use; when the thread ends, its handles go back
// to a pool per device that later threads take from, so that threads that
// come and go reuse them. Handles are never destroyed: at exit that could run
// after the CUDA runtime is gone.
#pragma once

#include <map>
#include <mutex>
#include <vector>

namespace tandem::cuda {

// H: a pointer-like handle type (null when absent). Each H is used with one
// create function, which makes a handle for the current device.
template <typename H>
struct HandlePool {
  std::mutex mu;
  std::map<int, std::vector<H>> free;
  static HandlePool& get() {
    static HandlePool* pool = new HandlePool;
    return *pool;
  }
};

template <typename H, typename Create>
H thread_handle(int device, const Create& create) {
  struct ThreadHandles {
    std::vector<H> by_device;
    ~ThreadHandles() {
      HandlePool<H>& pool = HandlePool<H>::get();
      std::lock_guard<std::mutex> lock(pool.mu);
      for (size_t d = 0; d < by_device.size(); ++d)
        if (by_device[d] != nullptr) pool.free[static_cast<int>(d)].push_back(by_device[d]);
    }
  };
  thread_local ThreadHandles mine;
  if (mine.by_device.size() <= static_cast<size_t>(device)) mine.by_device.resize(static_cast<size_t>(device) + 1);
  H& h = mine.by_device[static_cast<size_t>(device)];
  if (h != nullptr) return h;
  {
    HandlePool<H>& pool = HandlePool<H>::get();
    std::lock_guard<std::mutex> lock(pool.mu);
    std::vector<H>& free = pool.free[device];
    if (!free.empty()) {
      h = free.back();
      free.pop_back();
      return h;
    }
  }
  h = create();
  return h;
}

}  // namespace tandem::cuda
