// The caching device allocator and the pinned host allocator, through the
// public tandem::cuda API. Their logic is the same on real and emulated
// devices; these tests run where it can be observed exactly: on emulated
// devices (the suite caps each at 256 MiB), and check the errors elsewhere.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>

#include "helpers.h"

using namespace tandem;

namespace {

constexpr size_t kMiB = 1024 * 1024;

int64_t stat(const char* key, int device = 0) { return cuda::memory_stats(device).at(key); }

Tensor bytes_on(size_t nbytes, const char* device = "cuda:0") {
  return empty({static_cast<int64_t>(nbytes)}, TensorOptions(kUInt8).device(device));
}

}  // namespace

TEST_CASE("without a GPU, memory queries and pinning say CUDA is not available", "[memory]") {
  if (cuda::is_available()) return;
  CHECK_THROWS_AS(cuda::memory_allocated(), DeviceError);
  CHECK_THROWS_WITH(cuda::memory_allocated(), Catch::StartsWith("memory_allocated: CUDA is not available ("));
  CHECK_THROWS_WITH(ones({3}).pin_memory(),
                    Catch::StartsWith("pin_memory: pinned memory is page-locked host memory for fast copies to a GPU, "
                                      "and CUDA is not available (") &&
                        Catch::Contains("Leave pin_memory off on this machine"));
  CHECK_THROWS_AS(empty({3}, TensorOptions().pinned_memory(true)), DeviceError);
}

TEST_CASE("allocations round to 512 bytes and come from 2 MiB or 20 MiB segments", "[memory]") {
  if (!cuda::is_emulated()) return;
  cuda::empty_cache();
  size_t alloc0 = cuda::memory_allocated(0), reserved0 = cuda::memory_reserved(0);
  {
    Tensor small = bytes_on(1000);  // rounds to 1024, small pool, a 2 MiB segment
    CHECK(cuda::memory_allocated(0) == alloc0 + 1024);
    CHECK(cuda::memory_reserved(0) == reserved0 + 2 * kMiB);
    Tensor big = bytes_on(11 * kMiB + 1);  // its own segment, rounded to 2 MiB, too little left to split
    CHECK(cuda::memory_allocated(0) == alloc0 + 1024 + 12 * kMiB);
    CHECK(cuda::memory_reserved(0) == reserved0 + 14 * kMiB);
    Tensor mid = bytes_on(4 * kMiB);  // large pool, a 20 MiB segment
    CHECK(cuda::memory_allocated(0) == alloc0 + 1024 + 12 * kMiB + 4 * kMiB);
    CHECK(cuda::memory_reserved(0) == reserved0 + 34 * kMiB);
    CHECK(stat("requested_bytes.all.current") - stat("allocated_bytes.all.current") ==
          static_cast<int64_t>(1000 + 4 * kMiB + 11 * kMiB + 1) - static_cast<int64_t>(1024 + 4 * kMiB + 12 * kMiB));
    CHECK(cuda::memory_allocated(1) == 0);  // each device has its own allocator
  }
  CHECK(cuda::memory_allocated(0) == alloc0);
  CHECK(cuda::memory_reserved(0) == reserved0 + 34 * kMiB);  // cached, not given back
  cuda::empty_cache();
  CHECK(cuda::memory_reserved(0) == reserved0);
}

TEST_CASE("a freed block is reused without a new device allocation", "[memory]") {
  if (!cuda::is_emulated()) return;
  void* first = nullptr;
  { first = bytes_on(3 * kMiB).data_ptr(); }
  int64_t device_allocs = stat("num_device_alloc");
  Tensor again = bytes_on(3 * kMiB);
  CHECK(again.data_ptr() == first);
  CHECK(stat("num_device_alloc") == device_allocs);
  // Steady state of a loop that makes and drops temporaries: no device
  // allocation after the first step, and nothing left behind.
  Tensor x = ones({64, 64}, TensorOptions().device("cuda:0"));
  size_t before = cuda::memory_allocated(0);
  (void)((x * 2 + 1).exp().sum());
  device_allocs = stat("num_device_alloc");
  for (int step = 0; step < 50; ++step) (void)((x * 2 + 1).exp().sum());
  CHECK(stat("num_device_alloc") == device_allocs);
  CHECK(cuda::memory_allocated(0) == before);
}

TEST_CASE("blocks are split within a segment and merged when freed", "[memory]") {
  if (!cuda::is_emulated()) return;
  cuda::empty_cache();
  int64_t segments = stat("segment.small_pool.current");
  Tensor a = bytes_on(1024), b = bytes_on(1024), c = bytes_on(1024);
  CHECK(stat("segment.small_pool.current") == segments + 1);  // one 2 MiB segment for all three
  auto* pa = static_cast<char*>(a.data_ptr());
  CHECK(static_cast<char*>(b.data_ptr()) == pa + 1024);
  CHECK(static_cast<char*>(c.data_ptr()) == pa + 2048);
  void* pb = b.data_ptr();
  b = Tensor();
  CHECK(stat("inactive_split_bytes.all.current") >= 1024);
  CHECK(bytes_on(700).data_ptr() == pb);  // best fit: the hole b left
  a = Tensor();
  c = Tensor();
  // All three merged back into one free segment, which empty_cache releases.
  cuda::empty_cache();
  CHECK(stat("segment.small_pool.current") == segments);
}

TEST_CASE("peak statistics and their reset", "[memory]") {
  if (!cuda::is_emulated()) return;
  size_t base = cuda::memory_allocated(0);
  { Tensor t = bytes_on(8 * kMiB); }
  CHECK(cuda::max_memory_allocated(0) >= base + 8 * kMiB);
  cuda::reset_peak_memory_stats(0);
  CHECK(cuda::max_memory_allocated(0) == cuda::memory_allocated(0));
  CHECK(cuda::max_memory_reserved(0) == cuda::memory_reserved(0));
  auto stats = cuda::memory_stats(0);
  CHECK(static_cast<size_t>(stats.at("allocated_bytes.all.current")) == cuda::memory_allocated(0));
  CHECK(stats.at("allocated_bytes.all.current") ==
        stats.at("allocated_bytes.small_pool.current") + stats.at("allocated_bytes.large_pool.current"));
  CHECK(stats.count("num_ooms") == 1);
  std::string summary = cuda::memory_summary(0);
  CHECK_THAT(summary, Catch::Contains("Tandem CUDA memory summary, device cuda:0") &&
                          Catch::Contains("Allocated memory") && Catch::Contains("Reserved memory") &&
                          Catch::Contains("Non-releasable memory") && Catch::Contains("OOMs:"));
  auto [free_b, total_b] = cuda::mem_get_info(0);
  CHECK(total_b == 256 * kMiB);
  CHECK(free_b == total_b - cuda::memory_reserved(0));
}

TEST_CASE("out of memory: the cache is freed and the request retried, then a clear error", "[memory]") {
  if (!cuda::is_emulated()) return;
  cuda::empty_cache();
  // A block cached for the default stream cannot serve another stream, so a
  // second big request there only fits once the cache is given back.
  { Tensor t = bytes_on(150 * kMiB); }
  int64_t retries = stat("num_alloc_retries"), ooms = stat("num_ooms");
  {
    cuda::StreamGuard guard(cuda::get_stream_from_pool(0));
    Tensor t = bytes_on(150 * kMiB);
    CHECK(stat("num_alloc_retries") == retries + 1);
  }
  cuda::empty_cache();
  Tensor held = bytes_on(100 * kMiB);
  CHECK_THROWS_AS(bytes_on(300 * kMiB), OutOfMemoryError);
  CHECK_THROWS_WITH(
      bytes_on(200 * kMiB),
      Catch::StartsWith("CUDA out of memory. Tried to allocate 200.00 MiB on cuda:0 (emulated; capacity set by "
                        "TANDEM_EMULATE_CUDA_MEMORY; 256.00 MiB total capacity; 156.00 MiB free; 100.00 MiB allocated "
                        "by Tandem; 0 bytes reserved by Tandem but unused). Tandem already gave its cached blocks back "
                        "and retried.") &&
          Catch::Contains("Use a smaller batch, run evaluation under NoGradGuard"));
  CHECK(stat("num_ooms") == ooms + 2);
  CHECK(cuda::memory_allocated(0) >= 100 * kMiB);  // a failed request holds nothing more
  CHECK(cuda::memory_allocated(0) < 101 * kMiB);
}

TEST_CASE("empty tensors take no device memory", "[memory]") {
  if (!cuda::is_emulated()) return;
  size_t before = cuda::memory_allocated(0);
  Tensor e = empty({0, 5}, TensorOptions().device("cuda:0"));
  CHECK(cuda::memory_allocated(0) == before);
  CHECK(e.to(Device(kCPU)).numel() == 0);
}

TEST_CASE("the allocator is safe to use from several threads", "[memory]") {
  if (!cuda::is_emulated()) return;
  size_t before = cuda::memory_allocated(0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      std::mt19937 rng(t);
      std::vector<Tensor> held;
      for (int i = 0; i < 500; ++i) {
        size_t n = 1 + rng() % (3 * kMiB);
        Tensor x = bytes_on(n);
        std::memset(x.data_ptr(), t, n);  // two threads given one block would clobber each other
        held.push_back(x);
        if (held.size() > 4) held.erase(held.begin() + static_cast<long>(rng() % held.size()));
        for (const Tensor& h : held) {
          const auto* p = static_cast<const unsigned char*>(h.data_ptr());
          if (p[0] != t || p[h.numel() - 1] != t) throw std::runtime_error("block shared between threads");
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(cuda::memory_allocated(0) == before);
}

TEST_CASE("pin_memory copies into the pinned caching allocator", "[memory][pinned]") {
  if (!cuda::is_emulated()) return;
  Tensor x = arange(0, 1000, 1, TensorOptions(kFloat32));
  CHECK_FALSE(x.is_pinned());
  auto h0 = cuda::host_memory_stats();
  Tensor p = x.pin_memory();
  CHECK(p.is_pinned());
  CHECK(p.device() == Device(kCPU));
  test::check_equal(p, x);
  CHECK(p.pin_memory().is_same(p));  // pinning a pinned tensor is a no-op
  auto h1 = cuda::host_memory_stats();
  CHECK(h1.allocated_bytes == h0.allocated_bytes + 4096);  // 4000 bytes round up to a power of two
  void* block = p.data_ptr();
  p = Tensor();
  CHECK(cuda::host_memory_stats().allocated_bytes == h0.allocated_bytes);
  Tensor q = empty({1000}, TensorOptions(kFloat32).pinned_memory(true));
  CHECK(q.is_pinned());
  CHECK(q.data_ptr() == block);  // the cached block again
  CHECK(cuda::host_memory_stats().num_host_alloc == h1.num_host_alloc);
  Tensor on_gpu = x.to(Device("cuda:0"));
  CHECK_THROWS_AS(on_gpu.pin_memory(), DeviceError);
  CHECK_THROWS_WITH(on_gpu.pin_memory(),
                    Catch::StartsWith("pin_memory: only cpu tensors can be pinned; this tensor is on cuda:0"));
}

DEVICE_TEST_CASE("non-blocking copies between pinned memory and a device give the right data", "[memory][pinned]") {
  if (!device.is_cuda()) return;
  Tensor x = arange(0, 3000, 1, TensorOptions(kFloat32)).reshape({30, 100});
  Tensor pinned = x.pin_memory();
  Tensor on_device = pinned.to(device, /*non_blocking=*/true);
  Tensor back = on_device.mul(2).to(Device(kCPU), /*non_blocking=*/true);
  CHECK(back.is_pinned());  // as PyTorch: non-blocking copies to the cpu land in pinned memory
  cuda::synchronize(device.index());
  test::check_equal(back, x.mul(2));
  // From pageable memory non_blocking is a plain synchronous copy.
  test::check_equal(x.t().to(device, /*non_blocking=*/true).cpu(), x.t().contiguous());
  // Into a pinned non-contiguous destination.
  Tensor dst = empty({100, 30}, TensorOptions(kFloat32).pinned_memory(true)).t();
  dst.copy_(on_device, /*non_blocking=*/true);
  cuda::synchronize(device.index());
  test::check_equal(dst, x);
}

// Exact to the 32-bit word: an atomic on a byte works on the aligned word that
// holds it (kernels/cuda/allocator.cpp).
TEST_CASE("with TANDEM_NO_CUDA_MEMORY_CACHING each tensor has its own exact allocation", "[memory][nocache]") {
  const char* env = std::getenv("TANDEM_NO_CUDA_MEMORY_CACHING");
  if (!cuda::is_emulated() || env == nullptr || std::string(env) != "1") return;
  size_t reserved0 = cuda::memory_reserved(0);
  int64_t allocs = stat("num_device_alloc"), frees = stat("num_device_free");
  {
    Tensor a = bytes_on(1000), b = bytes_on(3 * kMiB + 7);
    CHECK(cuda::memory_reserved(0) == reserved0 + 1000 + 3 * kMiB + 8);  // 7 rounds up to a word
    CHECK(cuda::memory_allocated(0) == cuda::memory_reserved(0));
    CHECK(stat("num_device_alloc") == allocs + 2);
  }
  CHECK(cuda::memory_reserved(0) == reserved0);  // freed at once, nothing cached
  CHECK(stat("num_device_free") == frees + 2);
  CHECK_THROWS_WITH(bytes_on(300 * kMiB), Catch::StartsWith("CUDA out of memory. Tried to allocate 300.00 MiB"));
}
