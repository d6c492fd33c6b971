// Deferred device checks (kernels/cuda/device_check.h): the records per
// device, the host's report, and the errors' words.
#include "kernels/cuda/device_check.h"

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "kernels/cuda/emulation.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/stream.h"
#include "tensor/core/errors.h"

namespace tandem::cuda::detail {

namespace {

constexpr int kMaxDevices = 64;

struct Slot {
  std::once_flag made;
  std::atomic<DeviceCheckRecord*> record{nullptr};
  unsigned long long* claim = nullptr;  // null on emulated devices
  std::mutex mutex;                     // the host's writers: emulated reports and the report itself
};

Slot& slot(int device) {
  static std::array<Slot, kMaxDevices> slots;
  TANDEM_INTERNAL_ASSERT(device >= 0 && device < kMaxDevices, "device index ", device);
  return slots[device];
}

// The record of device, made on first use; it lives as long as the program.
Slot& made_slot(int device) {
  Slot& s = slot(device);
  std::call_once(s.made, [&] {
    DeviceCheckRecord* r = nullptr;
    if (emulated_device_count() > 0) {
      r = new DeviceCheckRecord{};
    } else {
      r = static_cast<DeviceCheckRecord*>(malloc_pinned(sizeof(DeviceCheckRecord)));
      std::memset(static_cast<void*>(r), 0, sizeof(DeviceCheckRecord));
      auto* claim = static_cast<unsigned long long*>(malloc_device(device, sizeof(unsigned long long)));
      TANDEM_CHECK(claim != nullptr, OutOfMemoryError, "CUDA out of memory on cuda:", device,
                   ": could not allocate the 8 bytes of its error record");
      const unsigned long long zero = 0;
      // A copy from pageable memory returns once staged, and the streams do
      // not wait for the legacy one: wait for the device, once per device.
      count_host_sync(device);
      memcpy(claim, device, &zero, -1, sizeof(zero), CopyKind::HostToDevice);
      synchronize(device);
      s.claim = claim;
    }
    r->generation = 1;
    s.record.store(r, std::memory_order_release);
  });
  return s;
}

thread_local const char* t_class_target_op = nullptr;
thread_local int64_t t_class_target_ignore = 0;

std::string check_message(const DeviceCheck& c, int64_t value) {
  switch (static_cast<CheckKind>(c.kind)) {
    case CheckKind::Index:
      return ::tandem::detail::str_cat(c.name, "(): index ", value, " is out of bounds for dimension ", c.dim,
                                       " with size ", c.size);
    case CheckKind::Embedding:
      return ::tandem::detail::str_cat("embedding(): index out of range in self (index ", value, " of a table of ",
                                       c.size, " rows, num_embeddings; valid indices are 0 to ", c.size - 1, ")");
    case CheckKind::EmbeddingBackward:
      return ::tandem::detail::str_cat("embedding_backward(): index out of range in self (index ", value,
                                       " of a table of ", c.size, " rows, num_weights; valid indices are 0 to ",
                                       c.size - 1, "; pass the num_weights of the forward's table)");
    case CheckKind::ClassTarget:
      return ::tandem::detail::str_cat("Target ", value, " is out of bounds. (", c.name,
                                       ": class indices must lie in [0, ", c.size, ") for an input with ", c.size,
                                       " classes, or equal ignore_index=", c.extra, ")");
    case CheckKind::None: break;
  }
  TANDEM_INTERNAL_ASSERT(false, "device check of unknown kind ", c.kind);
}

[[noreturn]] void throw_check_error(const DeviceCheck& check, int64_t value, const char* suffix = "") {
  throw IndexError(check_message(check, value) + suffix);
}

}  // namespace

bool sync_checks() {
  static const bool on = [] {
    const char* v = std::getenv("TANDEM_CUDA_SYNC_CHECKS");
    if (v == nullptr || *v == '\0' || std::strcmp(v, "0") == 0) return false;
    TANDEM_CHECK(std::strcmp(v, "1") == 0, ValueError, "TANDEM_CUDA_SYNC_CHECKS must be 0 or 1, got '", v, "'");
    return true;
  }();
  return on;
}

namespace {

// What a check says, without its record: the ClassTargetScope applied.
DeviceCheck describe(CheckKind kind, const char* name, int64_t dim, int64_t size) {
  DeviceCheck c;
  c.kind = static_cast<uint32_t>(kind);
  c.dim = static_cast<int32_t>(dim);
  c.size = size;
  c.name = name;
  if (kind == CheckKind::Index && t_class_target_op != nullptr) {
    c.kind = static_cast<uint32_t>(CheckKind::ClassTarget);
    c.name = t_class_target_op;
    c.extra = t_class_target_ignore;
  }
  return c;
}

}  // namespace

DeviceCheck device_check(int device, CheckKind kind, const char* name, int64_t dim, int64_t size) {
  static_cast<void>(sync_checks());  // a bad TANDEM_CUDA_SYNC_CHECKS is refused before the launch
  Slot& s = made_slot(device);
  DeviceCheck c = describe(kind, name, dim, size);
  c.record = s.record.load(std::memory_order_relaxed);
  c.claim = s.claim;
  return c;
}

void found_bad_value(int cuda_device, CheckKind kind, const char* name, int64_t dim, int64_t size, int64_t value) {
  if (cuda_device < 0) throw_check_error(describe(kind, name, dim, size), value);
  const DeviceCheck check = device_check(cuda_device, kind, name, dim, size);
  Slot& s = slot(cuda_device);
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    DeviceCheckRecord* r = check.record;
    if (std::atomic_ref<uint32_t>(r->kind).load(std::memory_order_acquire) == 0) {
      r->dim = check.dim;
      r->value = value;
      r->size = check.size;
      r->extra = check.extra;
      r->name = check.name;
      std::atomic_ref<uint32_t>(r->kind).store(check.kind, std::memory_order_release);
    }
  }
  if (sync_checks()) throw_device_error(cuda_device, check.name);
}

void throw_device_error(int device, const char* where) {
  Slot& s = slot(device);
  DeviceCheckRecord* r = s.record.load(std::memory_order_acquire);
  if (r == nullptr || std::atomic_ref<uint32_t>(r->kind).load(std::memory_order_acquire) == 0) return;
  DeviceCheck c;
  int64_t value = 0;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (std::atomic_ref<uint32_t>(r->kind).load(std::memory_order_acquire) == 0) return;  // another thread reported it
    c.kind = r->kind;
    c.dim = r->dim;
    c.size = r->size;
    c.extra = r->extra;
    c.name = r->name;
    value = r->value;
    std::atomic_ref<uint32_t>(r->kind).store(0, std::memory_order_relaxed);
    // Kernels that find an error from now on claim the next generation.
    std::atomic_ref<unsigned long long>(r->generation).fetch_add(1, std::memory_order_release);
  }
  const std::string suffix =
      sync_checks() ? ::tandem::detail::str_cat(" [found by a kernel on cuda:", device,
                                                ", reported at the op: TANDEM_CUDA_SYNC_CHECKS=1]")
                    : ::tandem::detail::str_cat(" [found by a kernel on cuda:", device,
                                                ", reported at the next wait for the device: ", where,
                                                "; set TANDEM_CUDA_SYNC_CHECKS=1 to report it at the op that made it]");
  throw_check_error(c, value, suffix.c_str());
}

ClassTargetScope::ClassTargetScope(const char* op, int64_t ignore_index)
    : previous_op_(t_class_target_op), previous_ignore_(t_class_target_ignore) {
  t_class_target_op = op;
  t_class_target_ignore = ignore_index;
}

ClassTargetScope::~ClassTargetScope() {
  t_class_target_op = previous_op_;
  t_class_target_ignore = previous_ignore_;
}

}  // namespace tandem::cuda::detail
