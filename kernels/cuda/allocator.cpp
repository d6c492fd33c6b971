// Device memory for cuda tensors (interim: direct allocation; the caching
// allocator replaces this).
#include "kernels/cuda/allocator.h"

#include <atomic>
#include <cstdlib>

#include "kernels/cuda/emulation.h"
#include "kernels/cuda/runtime.h"
#include "tensor/core/errors.h"

namespace tandem::gpu {

std::shared_ptr<Storage> allocate_device(int device, size_t nbytes) {
  Device d(DeviceType::CUDA, device);
  if (emulated_device_count() > 0) {
    void* p = std::aligned_alloc(64, (std::max<size_t>(nbytes, 1) + 63) / 64 * 64);
    if (p == nullptr) throw OutOfMemoryError("out of host memory");
    return std::make_shared<Storage>(p, nbytes, d, [](void* q) { std::free(q); });
  }
  void* p = cuda_runtime::malloc_device(device, std::max<size_t>(nbytes, 1));
  if (p == nullptr) throw OutOfMemoryError(detail::str_cat("CUDA out of memory. Tried to allocate ", nbytes, " bytes"));
  return std::make_shared<Storage>(p, nbytes, d, [device](void* q) { cuda_runtime::free_device(device, q); });
}

}  // namespace tandem::gpu
