// The simulated CUDA runtime: devices with an H200's properties, device and
// pinned memory, and streams as queues that run only when something waits
// for them (README.md says which calls do). One mutex guards it all, and the
// work of a stream runs on the host thread that forced it.
#include "kernels/cuda/sim/runtime.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/cuda/emulation.h"
#include "kernels/cuda/sim/asan.h"
#include "kernels/cuda/sim/hooks.h"
#include "kernels/cuda/sim/scheduler.h"
#include "tensor/core/errors.h"

struct CUstream_st {
  int device = 0;
  bool legacy = false;  // the device's null stream
  std::deque<std::function<void()>> queue;
  uint64_t queued = 0;    // operations ever queued
  uint64_t executed = 0;  // operations taken from the queue
  bool destroyed = false;
};

namespace tandem::sim {
namespace {

struct EventState {
  bool timing = true;
  bool recorded = false;
  CUstream_st* stream = nullptr;
  uint64_t position = 0;  // done once stream->executed reaches it
  uint64_t generation = 0;
  double time_ms = 0;  // host clock when the record ran
  int device = 0;
};

}  // namespace
}  // namespace tandem::sim

struct CUevent_st {
  std::shared_ptr<tandem::sim::EventState> state = std::make_shared<tandem::sim::EventState>();
};

namespace tandem::sim {
namespace {

struct Allocation {
  size_t size = 0;       // rounded
  size_t requested = 0;  // what cudaMalloc was asked for
  int device = 0;
  bool managed = false;  // carved by the caching allocator into blocks
};

struct Device {
  size_t capacity = 0;
  size_t used = 0;
  std::unique_ptr<CUstream_st> legacy;
  std::vector<CUstream_st*> streams;  // every live stream, the legacy one first
  cudaError_t pending_error = cudaSuccess;
  std::string pending_message;
};

struct Sim {
  std::recursive_mutex mu;
  std::vector<Device> devices;
  std::map<uintptr_t, Allocation> device_memory;  // by base address
  std::map<uintptr_t, size_t> pinned;
  std::map<uintptr_t, size_t> blocks_in_use;    // the caching allocator's, with their requested sizes
  std::map<const void*, int> max_dynamic_smem;  // cudaFuncSetAttribute
  std::vector<CUstream_st*> retired_streams;    // destroyed, kept for the events that name them
  bool eager = false;
  Schedule schedule = Schedule::Shuffle;
  uint64_t seed = 0;
  uint64_t launches = 0;
  Counters counters;
  std::string last_message;
};

thread_local cudaError_t t_last_error = cudaSuccess;
thread_local int t_device = 0;

constexpr size_t kH200Memory = 150'106'849'280;  // what an H200 reports: 139.8 GiB
constexpr size_t kAlignment = 256;               // cudaMalloc's

Schedule parse_schedule(const char* v) {
  if (v == nullptr || *v == '\0' || std::strcmp(v, "shuffle") == 0) return Schedule::Shuffle;
  if (std::strcmp(v, "forward") == 0) return Schedule::Forward;
  if (std::strcmp(v, "reverse") == 0) return Schedule::Reverse;
  throw ValueError(detail::str_cat("TANDEM_SIM_SCHEDULE must be forward, reverse or shuffle, got '", v, "'"));
}

Sim& sim() {
  static Sim* s = [] {
    auto* s = new Sim;  // never destroyed: streams may be used by static destructors
    const int n = simulated_device_count();
    s->devices.resize(static_cast<size_t>(n));
    const size_t cap = emulated_memory_capacity();
    for (int d = 0; d < n; ++d) {
      Device& dev = s->devices[static_cast<size_t>(d)];
      dev.capacity = cap != 0 ? cap : kH200Memory;
      dev.legacy = std::make_unique<CUstream_st>();
      dev.legacy->device = d;
      dev.legacy->legacy = true;
      dev.streams.push_back(dev.legacy.get());
    }
    const char* eager = std::getenv("TANDEM_SIM_EAGER");
    s->eager = eager != nullptr && std::strcmp(eager, "1") == 0;
    s->schedule = parse_schedule(std::getenv("TANDEM_SIM_SCHEDULE"));
    if (const char* seed = std::getenv("TANDEM_SIM_SEED")) s->seed = std::strtoull(seed, nullptr, 10);
    return s;
  }();
  return *s;
}

cudaError_t fail(cudaError_t err) {
  t_last_error = err;
  return err;
}

bool valid_device(int d) { return d >= 0 && d < static_cast<int>(sim().devices.size()); }

CUstream_st* resolve(cudaStream_t s) {
  return s != nullptr ? s : sim().devices[static_cast<size_t>(t_device)].legacy.get();
}

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

// Runs s's queue until `position` operations have been taken from it.
void run_until(CUstream_st* s, uint64_t position) {
  while (s->executed < position && !s->queue.empty()) {
    std::function<void()> op = std::move(s->queue.front());
    s->queue.pop_front();
    ++s->executed;
    op();  // may run other streams (an event wait)
  }
}

void run_all(CUstream_st* s) { run_until(s, s->queued); }

void run_device(int d) {
  // A stream's work may wait on another's: go round until all are empty.
  for (bool more = true; more;) {
    more = false;
    for (CUstream_st* s : sim().devices[static_cast<size_t>(d)].streams) {
      if (s->executed < s->queued) {
        run_all(s);
        more = true;
      }
    }
  }
}

void enqueue(CUstream_st* s, std::function<void()> op) {
  ++s->queued;
  s->queue.push_back(std::move(op));
  if (sim().eager) run_all(s);
}

// What a synchronising call on device d reports: an error from work that
// ran (a launch that could not finish), once.
cudaError_t take_pending(int d) {
  Device& dev = sim().devices[static_cast<size_t>(d)];
  cudaError_t e = dev.pending_error;
  if (e != cudaSuccess) {
    sim().last_message = dev.pending_message;
    dev.pending_error = cudaSuccess;
    return fail(e);
  }
  return cudaSuccess;
}

// The allocation whose program-visible bytes hold [p, p + n), or null: the
// requested bytes of a cudaMalloc, or in a segment of the caching allocator
// the requested bytes of one block in use.
const Allocation* find_device(const void* p, size_t n) {
  auto& m = sim().device_memory;
  const auto a = reinterpret_cast<uintptr_t>(p);
  auto it = m.upper_bound(a);
  if (it == m.begin()) return nullptr;
  --it;
  if (a < it->first || a + n > it->first + it->second.size) return nullptr;
  if (!it->second.managed) return a + n <= it->first + it->second.requested ? &it->second : nullptr;
  auto& blocks = sim().blocks_in_use;
  auto b = blocks.upper_bound(a);
  if (b == blocks.begin()) return nullptr;
  --b;
  return a >= b->first && a + n <= b->first + b->second ? &it->second : nullptr;
}

bool is_pinned(const void* p, size_t n) {
  auto& m = sim().pinned;
  const auto a = reinterpret_cast<uintptr_t>(p);
  auto it = m.upper_bound(a);
  if (it == m.begin()) return false;
  --it;
  return a >= it->first && a + n <= it->first + it->second;
}

// The caching allocator's blocks in use, with their requested sizes, as
// they were when a piece of work was queued: the blocks it may touch when it
// runs (a block freed after the work was queued, on its stream, is still the
// work's). Only under AddressSanitizer; null otherwise.
using Blocks = std::vector<std::pair<uintptr_t, size_t>>;
std::shared_ptr<const Blocks> blocks_now() {
#if TANDEM_SIM_ASAN
  return std::make_shared<const Blocks>(sim().blocks_in_use.begin(), sim().blocks_in_use.end());
#else
  return nullptr;
#endif
}

// Device memory is poisoned for host code under AddressSanitizer; the
// simulated device itself (kernels, copies) opens it while it works.
class DeviceAccess {
 public:
  explicit DeviceAccess(const std::shared_ptr<const Blocks>& blocks = blocks_now()) {
#if TANDEM_SIM_ASAN
    if (depth_++ == 0) {
      // What the work may touch: whole cudaMalloc allocations (their
      // requested bytes), and in the caching allocator's segments the blocks
      // in use when it was queued (theirs).
      for (auto& [base, a] : sim().device_memory)
        if (!a.managed) __asan_unpoison_memory_region(reinterpret_cast<void*>(base), a.requested);
      for (auto& [p, n] : *blocks) __asan_unpoison_memory_region(reinterpret_cast<void*>(p), n);
    }
#else
    (void)blocks;
#endif
  }
  ~DeviceAccess() {
#if TANDEM_SIM_ASAN
    if (--depth_ == 0)
      for (auto& [base, a] : sim().device_memory) __asan_poison_memory_region(reinterpret_cast<void*>(base), a.size);
#endif
  }
  DeviceAccess(const DeviceAccess&) = delete;
  DeviceAccess& operator=(const DeviceAccess&) = delete;

 private:
#if TANDEM_SIM_ASAN
  static inline int depth_ = 0;
#endif
};

// Queues work that touches device memory: it runs with the memory open that
// was in use when it was queued.
void enqueue_memory(CUstream_st* s, std::function<void()> op) {
  enqueue(s, [blocks = blocks_now(), op = std::move(op)] {
    DeviceAccess open(blocks);
    op();
  });
}

}  // namespace

// ---------------------------------------------------------------- Tandem's view
int device_count() {
  std::lock_guard<std::recursive_mutex> lock(sim().mu);
  return static_cast<int>(sim().devices.size());
}

Counters counters() {
  std::lock_guard<std::recursive_mutex> lock(sim().mu);
  return sim().counters;
}

const std::string& last_error_message() { return sim().last_message; }

bool pending_work(int device) {
  std::lock_guard<std::recursive_mutex> lock(sim().mu);
  for (CUstream_st* s : sim().devices.at(static_cast<size_t>(device)).streams)
    if (s->executed < s->queued) return true;
  return false;
}

void set_schedule(Schedule schedule, uint64_t seed) {
  std::lock_guard<std::recursive_mutex> lock(sim().mu);
  sim().schedule = schedule;
  sim().seed = seed;
}

void set_eager(bool eager) {
  std::lock_guard<std::recursive_mutex> lock(sim().mu);
  sim().eager = eager;
}

void segment_managed(void* segment) {
  std::lock_guard<std::recursive_mutex> lock(sim().mu);
  auto it = sim().device_memory.find(reinterpret_cast<uintptr_t>(segment));
  if (it != sim().device_memory.end()) it->second.managed = true;
}

void block_in_use(void* ptr, size_t requested) {
  std::lock_guard<std::recursive_mutex> lock(sim().mu);
  sim().blocks_in_use[reinterpret_cast<uintptr_t>(ptr)] = requested;
}

void block_free(void* ptr) {
  std::lock_guard<std::recursive_mutex> lock(sim().mu);
  sim().blocks_in_use.erase(reinterpret_cast<uintptr_t>(ptr));
}

void enqueue_device_work(cudaStream_t stream, std::function<void()> work) {
  std::lock_guard<std::recursive_mutex> lock(sim().mu);
  enqueue_memory(resolve(stream), std::move(work));
}

bool in_device_memory(const void* p, size_t n) {
  std::lock_guard<std::recursive_mutex> lock(sim().mu);
  return find_device(p, n) != nullptr;
}

void fail_device_work(cudaStream_t stream, cudaError_t err, std::string message) {
  std::lock_guard<std::recursive_mutex> lock(sim().mu);
  Device& dev = sim().devices[static_cast<size_t>(resolve(stream)->device)];
  if (dev.pending_error == cudaSuccess) {
    dev.pending_error = err;
    dev.pending_message = std::move(message);
  }
}

cudaError_t set_function_attribute(const void* kernel, cudaFuncAttribute attr, int value) {
  std::lock_guard<std::recursive_mutex> lock(sim().mu);
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 ||
      static_cast<size_t>(value) > kSharedMemoryPerBlockOptin)
    return fail(cudaErrorInvalidValue);
  sim().max_dynamic_smem[kernel] = value;
  return cudaSuccess;
}

void launch(const LaunchConfig& c, std::function<void()> thread) {
  std::lock_guard<std::recursive_mutex> lock(sim().mu);
  Sim& s = sim();
  if (s.devices.empty()) {
    fail(cudaErrorNoDevice);
    return;
  }
  const uint64_t threads = uint64_t{c.block.x} * c.block.y * c.block.z;
  if (c.grid.x == 0 || c.grid.y == 0 || c.grid.z == 0 || threads == 0 || threads > kMaxThreadsPerBlock ||
      c.block.x > kMaxBlockDim[0] || c.block.y > kMaxBlockDim[1] || c.block.z > kMaxBlockDim[2] ||
      c.grid.x > kMaxGridDim[0] || c.grid.y > kMaxGridDim[1] || c.grid.z > kMaxGridDim[2]) {
    s.last_message = detail::str_cat("launch of ", c.name, " with grid (", c.grid.x, ", ", c.grid.y, ", ", c.grid.z,
                                     ") and block (", c.block.x, ", ", c.block.y, ", ", c.block.z, ")");
    fail(cudaErrorInvalidConfiguration);
    return;
  }
  auto attr = s.max_dynamic_smem.find(c.kernel);
  const size_t smem_limit =
      attr != s.max_dynamic_smem.end() ? static_cast<size_t>(attr->second) : kSharedMemoryPerBlock;
  if (c.dynamic_smem > smem_limit) {
    s.last_message = detail::str_cat("launch of ", c.name, " with ", c.dynamic_smem,
                                     " bytes of dynamic shared memory (the limit is ", smem_limit, ")");
    fail(cudaErrorInvalidValue);
    return;
  }
  CUstream_st* st = resolve(c.stream);
  if (st->device != t_device || st->destroyed) {
    // A kernel launches on a stream of the current device only.
    s.last_message = tandem::detail::str_cat(
        "launch of ", c.name, " on ",
        st->destroyed ? "a destroyed stream" : "a stream of cuda:", st->destroyed ? "" : std::to_string(st->device),
        st->destroyed ? "" : tandem::detail::str_cat(" while cuda:", t_device, " is current"));
    fail(cudaErrorInvalidResourceHandle);
    return;
  }
  const uint64_t number = s.launches++;
  ++s.counters.launches;
  enqueue_memory(st, [c, thread = std::move(thread), number, st] {
    Sim& s = sim();
    const int previous = t_device;
    t_device = st->device;
    const std::string error = run_launch(c, thread, number, s.schedule, s.seed);
    t_device = previous;
    if (!error.empty()) {
      Device& dev = s.devices[static_cast<size_t>(st->device)];
      if (dev.pending_error == cudaSuccess) {
        dev.pending_error = cudaErrorLaunchFailure;
        dev.pending_message = detail::str_cat("simulated kernel ", c.name, ", ", error);
      }
    }
  });
}

}  // namespace tandem::sim

using namespace tandem::sim;
using Lock = std::lock_guard<std::recursive_mutex>;

// ---------------------------------------------------------------- errors
const char* cudaGetErrorString(cudaError_t err) {
  switch (err) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchOutOfResources: return "too many resources requested for launch";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
  }
  return "unrecognized error code";
}

const char* cudaGetErrorName(cudaError_t err) {
  switch (err) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInitializationError: return "cudaErrorInitializationError";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorLaunchOutOfResources: return "cudaErrorLaunchOutOfResources";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
  }
  return "cudaErrorUnknown";
}

cudaError_t cudaGetLastError() {
  cudaError_t e = t_last_error;
  t_last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError() { return t_last_error; }

// ---------------------------------------------------------------- devices
cudaError_t cudaGetDeviceCount(int* count) {
  Lock lock(sim().mu);
  *count = static_cast<int>(sim().devices.size());
  return *count == 0 ? fail(cudaErrorNoDevice) : cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  *device = t_device;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  Lock lock(sim().mu);
  if (!valid_device(device)) return fail(cudaErrorInvalidDevice);
  t_device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
  Lock lock(sim().mu);
  if (!valid_device(device)) return fail(cudaErrorInvalidDevice);
  *p = cudaDeviceProp{};
  std::snprintf(p->name, sizeof(p->name), "%s", kDeviceName);
  p->totalGlobalMem = sim().devices[static_cast<size_t>(device)].capacity;
  p->sharedMemPerBlock = kSharedMemoryPerBlock;
  p->sharedMemPerBlockOptin = kSharedMemoryPerBlockOptin;
  p->sharedMemPerMultiprocessor = 233472;
  p->regsPerBlock = 65536;
  p->warpSize = 32;
  p->maxThreadsPerBlock = static_cast<int>(kMaxThreadsPerBlock);
  for (int i = 0; i < 3; ++i) {
    p->maxThreadsDim[i] = static_cast<int>(kMaxBlockDim[i]);
    p->maxGridSize[i] = static_cast<int>(kMaxGridDim[i]);
  }
  p->maxThreadsPerMultiProcessor = 2048;
  p->major = 9;
  p->minor = 0;
  p->multiProcessorCount = kMultiprocessors;
  p->l2CacheSize = 60 * 1024 * 1024;
  p->unifiedAddressing = 1;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  cudaDeviceProp p;
  if (cudaError_t e = cudaGetDeviceProperties(&p, device); e != cudaSuccess) return e;
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; break;
    case cudaDevAttrMaxBlockDimX: *value = p.maxThreadsDim[0]; break;
    case cudaDevAttrMaxBlockDimY: *value = p.maxThreadsDim[1]; break;
    case cudaDevAttrMaxBlockDimZ: *value = p.maxThreadsDim[2]; break;
    case cudaDevAttrMaxGridDimX: *value = p.maxGridSize[0]; break;
    case cudaDevAttrMaxGridDimY: *value = p.maxGridSize[1]; break;
    case cudaDevAttrMaxGridDimZ: *value = p.maxGridSize[2]; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = static_cast<int>(p.sharedMemPerBlock); break;
    case cudaDevAttrWarpSize: *value = p.warpSize; break;
    case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
    case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = static_cast<int>(p.sharedMemPerBlockOptin); break;
    default: return fail(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  Lock lock(sim().mu);
  if (!valid_device(t_device)) return fail(cudaErrorNoDevice);
  ++sim().counters.synchronizations;
  run_device(t_device);
  return take_pending(t_device);
}

cudaError_t cudaRuntimeGetVersion(int* version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, const void*, int block_size,
                                                          size_t dynamic_smem) {
  if (block_size <= 0 || block_size > static_cast<int>(kMaxThreadsPerBlock)) return fail(cudaErrorInvalidValue);
  // The thread limit of an sm_90 multiprocessor (2048, at most 32 blocks),
  // and its shared memory.
  int by_threads = std::min(32, 2048 / block_size);
  int by_smem = dynamic_smem == 0 ? 32 : static_cast<int>(233472 / (dynamic_smem + 1024));
  *blocks = std::max(0, std::min(by_threads, by_smem));
  return cudaSuccess;
}

// ---------------------------------------------------------------- memory
cudaError_t cudaMalloc(void** ptr, size_t size) {
  Lock lock(sim().mu);
  *ptr = nullptr;
  if (!valid_device(t_device)) return fail(cudaErrorNoDevice);
  Device& dev = sim().devices[static_cast<size_t>(t_device)];
  if (size == 0) return cudaSuccess;
  const size_t rounded = (size + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded > dev.capacity - dev.used) return fail(cudaErrorMemoryAllocation);
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (p == nullptr) return fail(cudaErrorMemoryAllocation);
  dev.used += rounded;
  sim().device_memory[reinterpret_cast<uintptr_t>(p)] = {rounded, size, t_device, false};
#if TANDEM_SIM_ASAN
  __asan_poison_memory_region(p, rounded);
#endif
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaFree(void* ptr) {
  Lock lock(sim().mu);
  if (ptr == nullptr) return cudaSuccess;
  auto it = sim().device_memory.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == sim().device_memory.end()) return fail(cudaErrorInvalidValue);
  // cudaFree waits for the device, as the real one does.
  run_device(it->second.device);
  Device& dev = sim().devices[static_cast<size_t>(it->second.device)];
  dev.used -= it->second.size;
#if TANDEM_SIM_ASAN
  __asan_unpoison_memory_region(ptr, it->second.size);
#endif
  const int device = it->second.device;
  sim().device_memory.erase(it);
  std::free(ptr);
  return take_pending(device);  // it waited for the device: its errors are reported here
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total) {
  Lock lock(sim().mu);
  if (!valid_device(t_device)) return fail(cudaErrorNoDevice);
  const Device& dev = sim().devices[static_cast<size_t>(t_device)];
  *free_bytes = dev.capacity - dev.used;
  *total = dev.capacity;
  return cudaSuccess;
}

cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned) {
  Lock lock(sim().mu);
  const size_t rounded = (std::max<size_t>(size, 1) + 4095) / 4096 * 4096;
  void* p = std::aligned_alloc(4096, rounded);
  if (p == nullptr) return fail(cudaErrorMemoryAllocation);
  sim().pinned[reinterpret_cast<uintptr_t>(p)] = rounded;
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** ptr, size_t size) { return cudaHostAlloc(ptr, size, cudaHostAllocDefault); }

cudaError_t cudaFreeHost(void* ptr) {
  Lock lock(sim().mu);
  if (ptr == nullptr) return cudaSuccess;
  auto it = sim().pinned.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == sim().pinned.end()) return fail(cudaErrorInvalidValue);
  for (int d = 0; d < static_cast<int>(sim().devices.size()); ++d) run_device(d);  // it waits, as cudaFree
  sim().pinned.erase(it);
  std::free(ptr);
  return cudaSuccess;
}

namespace {

// Checks a copy's pointers against its kind: device sides must lie inside
// one allocation, host sides outside all of them.
cudaError_t check_copy(void* dst, const void* src, size_t n, cudaMemcpyKind& kind, int* device) {
  if (kind == cudaMemcpyDefault) {
    // Unified addressing: the pointers say which side is which.
    const bool d = find_device(dst, n) != nullptr, s = find_device(src, n) != nullptr;
    kind = d ? (s ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
             : (s ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  }
  const bool dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToHost && kind != cudaMemcpyDeviceToDevice &&
      kind != cudaMemcpyHostToHost)
    return cudaErrorInvalidMemcpyDirection;
  const Allocation* d = find_device(dst, n);
  const Allocation* s = find_device(src, n);
  if (dst_dev != (d != nullptr) || src_dev != (s != nullptr)) {
    sim().last_message = tandem::detail::str_cat(
        "a ", n, "-byte copy whose ", dst_dev != (d != nullptr) ? "destination" : "source", " is not ",
        (dst_dev != (d != nullptr) ? dst_dev : src_dev) ? "inside one device allocation" : "host memory");
    return cudaErrorInvalidValue;
  }
  *device = d != nullptr ? d->device : s != nullptr ? s->device : t_device;
  return cudaSuccess;
}

void raw_copy(void* dst, const void* src, size_t n) {
  DeviceAccess open;
  std::memcpy(dst, src, n);
}

}  // namespace

cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
  Lock lock(sim().mu);
  if (n == 0) return cudaSuccess;
  if (!valid_device(t_device)) return fail(cudaErrorNoDevice);
  int device = 0;
  if (cudaError_t e = check_copy(dst, src, n, kind, &device); e != cudaSuccess) return fail(e);
  // On the legacy default stream: after the work queued there, and it
  // returns when the copy is done.
  CUstream_st* legacy = sim().devices[static_cast<size_t>(t_device)].legacy.get();
  ++sim().counters.synchronizations;
  run_all(legacy);
  raw_copy(dst, src, n);
  return take_pending(t_device);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind kind, cudaStream_t stream) {
  Lock lock(sim().mu);
  if (n == 0) return cudaSuccess;
  if (!valid_device(t_device)) return fail(cudaErrorNoDevice);
  int device = 0;
  if (cudaError_t e = check_copy(dst, src, n, kind, &device); e != cudaSuccess) return fail(e);
  CUstream_st* s = resolve(stream);
  ++sim().counters.copies;
  if (kind == cudaMemcpyHostToDevice && !is_pinned(src, n)) {
    // From pageable memory the runtime stages the source before it returns.
    auto staged = std::make_shared<std::vector<unsigned char>>(static_cast<const unsigned char*>(src),
                                                               static_cast<const unsigned char*>(src) + n);
    enqueue_memory(s, [dst, staged, n] { std::memcpy(dst, staged->data(), n); });
    return cudaSuccess;
  }
  enqueue_memory(s, [dst, src, n] { std::memcpy(dst, src, n); });
  if (kind == cudaMemcpyDeviceToHost && !is_pinned(dst, n)) {
    // To pageable memory it returns once the copy is done.
    ++sim().counters.synchronizations;
    run_all(s);
    return take_pending(s->device);
  }
  return cudaSuccess;
}

cudaError_t cudaMemcpyPeer(void* dst, int dst_device, const void* src, int src_device, size_t n) {
  Lock lock(sim().mu);
  if (n == 0) return cudaSuccess;
  if (!valid_device(dst_device) || !valid_device(src_device)) return fail(cudaErrorInvalidDevice);
  const Allocation* d = find_device(dst, n);
  const Allocation* s = find_device(src, n);
  if (d == nullptr || s == nullptr || d->device != dst_device || s->device != src_device) {
    sim().last_message = "cudaMemcpyPeer: a pointer outside its device's allocations";
    return fail(cudaErrorInvalidValue);
  }
  // Ordered after the work on both devices' legacy streams.
  CUstream_st* src_legacy = sim().devices[static_cast<size_t>(src_device)].legacy.get();
  CUstream_st* dst_legacy = sim().devices[static_cast<size_t>(dst_device)].legacy.get();
  const uint64_t src_position = src_legacy->queued;
  ++sim().counters.copies;
  enqueue(dst_legacy, [=, blocks = blocks_now()] {
    run_until(src_legacy, src_position);
    DeviceAccess open(blocks);
    std::memcpy(dst, src, n);
  });
  // Later work on the source device's legacy stream comes after the copy.
  const uint64_t copy_position = dst_legacy->queued;
  enqueue(src_legacy, [dst_legacy, copy_position] { run_until(dst_legacy, copy_position); });
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t n, cudaStream_t stream) {
  Lock lock(sim().mu);
  if (n == 0) return cudaSuccess;
  if (find_device(ptr, n) == nullptr) {
    sim().last_message = tandem::detail::str_cat("cudaMemset of ", n, " bytes outside any device allocation");
    return fail(cudaErrorInvalidValue);
  }
  enqueue_memory(resolve(stream), [ptr, value, n] { std::memset(ptr, value, n); });
  return cudaSuccess;
}

cudaError_t cudaMemset(void* ptr, int value, size_t n) {
  Lock lock(sim().mu);
  if (cudaError_t e = cudaMemsetAsync(ptr, value, n, nullptr); e != cudaSuccess) return e;
  ++sim().counters.synchronizations;
  run_all(resolve(nullptr));
  return take_pending(t_device);
}

// ---------------------------------------------------------------- streams
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned) {
  Lock lock(sim().mu);
  if (!valid_device(t_device)) return fail(cudaErrorNoDevice);
  auto* s = new CUstream_st;
  s->device = t_device;
  sim().devices[static_cast<size_t>(t_device)].streams.push_back(s);
  *stream = s;
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  Lock lock(sim().mu);
  if (stream == nullptr) return fail(cudaErrorInvalidResourceHandle);
  run_all(stream);  // its work still runs, as on a GPU
  auto& v = sim().devices[static_cast<size_t>(stream->device)].streams;
  v.erase(std::remove(v.begin(), v.end(), stream), v.end());
  // Not deleted: events recorded on it and waits queued elsewhere may still
  // name it (a destroyed stream's events stay valid in CUDA).
  stream->destroyed = true;
  sim().retired_streams.push_back(stream);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  Lock lock(sim().mu);
  if (sim().devices.empty()) return fail(cudaErrorNoDevice);
  CUstream_st* s = resolve(stream);
  ++sim().counters.synchronizations;
  run_all(s);
  return take_pending(s->device);
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  Lock lock(sim().mu);
  if (sim().devices.empty()) return fail(cudaErrorNoDevice);
  CUstream_st* s = resolve(stream);
  // Not done yet, but done by the next look: a GPU finishes its work.
  if (s->executed < s->queued) {
    run_all(s);
    return fail(cudaErrorNotReady);
  }
  return take_pending(s->device);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned) {
  Lock lock(sim().mu);
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle);
  CUstream_st* s = resolve(stream);
  std::shared_ptr<EventState> e = event->state;
  if (!e->recorded) return cudaSuccess;  // waiting on an event never recorded does nothing
  CUstream_st* other = e->stream;
  const uint64_t position = e->position;
  enqueue(s, [other, position] { run_until(other, position); });
  return cudaSuccess;
}

// ---------------------------------------------------------------- events
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags) {
  auto* e = new CUevent_st;
  e->state->timing = (flags & cudaEventDisableTiming) == 0;
  *event = e;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle);
  delete event;  // queued records keep the state alive
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  Lock lock(sim().mu);
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle);
  if (sim().devices.empty()) return fail(cudaErrorNoDevice);
  CUstream_st* s = resolve(stream);
  std::shared_ptr<EventState> e = event->state;
  e->recorded = true;
  e->stream = s;
  e->device = s->device;
  const uint64_t generation = ++e->generation;
  e->position = s->queued + 1;
  enqueue(s, [e, generation] {
    if (e->generation == generation) e->time_ms = now_ms();
  });
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  Lock lock(sim().mu);
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle);
  std::shared_ptr<EventState> e = event->state;
  if (!e->recorded) return cudaSuccess;
  ++sim().counters.synchronizations;
  run_until(e->stream, e->position);
  return take_pending(e->device);
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  Lock lock(sim().mu);
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle);
  std::shared_ptr<EventState> e = event->state;
  if (!e->recorded) return cudaSuccess;
  // A query forces the event's stream up to it, then answers: done.
  run_until(e->stream, e->position);
  return take_pending(e->device);
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  Lock lock(sim().mu);
  if (start == nullptr || end == nullptr) return fail(cudaErrorInvalidResourceHandle);
  const EventState& a = *start->state;
  const EventState& b = *end->state;
  if (!a.timing || !b.timing || !a.recorded || !b.recorded) return fail(cudaErrorInvalidResourceHandle);
  if (a.stream->executed < a.position || b.stream->executed < b.position) return fail(cudaErrorNotReady);
  *ms = static_cast<float>(b.time_ms - a.time_ms);
  return cudaSuccess;
}
