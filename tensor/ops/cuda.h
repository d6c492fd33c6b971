// tandem::cuda: what the program can ask about and control on GPUs, like
// torch.cuda: devices, streams and events, and the caching allocator's
// memory statistics. With TANDEM_EMULATE_CUDA=N set, N emulated devices
// backed by host memory and the CPU kernels answer instead, and say so in
// their names; their streams are names only (work runs on the host, in
// order), and their memory goes through the same caching allocator, with
// TANDEM_EMULATE_CUDA_MEMORY as the capacity.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "kernels/cuda/stream.h"
#include "tensor/core/device.h"

namespace tandem::cuda {

struct DeviceProperties {
  std::string name;
  int major = 0;
  int minor = 0;
  size_t total_memory = 0;
  int multi_processor_count = 0;
  bool emulated = false;
};

bool is_available();
int device_count();
std::string get_device_name(int device = -1);
DeviceProperties get_device_properties(int device = -1);
// True when cuda devices are emulated on the host (TANDEM_EMULATE_CUDA).
bool is_emulated();
// True when the cuda devices are simulated GPUs: a -Dcuda=simulated build,
// whose devices run Tandem's CUDA kernels on the host (kernels/cuda/sim).
bool is_simulated();
// Whether this build of Tandem has the CUDA backend (real or simulated).
bool is_built();

// This thread's current device: what "cuda" without an index and device
// arguments of -1 mean. cuda:0 until set.
int current_device();
void set_device(int device);

// Waits for all work queued on device (-1: the current one), every stream.
void synchronize(int device = -1);

// How many times the host has waited for work queued on device (-1: the
// current one), since the program started, in every thread: a .item(), a
// copy to the cpu, an upload from pageable memory, synchronize() and
// Stream/Event synchronize(), an index op's bounds check (index_select,
// gather, scatter_add, embedding read a flag back), and the allocator's waits.
// A copy with non_blocking=true from or to pinned memory does not wait.
// Emulated devices count where a GPU would wait (but for the allocator's waits
// for other streams' work, which only a GPU has). Take the difference of two
// readings; memory_stats() has it as "num_host_syncs".
int64_t host_synchronizations(int device = -1);

class Event;

// A queue of GPU work on one device, as libtorch's CUDAStream. Streams come
// from a per-device pool and live as long as the program.
class Stream {
 public:
  Device device() const { return Device(DeviceType::CUDA, device_); }
  int device_index() const { return device_; }
  int id() const { return id_; }  // 0: the default stream
  // The cudaStream_t (null for the default stream and on emulated devices).
  void* handle() const { return handle_; }
  bool query() const;  // true when all queued work is done
  void synchronize() const;
  // Work queued on this stream after the call waits for event / for all
  // work queued on other until now.
  void wait_event(const Event& event) const;
  void wait_stream(const Stream& other) const;
  bool operator==(const Stream& o) const { return device_ == o.device_ && id_ == o.id_; }
  std::string str() const;  // "Stream(device=cuda:0, id=3)"

 private:
  friend Stream make_stream(int device, int id, void* handle);
  Stream(int device, int id, void* handle) : device_(device), id_(id), handle_(handle) {}
  int device_;
  int id_;
  void* handle_;
};

// This thread's current stream on device (-1: the current device); the
// default stream until changed. Kernels and copies for tensors on a device
// are queued on its current stream.
Stream current_stream(int device = -1);
Stream default_stream(int device = -1);
// A stream from the device's pool of 32, handed out round robin.
Stream get_stream_from_pool(int device = -1);
void set_current_stream(const Stream& stream);

// Makes stream current on its device, and its device the current device,
// for the guard's scope (libtorch's CUDAStreamGuard).
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream previous_stream_;
  int previous_device_;
};

// DeviceGuard: makes a device the current one for the guard's scope (and,
// on a GPU, the CUDA runtime's), the class the kernels launch under too:
// kernels/cuda/stream.h.

// A marker in a stream's work, as torch.cuda.Event: record it, wait for
// it, or time the work between two of them. Copies share the event.
class Event {
 public:
  explicit Event(bool enable_timing = false);
  // Marks the point reached by the work queued so far on stream (default:
  // the current stream of the current device).
  void record();
  void record(const Stream& stream);
  // Makes stream wait for the recorded point.
  void wait(const Stream& stream) const;
  bool query() const;  // true once the recorded work is done (or never recorded)
  void synchronize() const;
  // Milliseconds between this event and end; both recorded with timing on.
  float elapsed_time(const Event& end) const;
  bool is_recorded() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// ---- memory (the caching allocator of each device; -1: the current device)
// Bytes in tensors (blocks handed out, rounded to 512), and the peak.
size_t memory_allocated(int device = -1);
size_t max_memory_allocated(int device = -1);
// Bytes held from the device, in use or cached, and the peak.
size_t memory_reserved(int device = -1);
size_t max_memory_reserved(int device = -1);
void reset_peak_memory_stats(int device = -1);
// PyTorch's keys: "allocated_bytes.all.current", "reserved_bytes.large_pool.peak",
// "num_alloc_retries", "num_ooms", ...
std::map<std::string, int64_t> memory_stats(int device = -1);
// A readable table of the statistics, like torch.cuda.memory_summary().
std::string memory_summary(int device = -1);
// Gives cached blocks back to the device, so other programs can use them
// (memory_reserved drops; memory_allocated does not change).
void empty_cache();
// Free and total bytes of the device (the driver's view; emulated: the capacity).
std::pair<size_t, size_t> mem_get_info(int device = -1);

// Pinned host memory held by the pinned caching allocator.
struct HostMemoryStats {
  size_t allocated_bytes = 0;
  size_t reserved_bytes = 0;
  int64_t num_host_alloc = 0;
  int64_t num_host_free = 0;
};
HostMemoryStats host_memory_stats();
void host_empty_cache();

}  // namespace tandem::cuda
