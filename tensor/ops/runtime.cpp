// Device runtime: which backend runs a device's ops, storage allocation and
// raw copies between devices.
#include "tensor/ops/runtime.h"

#include <cstdlib>
#include <cstring>

#include "kernels/cuda/allocator.h"
#include "kernels/cuda/device_check.h"
#include "kernels/cuda/host_allocator.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/stream.h"
#include "tensor/core/errors.h"
#include "tensor/ops/cuda.h"

namespace tandem {

namespace {

constexpr size_t kHostAlignment = 64;

void* host_alloc(size_t nbytes) {
  size_t rounded = (std::max<size_t>(nbytes, 1) + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
  void* p = std::aligned_alloc(kHostAlignment, rounded);
  if (p == nullptr) throw OutOfMemoryError(detail::str_cat("CPU out of memory: tried to allocate ", nbytes, " bytes"));
  return p;
}

}  // namespace

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
                   cuda::detail::unavailable_reason(),
                   "). Use the cpu device, or set TANDEM_EMULATE_CUDA=1 to emulate one");
      int index = device.has_index() ? device.index() : cuda::current_device();
      TANDEM_CHECK(index < count, DeviceError, op, ": invalid device '", device.str(), "': there ",
                   count == 1 ? "is " : "are ", count, " CUDA device", count == 1 ? "" : "s",
                   " (cuda:0 to cuda:", count - 1, ")");
      return Device(DeviceType::CUDA, index);
    }
  }
  return device;
}

void check_pinning_possible(const char* op) {
  TANDEM_CHECK(cuda::is_available(), DeviceError, op,
               ": pinned memory is page-locked host memory for fast copies to a GPU, and CUDA is not available (",
               cuda::detail::unavailable_reason(),
               "). Leave pin_memory off on this machine, or set TANDEM_EMULATE_CUDA=1 to emulate a device");
}

std::shared_ptr<Storage> allocate_storage(Device device, size_t nbytes, bool pinned) {
  switch (device.type()) {
    case DeviceType::CPU:
      if (pinned) {
        check_pinning_possible("pin_memory");
        return cuda::detail::allocate_pinned(nbytes);
      }
      return std::make_shared<Storage>(host_alloc(nbytes), nbytes, device, [](void* q) { std::free(q); });
    case DeviceType::CUDA:
      TANDEM_INTERNAL_ASSERT(device.has_index(), "allocate_storage needs a resolved device");
      return cuda::detail::allocate_device(device.index(), nbytes);
  }
  return nullptr;
}

namespace {

// The cuda device of a copy's stream, and the stream: the current one there.
cuda::detail::StreamRef copy_stream(Device d) { return cuda::detail::current_stream(d.index()); }

bool is_pinned(const Storage* s) { return s != nullptr && s->is_pinned(); }

// The host waits a copy_bytes makes, counted by device tag rather than by
// backend, so that an emulated device counts what a GPU waits for (below):
// between two cuda devices, for both; between the host and one, for it,
// unless the copy is asynchronous (host_pinned_async: non_blocking with the
// host side pinned); within one device, none (ordered on its stream).
void count_copy_waits(Device dst, Device src, bool host_pinned_async) {
  if (dst.is_cuda() && src.is_cuda()) {
    if (dst == src) return;
    cuda::detail::count_host_sync(src.index());
    cuda::detail::count_host_sync(dst.index());
  } else if (dst.is_cuda() || src.is_cuda()) {
    if (!host_pinned_async) cuda::detail::count_host_sync((dst.is_cuda() ? dst : src).index());
  }
}

// The copy itself, for copy_bytes.
void copy_bytes_unreported(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes,
                           bool non_blocking, const Storage* dst_storage, const Storage* src_storage) {
  bool dst_host = backend_of(dst_device) == Backend::CPU;
  bool src_host = backend_of(src_device) == Backend::CPU;
  using cuda::detail::CopyKind;
  if (dst_host && src_host) {
    std::memcpy(dst, src, nbytes);
    return;
  }
  if (!dst_host && !src_host && dst_device != src_device) {
    // Between two GPUs: both sides' queued work first, then a peer copy.
    cuda::detail::stream_synchronize(src_device.index(), copy_stream(src_device).handle);
    cuda::detail::stream_synchronize(dst_device.index(), copy_stream(dst_device).handle);
    cuda::detail::memcpy(dst, dst_device.index(), src, src_device.index(), nbytes, CopyKind::DeviceToDevice);
    return;
  }
  // Every copy that touches one GPU is queued on that device's current
  // stream, after the kernels that produced its source. It stays
  // asynchronous only when asked and when the host side is pinned: a
  // pageable buffer may be freed or reused as soon as we return.
  Device gpu_device = dst_host ? src_device : dst_device;
  cuda::detail::StreamRef stream = copy_stream(gpu_device);
  CopyKind kind = dst_host ? CopyKind::DeviceToHost : src_host ? CopyKind::HostToDevice : CopyKind::DeviceToDevice;
  cuda::detail::memcpy_async(dst, src, nbytes, kind, gpu_device.index(), stream.handle);
  if (kind == CopyKind::DeviceToDevice) return;  // ordered on the stream like any kernel
  const Storage* host = dst_host ? dst_storage : src_storage;
  bool async = non_blocking && host != nullptr && host->is_pinned();
  if (async) {
    cuda::detail::record_pinned_use(host->data(), stream);
    const Storage* device_side = dst_host ? src_storage : dst_storage;
    if (device_side != nullptr) cuda::detail::record_stream(gpu_device.index(), device_side->data(), stream);
  } else {
    cuda::detail::stream_synchronize(gpu_device.index(), stream.handle);
  }
}

}  // namespace

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes, bool non_blocking,
                const Storage* dst_storage, const Storage* src_storage) {
  if (nbytes == 0) return;
  const bool host_pinned_async = non_blocking && is_pinned(dst_device.is_cuda() ? src_storage : dst_storage);
  count_copy_waits(dst_device, src_device, host_pinned_async);
  copy_bytes_unreported(dst, dst_device, src, src_device, nbytes, non_blocking, dst_storage, src_storage);
  // A blocking copy out of a device has waited for it: an error a kernel
  // recorded there is reported now, before its values are used
  // (kernels/cuda/device_check.h). An upload carries nothing of the
  // device's back, and may run on a loader's thread: it reports nothing.
  if (!src_device.is_cuda() || dst_device == src_device || (host_pinned_async && !dst_device.is_cuda())) return;
  cuda::detail::throw_device_error(src_device.index(), "a blocking copy (.item(), .cpu(), .to(), to_vector)");
}

}  // namespace tandem
