// cuDNN handles per device and thread, and the error of a failed call.
#include "kernels/cuda/cudnn.h"

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "tensor/core/errors.h"

namespace tandem::gpu {

void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file, int line) {
  char detail[512] = {0};
  cudnnGetLastErrorString(detail, sizeof detail);
  throw CudaError(detail::str_cat("cuDNN error: ", cudnnGetErrorString(status), " (", static_cast<int>(status), ") in ",
                                  call, " at ", file, ":", line, detail[0] != 0 ? ": " : "", detail));
}

namespace {

// Handles are never destroyed (at exit that could run after the CUDA runtime
// is gone); a thread's handles go back to a pool per device when it ends, as
// the cuBLAS handles do (kernels/cuda/linalg.cu).
struct HandlePool {
  std::mutex mu;
  std::map<int, std::vector<cudnnHandle_t>> free;
};
HandlePool& handle_pool() {
  static HandlePool* pool = new HandlePool;
  return *pool;
}

struct ThreadHandles {
  std::vector<cudnnHandle_t> by_device;
  ~ThreadHandles() {
    HandlePool& pool = handle_pool();
    std::lock_guard<std::mutex> lock(pool.mu);
    for (size_t d = 0; d < by_device.size(); ++d)
      if (by_device[d] != nullptr) pool.free[static_cast<int>(d)].push_back(by_device[d]);
  }
};
thread_local ThreadHandles thread_handles;

cudnnHandle_t take_handle(int device) {
  {
    HandlePool& pool = handle_pool();
    std::lock_guard<std::mutex> lock(pool.mu);
    std::vector<cudnnHandle_t>& free = pool.free[device];
    if (!free.empty()) {
      cudnnHandle_t h = free.back();
      free.pop_back();
      return h;
    }
  }
  cudnnHandle_t h = nullptr;
  TANDEM_CUDNN_CHECK(cudnnCreate(&h));
  return h;
}

}  // namespace

cudnnHandle_t cudnn_handle(int device, cudaStream_t stream) {
  std::vector<cudnnHandle_t>& mine = thread_handles.by_device;
  if (mine.size() <= static_cast<size_t>(device)) mine.resize(static_cast<size_t>(device) + 1, nullptr);
  if (mine[device] == nullptr) mine[device] = take_handle(device);
  TANDEM_CUDNN_CHECK(cudnnSetStream(mine[device], stream));
  return mine[device];
}

}  // namespace tandem::gpu
