// Current streams per thread and device, the default stream and the pool.
#include "kernels/cuda/stream.h"

#include <array>
#include <atomic>
#include <mutex>
#include <vector>

#include "kernels/cuda/emulation.h"
#include "kernels/cuda/runtime.h"
#include "tensor/core/errors.h"

namespace tandem::gpu {

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
    for (void*& h : p.handles) h = cuda_runtime::stream_create(device);
  });
  return p.handles[id - 1];
}

}  // namespace

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

int current_device() { return t_current_device; }
void set_current_device(int device) { t_current_device = device; }

}  // namespace tandem::gpu
