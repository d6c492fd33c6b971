// tandem::cuda: device queries, streams, events and memory statistics, over
// the CUDA layer (kernels/cuda) for real and emulated devices alike.
#include "tensor/ops/cuda.h"

#include <chrono>

#include "kernels/cuda/allocator.h"
#include "kernels/cuda/device_check.h"
#include "kernels/cuda/host_allocator.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/stream.h"
#include "tensor/core/errors.h"
#include "tensor/core/tensor.h"
#include "tensor/ops/factory.h"
#include "tensor/ops/runtime.h"

namespace tandem::cuda {

bool is_emulated() { return emulated_device_count() > 0; }
bool is_built() { return cuda::detail::compiled_with_cuda(); }
bool is_simulated() { return simulated_device_count() > 0; }

bool is_available() { return device_count() > 0; }

using cuda::detail::checked_device;

Stream make_stream(int device, int id, void* handle) { return Stream(device, id, handle); }

namespace {
Stream from_ref(cuda::detail::StreamRef r) { return make_stream(r.device, r.id, r.handle); }
}  // namespace

DeviceProperties get_device_properties(int device) {
  device = checked_device(device, "get_device_properties");
  if (is_emulated()) {
    return {"Tandem emulated CUDA device (host memory, CPU kernels)", 0, 0, emulated_memory_capacity(), 0, true};
  }
  auto p = cuda::detail::properties(device);
  return {p.name, p.major, p.minor, p.total_memory, p.multi_processor_count, false};
}

std::string get_device_name(int device) { return get_device_properties(device).name; }

void set_device(int device) { cuda::detail::set_current_device(checked_device(device, "set_device")); }

void synchronize(int device) {
  device = checked_device(device, "synchronize");
  cuda::detail::count_host_sync(device);
  if (!is_emulated()) cuda::detail::synchronize(device);
  cuda::detail::throw_device_error(device, "cuda::synchronize()");
}

int64_t host_synchronizations(int device) {
  return cuda::detail::host_sync_count(checked_device(device, "host_synchronizations"));
}

// ---------------------------------------------------------------- streams

bool Stream::query() const {
  const bool done = is_emulated() || cuda::detail::stream_query(device_, handle_);
  if (done) cuda::detail::throw_device_error(device_, "Stream::query()");
  return done;
}

void Stream::synchronize() const {
  cuda::detail::count_host_sync(device_);
  if (!is_emulated()) cuda::detail::stream_synchronize(device_, handle_);
  cuda::detail::throw_device_error(device_, "Stream::synchronize()");
}

void Stream::wait_event(const Event& event) const { event.wait(*this); }

void Stream::wait_stream(const Stream& other) const {
  if (other == *this) return;
  Event e;
  e.record(other);
  e.wait(*this);
}

std::string Stream::str() const { return tandem::detail::str_cat("Stream(device=cuda:", device_, ", id=", id_, ")"); }

Stream current_stream(int device) {
  return from_ref(cuda::detail::current_stream(checked_device(device, "current_stream")));
}
Stream default_stream(int device) {
  return from_ref(cuda::detail::default_stream(checked_device(device, "default_stream")));
}
Stream get_stream_from_pool(int device) {
  return from_ref(cuda::detail::stream_from_pool(checked_device(device, "get_stream_from_pool")));
}

void set_current_stream(const Stream& stream) {
  cuda::detail::set_current_stream({stream.device_index(), stream.id(), stream.handle()});
}

StreamGuard::StreamGuard(const Stream& stream)
    : previous_stream_(current_stream(stream.device_index())), previous_device_(cuda::current_device()) {
  set_current_stream(stream);
  cuda::detail::set_current_device(stream.device_index());
}

StreamGuard::~StreamGuard() {
  set_current_stream(previous_stream_);
  cuda::detail::set_current_device(previous_device_);
}

// ---------------------------------------------------------------- events

struct Event::Impl {
  bool timing = false;
  bool recorded = false;
  int device = -1;
  void* handle = nullptr;                           // cudaEvent_t, created at the first record
  std::chrono::steady_clock::time_point host_time;  // emulated devices
  ~Impl() {
    if (handle != nullptr) cuda::detail::event_destroy(device, handle);
  }
};

Event::Event(bool enable_timing) : impl_(std::make_shared<Impl>()) { impl_->timing = enable_timing; }

void Event::record() { record(current_stream()); }

void Event::record(const Stream& stream) {
  Impl& e = *impl_;
  TANDEM_CHECK(e.device == -1 || e.device == stream.device_index(), DeviceError, "Event.record: the event belongs to ",
               Device(DeviceType::CUDA, e.device).str(), " but the stream is on ", stream.device().str(),
               "; use one event per device");
  e.device = stream.device_index();
  e.recorded = true;
  if (is_emulated()) {
    e.host_time = std::chrono::steady_clock::now();
    return;
  }
  if (e.handle == nullptr) e.handle = cuda::detail::event_create(e.device, e.timing);
  cuda::detail::event_record(e.device, e.handle, stream.handle());
}

void Event::wait(const Stream& stream) const {
  if (!impl_->recorded || is_emulated()) return;
  cuda::detail::stream_wait_event(stream.device_index(), stream.handle(), impl_->handle);
}

bool Event::query() const {
  if (!impl_->recorded) return true;
  const bool done = is_emulated() || cuda::detail::event_query(impl_->handle);
  if (done) cuda::detail::throw_device_error(impl_->device, "Event::query()");
  return done;
}

void Event::synchronize() const {
  if (!impl_->recorded) return;  // nothing to wait for, as on a GPU
  cuda::detail::count_host_sync(impl_->device);
  if (!is_emulated()) cuda::detail::event_synchronize(impl_->handle);
  cuda::detail::throw_device_error(impl_->device, "Event::synchronize()");
}

bool Event::is_recorded() const { return impl_->recorded; }

float Event::elapsed_time(const Event& end) const {
  TANDEM_CHECK(impl_->timing && end.impl_->timing, ValueError,
               "elapsed_time: both events must be created with timing enabled (Event(/*enable_timing=*/true))");
  TANDEM_CHECK(impl_->recorded && end.impl_->recorded, ValueError,
               "elapsed_time: both events must be recorded before measuring the time between them");
  end.synchronize();  // waits for the end point rather than failing with "not ready" (counted on emulated devices too)
  if (is_emulated()) {
    return std::chrono::duration<float, std::milli>(end.impl_->host_time - impl_->host_time).count();
  }
  return cuda::detail::event_elapsed_ms(impl_->handle, end.impl_->handle);
}

// ---------------------------------------------------------------- memory

size_t memory_allocated(int device) {
  return static_cast<size_t>(
      cuda::detail::memory_stats(checked_device(device, "memory_allocated")).allocated_bytes[0].current);
}
size_t max_memory_allocated(int device) {
  return static_cast<size_t>(
      cuda::detail::memory_stats(checked_device(device, "max_memory_allocated")).allocated_bytes[0].peak);
}
size_t memory_reserved(int device) {
  return static_cast<size_t>(
      cuda::detail::memory_stats(checked_device(device, "memory_reserved")).reserved_bytes[0].current);
}
size_t max_memory_reserved(int device) {
  return static_cast<size_t>(
      cuda::detail::memory_stats(checked_device(device, "max_memory_reserved")).reserved_bytes[0].peak);
}
void reset_peak_memory_stats(int device) {
  cuda::detail::reset_peak_memory_stats(checked_device(device, "reset_peak_memory_stats"));
}
std::map<std::string, int64_t> memory_stats(int device) {
  return cuda::detail::memory_stats_map(checked_device(device, "memory_stats"));
}
std::string memory_summary(int device) {
  return cuda::detail::memory_summary(checked_device(device, "memory_summary"));
}

void empty_cache() {
  for (int d = 0; d < device_count(); ++d) cuda::detail::empty_cache(d);
}

std::pair<size_t, size_t> mem_get_info(int device) {
  size_t free_b = 0, total_b = 0;
  cuda::detail::mem_get_info(checked_device(device, "mem_get_info"), &free_b, &total_b);
  return {free_b, total_b};
}

HostMemoryStats host_memory_stats() {
  cuda::detail::HostMemoryStats s = cuda::detail::host_memory_stats();
  return {static_cast<size_t>(s.allocated_bytes), static_cast<size_t>(s.reserved_bytes), s.num_host_alloc,
          s.num_host_free};
}

void host_empty_cache() { cuda::detail::host_empty_cache(); }

}  // namespace tandem::cuda

namespace tandem {

Tensor Tensor::pin_memory() const {
  TANDEM_CHECK(defined(), ValueError, "pin_memory: the tensor is undefined");
  TANDEM_CHECK(is_cpu(), DeviceError, "pin_memory: only cpu tensors can be pinned; this tensor is on ", device().str(),
               " (GPU memory needs no pinning: pinned memory is host memory that GPUs copy from fast)");
  if (is_pinned()) return *this;
  check_pinning_possible("pin_memory");
  Tensor out = empty(sizes(), TensorOptions(dtype()).pinned_memory(true));
  out.set_origin(origin());
  out.copy_(*this);
  return out;
}

void Tensor::record_stream(const cuda::Stream& stream) const {
  TANDEM_CHECK(defined(), ValueError, "record_stream: the tensor is undefined");
  TANDEM_CHECK(is_cuda() && device().index() == stream.device_index(), DeviceError, "record_stream: the tensor is on ",
               device().str(), " but the stream is on ", stream.device().str());
  if (storage()->nbytes() == 0) return;
  cuda::detail::record_stream(stream.device_index(), storage()->data(),
                              {stream.device_index(), stream.id(), stream.handle()});
}

}  // namespace tandem
