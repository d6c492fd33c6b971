// The caching device allocator (see allocator.h for the scheme). One
// DeviceAllocator per device, over the raw memory of a real GPU or of an
// emulated one; one mutex each, so loader threads may allocate too.
#include "kernels/cuda/allocator.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include "kernels/cuda/emulation.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/sim/hooks.h"
#include "tensor/core/errors.h"

namespace tandem::cuda::detail {

void Stat::increase(int64_t n) {
  current += n;
  allocated += n;
  peak = std::max(peak, current);
}

void Stat::decrease(int64_t n) {
  current -= n;
  freed += n;
}

// TANDEM_NO_CUDA_MEMORY_CACHING=1 (PyTorch's PYTORCH_NO_CUDA_MEMORY_CACHING):
// every tensor gets its own exact-size allocation, freed at once, so that
// compute-sanitizer sees an access past a tensor's end.
bool caching_disabled() {
  static const bool off = [] {
    const char* v = std::getenv("TANDEM_NO_CUDA_MEMORY_CACHING");
    return v != nullptr && *v != '\0' && std::string(v) != "0";
  }();
  return off;
}

namespace {

constexpr size_t kMinBlockSize = 512;        // every size rounds up to this
constexpr size_t kSmallSize = 1 << 20;       // requests up to here use the small pool
constexpr size_t kSmallBuffer = 2 << 20;     // segment size of the small pool
constexpr size_t kLargeBuffer = 20 << 20;    // segment size for mid-sized requests
constexpr size_t kMinLargeAlloc = 10 << 20;  // past this a request gets its own segment
constexpr size_t kRoundLarge = 2 << 20;      // which is rounded up to this
constexpr int kMaxDevices = 64;

static_assert(kSmallBuffer % kMinBlockSize == 0 && kSmallSize < kSmallBuffer && kMinLargeAlloc < kLargeBuffer);

size_t round_size(size_t n) {
  return n < kMinBlockSize ? kMinBlockSize : (n + kMinBlockSize - 1) & ~(kMinBlockSize - 1);
}

// Where segments come from: cudaMalloc, or host memory with a capacity.
class RawMemory {
 public:
  virtual ~RawMemory() = default;
  virtual void* allocate(size_t nbytes) = 0;  // nullptr when out of memory
  virtual void release(void* ptr, size_t nbytes) = 0;
  virtual void info(size_t* free_bytes, size_t* total_bytes) = 0;
  virtual std::string describe() = 0;  // for messages
  virtual bool emulated() const = 0;
};

class CudaMemory final : public RawMemory {
 public:
  explicit CudaMemory(int device) : device_(device) {}
  void* allocate(size_t n) override { return cuda::detail::malloc_device(device_, n); }
  void release(void* p, size_t) override { cuda::detail::free_device(device_, p); }
  void info(size_t* f, size_t* t) override { driver_mem_get_info(device_, f, t); }
  std::string describe() override { return cuda::detail::properties(device_).name; }
  bool emulated() const override { return false; }

 private:
  int device_;
};

size_t physical_memory() {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : 0;
}

class EmulatedMemory final : public RawMemory {
 public:
  explicit EmulatedMemory(size_t capacity) : capacity_(capacity) {}
  void* allocate(size_t n) override {
    if (capacity_ != 0 && used_ + n > capacity_) return nullptr;
    void* p = std::aligned_alloc(kMinBlockSize, round_size(n));  // aligned_alloc wants a multiple
    if (p != nullptr) used_ += n;
    return p;
  }
  void release(void* p, size_t n) override {
    std::free(p);
    used_ -= n;
  }
  void info(size_t* f, size_t* t) override {
    *t = capacity_ != 0 ? capacity_ : physical_memory();
    *f = *t > used_ ? *t - used_ : 0;
  }
  std::string describe() override {
    return capacity_ != 0 ? "emulated; capacity set by TANDEM_EMULATE_CUDA_MEMORY" : "emulated; host memory";
  }
  bool emulated() const override { return true; }

 private:
  size_t capacity_;
  size_t used_ = 0;  // guarded by the allocator's mutex
};

struct Block;
struct BlockOrder {
  bool operator()(const Block* a, const Block* b) const;
};
using BlockPool = std::set<Block*, BlockOrder>;

struct Block {
  Block(StreamRef s, size_t n, void* p, bool in_small_pool) : stream(s), size(n), ptr(p), small(in_small_pool) {}
  StreamRef stream;  // allocated on, and reusable on, this stream only
  size_t size = 0;
  void* ptr = nullptr;
  bool small = false;      // which pool
  bool allocated = false;  // handed out
  size_t requested = 0;    // what the caller asked for, while allocated
  Block* prev = nullptr;   // neighbours within the same segment
  Block* next = nullptr;
  std::vector<StreamRef> uses;  // other streams it was used on (record_stream)
  int pending_events = 0;       // recorded on those streams at free, not yet done
};

bool BlockOrder::operator()(const Block* a, const Block* b) const {
  if (a->stream.id != b->stream.id) return a->stream.id < b->stream.id;
  if (a->size != b->size) return a->size < b->size;
  return reinterpret_cast<uintptr_t>(a->ptr) < reinterpret_cast<uintptr_t>(b->ptr);
}

size_t segment_size(size_t size) {
  if (size <= kSmallSize) return kSmallBuffer;
  if (size < kMinLargeAlloc) return kLargeBuffer;
  return (size + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

std::string format_bytes(size_t n) {
  char buf[64];
  if (n < 1024) {
    std::snprintf(buf, sizeof buf, "%zu bytes", n);
  } else {
    const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(n) / 1024;
    int u = 0;
    while (v >= 1024 && u < 3) {
      v /= 1024;
      ++u;
    }
    std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  }
  return buf;
}

class DeviceAllocator {
 public:
  DeviceAllocator(int device, std::unique_ptr<RawMemory> raw)
      : device_(device), raw_(std::move(raw)), caching_(!caching_disabled()) {}

  void* malloc(size_t nbytes, StreamRef stream) {
    std::lock_guard<std::mutex> lock(mu_);
    process_events();
    // Uncached, a block is the request rounded to a whole 32-bit word: an
    // atomic on a byte (scatter_add of uint8 or bool) works on the aligned
    // word that holds it, which may reach three bytes past a tensor's last
    // one (found by the simulated GPU under ASan).
    size_t size = caching_ ? round_size(nbytes) : (nbytes + 3) / 4 * 4;
    bool small = size <= kSmallSize;
    BlockPool& pool = small ? small_ : large_;
    Block* block = caching_ ? take_free(pool, size, stream) : nullptr;
    size_t new_size = caching_ ? segment_size(size) : size;
    if (block == nullptr) block = new_segment(new_size, small, stream);
    if (block == nullptr) {
      // Give back everything cached, then try once more.
      synchronize_and_free_events();
      release_cached(small_);
      release_cached(large_);
      ++stats_.num_alloc_retries;
      block = new_segment(new_size, small, stream);
    }
    if (block == nullptr) {
      ++stats_.num_ooms;
      throw_out_of_memory(nbytes);
    }
    if (caching_ && should_split(block, size)) {
      auto* rest = new Block(block->stream, block->size - size, static_cast<char*>(block->ptr) + size, small);
      rest->prev = block;
      rest->next = block->next;
      if (rest->next != nullptr) rest->next->prev = rest;
      block->next = rest;
      block->size = size;
      pool.insert(rest);
    }
    block->allocated = true;
    block->requested = nbytes;
    sim::block_in_use(block->ptr, (nbytes + 3) / 4 * 4);  // whole words, as above
    active_[block->ptr] = block;
    for (int i : {0, pool_index(small)}) {
      stats_.allocation[i].increase(1);
      stats_.active[i].increase(1);
      stats_.allocated_bytes[i].increase(static_cast<int64_t>(block->size));
      stats_.requested_bytes[i].increase(static_cast<int64_t>(nbytes));
    }
    return block->ptr;
  }

  void free(void* ptr) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = active_.find(ptr);
    TANDEM_INTERNAL_ASSERT(it != active_.end(), "freeing a pointer the caching allocator did not hand out");
    Block* block = it->second;
    active_.erase(it);
    sim::block_free(block->ptr);
    block->allocated = false;
    for (int i : {0, pool_index(block->small)}) {
      stats_.allocation[i].decrease(1);
      stats_.active[i].decrease(1);
      stats_.allocated_bytes[i].decrease(static_cast<int64_t>(block->size));
      stats_.requested_bytes[i].decrease(static_cast<int64_t>(block->requested));
    }
    block->requested = 0;
    if (!caching_) {
      // Work on other streams (record_stream) must end first. Emulated
      // streams are names only and record no uses, so this counts on GPUs.
      if (!block->uses.empty()) count_host_sync(device_);
      for (const StreamRef& s : block->uses) cuda::detail::stream_synchronize(device_, s.handle);
      release_segment(block);
      return;
    }
    // Work queued on other streams may still read or write the block: wait
    // for it with an event per stream before the block is reused.
    for (const StreamRef& s : block->uses) {
      void* event = cuda::detail::event_create(device_, false);
      cuda::detail::event_record(device_, event, s.handle);
      events_.emplace_back(event, block);
      ++block->pending_events;
    }
    block->uses.clear();
    if (block->pending_events == 0) release_block(block);
  }

  void record_stream(void* ptr, StreamRef stream) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = active_.find(ptr);
    if (it == active_.end()) return;  // memory Tandem did not allocate (from_blob): not ours to hold back
    Block* block = it->second;
    // Emulated streams run in order on the host: nothing to wait for.
    if (raw_->emulated() || stream.id == block->stream.id) return;
    if (std::find(block->uses.begin(), block->uses.end(), stream) == block->uses.end()) block->uses.push_back(stream);
  }

  void empty_cache() {
    std::lock_guard<std::mutex> lock(mu_);
    synchronize_and_free_events();
    release_cached(small_);
    release_cached(large_);
  }

  MemoryStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    // The free parts of segments that also hold used blocks, counted now.
    for (int i = 0; i < 3; ++i) {
      stats_.inactive_split_bytes[i].current = 0;
      stats_.inactive_split[i].current = 0;
    }
    for (const BlockPool* pool : {&small_, &large_}) {
      for (const Block* b : *pool) {
        if (b->prev == nullptr && b->next == nullptr) continue;
        for (int i : {0, pool_index(b->small)}) {
          stats_.inactive_split_bytes[i].current += static_cast<int64_t>(b->size);
          stats_.inactive_split[i].current += 1;
        }
      }
    }
    for (int i = 0; i < 3; ++i) {
      stats_.inactive_split_bytes[i].peak =
          std::max(stats_.inactive_split_bytes[i].peak, stats_.inactive_split_bytes[i].current);
      stats_.inactive_split[i].peak = std::max(stats_.inactive_split[i].peak, stats_.inactive_split[i].current);
    }
    return stats_;
  }

  void reset_peak() {
    std::lock_guard<std::mutex> lock(mu_);
    auto reset = [](Stat* s) {
      for (int i = 0; i < 3; ++i) s[i].peak = s[i].current;
    };
    for (Stat* s : {stats_.allocated_bytes, stats_.requested_bytes, stats_.reserved_bytes, stats_.inactive_split_bytes,
                    stats_.allocation, stats_.segment, stats_.active, stats_.inactive_split})
      reset(s);
  }

  void info(size_t* free_bytes, size_t* total_bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    raw_->info(free_bytes, total_bytes);
  }

  std::string describe() { return raw_->describe(); }

 private:
  static int pool_index(bool small) { return small ? 1 : 2; }

  Block* take_free(BlockPool& pool, size_t size, StreamRef stream) {
    Block key(stream, size, nullptr, false);
    auto it = pool.lower_bound(&key);
    if (it == pool.end() || (*it)->stream.id != stream.id) return nullptr;
    Block* b = *it;
    pool.erase(it);
    return b;
  }

  static bool should_split(const Block* block, size_t size) {
    size_t rest = block->size - size;
    return block->small ? rest >= kMinBlockSize : rest > kSmallSize;
  }

  Block* new_segment(size_t size, bool small, StreamRef stream) {
    void* ptr = raw_->allocate(size);
    if (ptr == nullptr) return nullptr;
    sim::segment_managed(ptr);
    ++stats_.num_device_alloc;
    for (int i : {0, pool_index(small)}) {
      stats_.reserved_bytes[i].increase(static_cast<int64_t>(size));
      stats_.segment[i].increase(1);
    }
    return new Block(stream, size, ptr, small);
  }

  // Back into its pool, merged with free neighbours of the same segment.
  void release_block(Block* block) {
    BlockPool& pool = block->small ? small_ : large_;
    auto is_free = [](const Block* b) { return b != nullptr && !b->allocated && b->pending_events == 0; };
    if (Block* p = block->prev; is_free(p)) {
      pool.erase(p);
      block->ptr = p->ptr;
      block->size += p->size;
      block->prev = p->prev;
      if (block->prev != nullptr) block->prev->next = block;
      delete p;
    }
    if (Block* n = block->next; is_free(n)) {
      pool.erase(n);
      block->size += n->size;
      block->next = n->next;
      if (block->next != nullptr) block->next->prev = block;
      delete n;
    }
    pool.insert(block);
  }

  // Segments that are wholly free go back to the device.
  void release_cached(BlockPool& pool) {
    for (auto it = pool.begin(); it != pool.end();) {
      Block* b = *it;
      if (b->prev != nullptr || b->next != nullptr) {
        ++it;
        continue;
      }
      it = pool.erase(it);
      release_segment(b);
    }
  }

  // A block that is a whole segment, back to the device.
  void release_segment(Block* b) {
    count_host_sync(device_);  // cudaFree waits for the device (an emulated one counts it too)
    raw_->release(b->ptr, b->size);
    ++stats_.num_device_free;
    for (int i : {0, pool_index(b->small)}) {
      stats_.reserved_bytes[i].decrease(static_cast<int64_t>(b->size));
      stats_.segment[i].decrease(1);
    }
    delete b;
  }

  void event_done(std::pair<void*, Block*>& e) {
    cuda::detail::event_destroy(device_, e.first);
    if (--e.second->pending_events == 0) release_block(e.second);
  }

  void process_events() {
    for (auto it = events_.begin(); it != events_.end();) {
      if (!cuda::detail::event_query(it->first)) {
        ++it;
        continue;
      }
      event_done(*it);
      it = events_.erase(it);
    }
  }

  void synchronize_and_free_events() {
    // A wait only when some event has not passed yet.
    bool waits = false;
    for (const auto& e : events_) waits = waits || !cuda::detail::event_query(e.first);
    if (waits) count_host_sync(device_);
    for (auto& e : events_) {
      cuda::detail::event_synchronize(e.first);
      event_done(e);
    }
    events_.clear();
  }

  [[noreturn]] void throw_out_of_memory(size_t nbytes) {
    size_t free_b = 0, total_b = 0;
    raw_->info(&free_b, &total_b);
    int64_t allocated = stats_.allocated_bytes[0].current;
    int64_t unused = stats_.reserved_bytes[0].current - allocated;
    throw OutOfMemoryError(tandem::detail::str_cat(
        "CUDA out of memory. Tried to allocate ", format_bytes(nbytes), " on cuda:", device_, " (", raw_->describe(),
        "; ", format_bytes(total_b), " total capacity; ", format_bytes(free_b), " free; ",
        format_bytes(static_cast<size_t>(allocated)), " allocated by Tandem; ",
        format_bytes(static_cast<size_t>(unused)),
        " reserved by Tandem but unused). Tandem already gave its cached blocks back and retried. Use a smaller batch, "
        "run evaluation under NoGradGuard, free tensors you no longer need, or call cuda::empty_cache() where other "
        "programs share the GPU"));
  }

  int device_;
  std::unique_ptr<RawMemory> raw_;
  bool caching_;
  std::mutex mu_;
  BlockPool small_, large_;
  std::unordered_map<void*, Block*> active_;
  std::vector<std::pair<void*, Block*>> events_;
  MemoryStats stats_;
};

// Never destroyed: storages freed during static destruction still find it.
DeviceAllocator& allocator(int device) {
  static std::array<DeviceAllocator*, kMaxDevices> allocators{};
  static std::array<std::once_flag, kMaxDevices> created;
  TANDEM_INTERNAL_ASSERT(device >= 0 && device < kMaxDevices, "device index ", device);
  std::call_once(created[device], [device] {
    std::unique_ptr<RawMemory> raw;
    if (emulated_device_count() > 0)
      raw = std::make_unique<EmulatedMemory>(emulated_memory_capacity());
    else
      raw = std::make_unique<CudaMemory>(device);
    allocators[device] = new DeviceAllocator(device, std::move(raw));
  });
  return *allocators[device];
}

}  // namespace

std::shared_ptr<Storage> allocate_device(int device, size_t nbytes) {
  Device d(DeviceType::CUDA, device);
  // An empty tensor owns no memory; its data pointer is never dereferenced.
  alignas(kMinBlockSize) static char empty[kMinBlockSize];
  if (nbytes == 0) return std::make_shared<Storage>(empty, 0, d, nullptr);
  DeviceAllocator& a = allocator(device);
  void* ptr = a.malloc(nbytes, current_stream(device));
  return std::make_shared<Storage>(ptr, nbytes, d, [&a](void* p) { a.free(p); });
}

void record_stream(int device, void* ptr, StreamRef stream) {
  if (ptr == nullptr) return;
  allocator(device).record_stream(ptr, stream);
}

void empty_cache(int device) { allocator(device).empty_cache(); }
MemoryStats memory_stats(int device) { return allocator(device).stats(); }
void reset_peak_memory_stats(int device) { allocator(device).reset_peak(); }
void mem_get_info(int device, size_t* free_bytes, size_t* total_bytes) {
  allocator(device).info(free_bytes, total_bytes);
}

std::map<std::string, int64_t> memory_stats_map(int device) {
  MemoryStats s = memory_stats(device);
  std::map<std::string, int64_t> out;
  const char* pools[] = {"all", "small_pool", "large_pool"};
  auto add = [&](const char* name, const Stat* stat) {
    for (int i = 0; i < 3; ++i) {
      std::string key = tandem::detail::str_cat(name, ".", pools[i], ".");
      out[key + "current"] = stat[i].current;
      out[key + "peak"] = stat[i].peak;
      out[key + "allocated"] = stat[i].allocated;
      out[key + "freed"] = stat[i].freed;
    }
  };
  add("allocated_bytes", s.allocated_bytes);
  add("requested_bytes", s.requested_bytes);
  add("reserved_bytes", s.reserved_bytes);
  add("inactive_split_bytes", s.inactive_split_bytes);
  add("allocation", s.allocation);
  add("segment", s.segment);
  add("active", s.active);
  add("inactive_split", s.inactive_split);
  out["num_alloc_retries"] = s.num_alloc_retries;
  out["num_ooms"] = s.num_ooms;
  out["num_device_alloc"] = s.num_device_alloc;
  out["num_device_free"] = s.num_device_free;
  out["num_host_syncs"] = host_sync_count(device);  // Tandem's: cuda::host_synchronizations()
  return out;
}

std::string memory_summary(int device) {
  MemoryStats s = memory_stats(device);
  std::string out;
  auto line = [&](const std::string& text) {
    out += "| " + text + std::string(text.size() < 86 ? 86 - text.size() : 0, ' ') + " |\n";
  };
  auto rule = [&](char c) { out += "|" + std::string(88, c) + "|\n"; };
  auto row = [](const std::string& name, const std::string& a, const std::string& b, const std::string& c,
                const std::string& d) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%-26s| %-13s| %-13s| %-13s| %-13s", name.c_str(), a.c_str(), b.c_str(), c.c_str(),
                  d.c_str());
    return std::string(buf);
  };
  // A statistic's three rows (all, small pool, large pool), its values as bytes or counts.
  auto stat_rows = [&](const char* title, const Stat* st, bool bytes) {
    const char* pools[] = {title, "      from small pool", "      from large pool"};
    auto fmt = [bytes](int64_t v) { return bytes ? format_bytes(static_cast<size_t>(v)) : std::to_string(v); };
    for (int i = 0; i < 3; ++i)
      line(row(pools[i], fmt(st[i].current), fmt(st[i].peak), fmt(st[i].allocated), fmt(st[i].freed)));
    rule('-');
  };
  rule('=');
  line(tandem::detail::str_cat("Tandem CUDA memory summary, device cuda:", device, " (", allocator(device).describe(),
                               ")"));
  rule('-');
  line(tandem::detail::str_cat("device allocations: ", s.num_device_alloc, " | frees: ", s.num_device_free,
                               " | retries after freeing the cache: ", s.num_alloc_retries, " | OOMs: ", s.num_ooms));
  rule('=');
  line(row("Metric", "Cur Usage", "Peak Usage", "Tot Alloc", "Tot Freed"));
  rule('-');
  stat_rows("Allocated memory", s.allocated_bytes, true);
  stat_rows("Requested memory", s.requested_bytes, true);
  stat_rows("Reserved memory", s.reserved_bytes, true);
  stat_rows("Non-releasable memory", s.inactive_split_bytes, true);
  stat_rows("Allocations", s.allocation, false);
  stat_rows("Active allocs", s.active, false);
  stat_rows("Reserved segments", s.segment, false);
  stat_rows("Non-releasable allocs", s.inactive_split, false);
  out.back() = '\n';
  return out;
}

}  // namespace tandem::cuda::detail
