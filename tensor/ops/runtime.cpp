// Device runtime: emulation switch, storage allocation and raw copies.
#include "tensor/ops/runtime.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>

#include "kernels/cuda/allocator.h"
#include "kernels/cuda/runtime.h"
#include "tensor/core/errors.h"
#include "tensor/ops/cuda.h"

namespace tandem {

namespace {

constexpr size_t kHostAlignment = 64;
constexpr int kMaxEmulated = 16;

}  // namespace

namespace {

std::atomic<size_t> g_emulated_allocated[kMaxEmulated];

void* host_alloc(size_t nbytes) {
  size_t rounded = (std::max<size_t>(nbytes, 1) + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
  void* p = std::aligned_alloc(kHostAlignment, rounded);
  if (p == nullptr) throw OutOfMemoryError(detail::str_cat("CPU out of memory: tried to allocate ", nbytes, " bytes"));
  return p;
}

}  // namespace

size_t emulated_memory_allocated(int device) {
  TANDEM_INTERNAL_ASSERT(device >= 0 && device < kMaxEmulated);
  return g_emulated_allocated[device].load();
}

Backend backend_of(Device device) {
  switch (device.type()) {
    case DeviceType::CPU: return Backend::CPU;
    case DeviceType::CUDA: return emulated_device_count() > 0 ? Backend::CPU : Backend::CUDA;
  }
  return Backend::CPU;
}

Device resolve_device(Device device, const char* op) {
  switch (device.type()) {
    case DeviceType::CPU: return device;
    case DeviceType::CUDA: {
      int count = cuda::device_count();
      TANDEM_CHECK(count > 0, DeviceError, op, ": cannot use device '", device.str(), "': CUDA is not available (",
                   cuda_runtime::unavailable_reason(),
                   "). Use the cpu device, or set TANDEM_EMULATE_CUDA=1 to emulate one");
      int index = device.has_index() ? device.index() : 0;
      TANDEM_CHECK(index < count, DeviceError, op, ": invalid device '", device.str(), "': there ",
                   count == 1 ? "is " : "are ", count, " CUDA device", count == 1 ? "" : "s",
                   " (cuda:0 to cuda:", count - 1, ")");
      return Device(DeviceType::CUDA, index);
    }
  }
  return device;
}

std::shared_ptr<Storage> allocate_storage(Device device, size_t nbytes, bool pinned) {
  switch (device.type()) {
    case DeviceType::CPU: {
      if (pinned && !cuda::is_emulated()) {
        void* p = cuda_runtime::malloc_pinned(std::max<size_t>(nbytes, 1));
        return std::make_shared<Storage>(
            p, nbytes, device, [](void* q) { cuda_runtime::free_pinned(q); }, true);
      }
      // Emulated pinned memory is ordinary host memory that says it is pinned.
      return std::make_shared<Storage>(
          host_alloc(nbytes), nbytes, device, [](void* q) { std::free(q); }, pinned);
    }
    case DeviceType::CUDA: {
      TANDEM_INTERNAL_ASSERT(device.has_index(), "allocate_storage needs a resolved device");
      int index = device.index();
      if (backend_of(device) == Backend::CPU) {
        size_t cap = emulated_memory_capacity();
        size_t before = g_emulated_allocated[index].fetch_add(nbytes);
        if (cap != 0 && before + nbytes > cap) {
          g_emulated_allocated[index].fetch_sub(nbytes);
          throw OutOfMemoryError(
              detail::str_cat("CUDA out of memory. Tried to allocate ", nbytes, " bytes on ", device.str(),
                              " (emulated; capacity ", cap, " bytes set by TANDEM_EMULATE_CUDA_MEMORY, ", before,
                              " bytes allocated by Tandem). Use a smaller batch, run evaluation under NoGradGuard, "
                              "or free tensors you no longer need"));
        }
        void* p = host_alloc(nbytes);
        return std::make_shared<Storage>(p, nbytes, device, [index, nbytes](void* q) {
          std::free(q);
          g_emulated_allocated[index].fetch_sub(nbytes);
        });
      }
      return gpu::allocate_device(index, nbytes);
    }
  }
  return nullptr;
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) {
  if (nbytes == 0) return;
  bool dst_host = backend_of(dst_device) == Backend::CPU;
  bool src_host = backend_of(src_device) == Backend::CPU;
  using cuda_runtime::CopyKind;
  if (dst_host && src_host) {
    std::memcpy(dst, src, nbytes);
  } else if (src_host) {
    cuda_runtime::memcpy(dst, dst_device.index(), src, -1, nbytes, CopyKind::HostToDevice);
  } else if (dst_host) {
    cuda_runtime::memcpy(dst, -1, src, src_device.index(), nbytes, CopyKind::DeviceToHost);
  } else {
    cuda_runtime::memcpy(dst, dst_device.index(), src, src_device.index(), nbytes, CopyKind::DeviceToDevice);
  }
}

namespace cuda {

bool is_emulated() { return emulated_device_count() > 0; }
bool is_built() { return cuda_runtime::compiled_with_cuda(); }

int device_count() {
  if (is_emulated()) return emulated_device_count();
  return cuda_runtime::device_count();
}

bool is_available() { return device_count() > 0; }

DeviceProperties get_device_properties(int device) {
  int count = device_count();
  TANDEM_CHECK(device >= 0 && device < count, DeviceError, "get_device_properties: invalid device ", device, " (",
               count, " CUDA device", count == 1 ? "" : "s", " available)");
  if (is_emulated()) {
    return {"Tandem emulated CUDA device (host memory, CPU kernels)", 0, 0, emulated_memory_capacity(), 0, true};
  }
  auto p = cuda_runtime::properties(device);
  return {p.name, p.major, p.minor, p.total_memory, p.multi_processor_count, false};
}

std::string get_device_name(int device) { return get_device_properties(device).name; }

void synchronize(int device) {
  if (is_emulated()) return;
  Device d = resolve_device(Device(DeviceType::CUDA, device), "synchronize");
  cuda_runtime::synchronize(d.index());
}

}  // namespace cuda

}  // namespace tandem
