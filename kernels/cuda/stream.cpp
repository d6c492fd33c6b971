// The current device and DeviceGuard; current streams per thread and device,
// the default stream and the pool.
#include "kernels/cuda/stream.h"

#include <array>
#include <atomic>
#include <mutex>
#include <vector>

#include "kernels/cuda/emulation.h"
#include "kernels/cuda/runtime.h"
#include "tensor/core/errors.h"

namespace tandem::cuda {

namespace detail {

namespace {

constexpr int kMaxDevices = 64;

struct Pool {
  std::once_flag created;
  std::array<void*, kStreamPoolSize> handles{};
  std::atomic<unsigned> next{0};
};

Pool& pool(int device) {
  static std::array<Pool, kMaxDevices> pools;
  TANDEM_INTERNAL_ASSERT(device >= 0 && device < kMaxDevices, "device index ", device);
  return pools[device];
}

// The current stream id per device; 0, the default stream, until set.
thread_local std::array<int, kMaxDevices> t_current_id = [] {
  std::array<int, kMaxDevices> a;
  a.fill(0);
  return a;
}();
thread_local int t_current_device = 0;

void* handle_of(int device, int id) {
  if (id == 0 || emulated_device_count() > 0) return nullptr;
  Pool& p = pool(device);
  std::call_once(p.created, [&] {
    for (void*& h : p.handles) h = stream_create(device);
  });
  return p.handles[id - 1];
}

std::array<std::atomic<int64_t>, kMaxDevices> g_host_syncs{};

}  // namespace

void count_host_sync(int device) {
  TANDEM_INTERNAL_ASSERT(device >= 0 && device < kMaxDevices, "device index ", device);
  g_host_syncs[device].fetch_add(1, std::memory_order_relaxed);
}

int64_t host_sync_count(int device) {
  TANDEM_INTERNAL_ASSERT(device >= 0 && device < kMaxDevices, "device index ", device);
  return g_host_syncs[device].load(std::memory_order_relaxed);
}

StreamRef default_stream(int device) { return {device, 0, nullptr}; }

StreamRef stream_from_pool(int device) {
  int id = 1 + static_cast<int>(pool(device).next.fetch_add(1) % kStreamPoolSize);
  return {device, id, handle_of(device, id)};
}

StreamRef current_stream(int device) {
  TANDEM_INTERNAL_ASSERT(device >= 0 && device < kMaxDevices, "device index ", device);
  int id = t_current_id[device];
  return {device, id, handle_of(device, id)};
}

void set_current_stream(StreamRef stream) {
  TANDEM_INTERNAL_ASSERT(stream.device >= 0 && stream.device < kMaxDevices, "device index ", stream.device);
  t_current_id[stream.device] = stream.id;
}

void set_current_device(int device) { t_current_device = device; }

int checked_device(int device, const char* op) {
  const int count = cuda::device_count();  // not the runtime's detail::device_count()
  TANDEM_CHECK(count > 0, DeviceError, op, ": CUDA is not available (", unavailable_reason(),
               "). Use the cpu device, or set TANDEM_EMULATE_CUDA=1 to emulate one");
  if (device == -1) device = current_device();
  TANDEM_CHECK(device >= 0 && device < count, DeviceError, op, ": invalid device ", device, " (there ",
               count == 1 ? "is " : "are ", count, " CUDA device", count == 1 ? "" : "s",
               ", cuda:0 to cuda:", count - 1, ")");
  return device;
}

}  // namespace detail

int current_device() { return detail::t_current_device; }

int device_count() {
  if (emulated_device_count() > 0) return emulated_device_count();
  // Only a count that was read is kept: a failed query (no driver yet) is
  // asked again, and its reason stays the runtime's words of now.
  static std::atomic<int> cached{-1};
  int n = cached.load(std::memory_order_relaxed);
  if (n < 0) {
    n = detail::device_count();
    if (n > 0) cached.store(n, std::memory_order_relaxed);
  }
  return n;
}

DeviceGuard::DeviceGuard(int device) : previous_(current_device()) {
  device = detail::checked_device(device, "DeviceGuard");
  if (emulated_device_count() == 0) {
    // (checked_device found a device, so the runtime is there.) The runtime's
    // device is read, not assumed to be previous_: a cuBLAS or user call may
    // have set it. It is switched first: if that throws, nothing has changed.
    const int runtime = detail::get_device();
    if (runtime != device) detail::set_device(device);
    previous_runtime_ = runtime;
  }
  detail::set_current_device(device);
}

DeviceGuard::~DeviceGuard() {
  detail::set_current_device(previous_);
  if (previous_runtime_ < 0) return;
  try {
    if (detail::get_device() != previous_runtime_) detail::set_device(previous_runtime_);
  } catch (...) {
    // A destructor cannot throw. The runtime stays on the guard's device,
    // which every launch guards for itself anyway.
  }
}

}  // namespace tandem::cuda
