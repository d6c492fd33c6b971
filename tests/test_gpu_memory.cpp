// The caching allocator, pinned memory, streams and events on a real GPU
// (this binary exits 77, skipped, without one).
#include <catch2/catch.hpp>
#include <cstdlib>

#include "helpers.h"

using namespace tandem;

namespace {
constexpr size_t kMiB = 1024 * 1024;
int64_t stat(const char* key) { return cuda::memory_stats(0).at(key); }
}  // namespace

TEST_CASE("gpu: blocks are cached and reused without cudaMalloc", "[gpu][memory]") {
  if (std::getenv("TANDEM_NO_CUDA_MEMORY_CACHING") != nullptr) return;  // compute-sanitizer runs turn caching off
  cuda::empty_cache();
  size_t reserved0 = cuda::memory_reserved(0);
  void* p = nullptr;
  {
    Tensor t = empty({4 * 1024 * 1024}, TensorOptions(kUInt8).device("cuda:0"));
    p = t.data_ptr();
    CHECK(cuda::memory_reserved(0) == reserved0 + 20 * kMiB);
  }
  int64_t mallocs = stat("num_device_alloc");
  Tensor again = empty({4 * 1024 * 1024}, TensorOptions(kUInt8).device("cuda:0"));
  CHECK(again.data_ptr() == p);
  CHECK(stat("num_device_alloc") == mallocs);
  again = Tensor();
  cuda::empty_cache();
  CHECK(cuda::memory_reserved(0) == reserved0);
  auto [free_b, total_b] = cuda::mem_get_info(0);
  CHECK(total_b == cuda::get_device_properties(0).total_memory);
  CHECK(free_b <= total_b);
}

TEST_CASE("gpu: an impossible request gives the out-of-memory message", "[gpu][memory]") {
  int64_t ooms = stat("num_ooms");
  int64_t n = int64_t{1} << 50;  // 1 PiB
  CHECK_THROWS_AS(empty({n}, TensorOptions(kUInt8).device("cuda:0")), OutOfMemoryError);
  CHECK_THROWS_WITH(empty({n}, TensorOptions(kUInt8).device("cuda:0")),
                    Catch::StartsWith("CUDA out of memory. Tried to allocate 1024.00 TiB on cuda:0 (") &&
                        Catch::Contains("total capacity") && Catch::Contains("allocated by Tandem") &&
                        Catch::Contains("NoGradGuard"));
  CHECK(stat("num_ooms") == ooms + 2);
  // The device is still usable.
  test::check_values(ones({3}, TensorOptions().device("cuda:0")).mul(2).cpu(), {2, 2, 2});
}

TEST_CASE("gpu: a non-blocking copy from pinned memory is ordered on the current stream", "[gpu][pinned]") {
  Tensor host = arange(0, 1 << 20, 1, TensorOptions(kFloat32)).pin_memory();
  cuda::Stream side = cuda::get_stream_from_pool(0);
  Tensor result;
  {
    cuda::StreamGuard guard(side);
    Tensor d = host.to(Device("cuda:0"), /*non_blocking=*/true);
    result = d.mul(3).sum().to(Device(kCPU), /*non_blocking=*/true);
  }
  side.synchronize();
  double n = 1 << 20;
  CHECK(result.item<double>() == Approx(3 * n * (n - 1) / 2).epsilon(1e-5));
}

TEST_CASE("gpu: events time work and streams wait for each other", "[gpu][streams]") {
  Tensor a = ones({2048, 2048}, TensorOptions().device("cuda:0"));
  cuda::Event start(true), end(true);
  start.record();
  for (int i = 0; i < 10; ++i) a = a.mul(1.0001);
  end.record();
  float ms = start.elapsed_time(end);
  CHECK(ms > 0);
  CHECK(end.query());
  // Work on a side stream that waits for the default stream sees its result.
  cuda::Stream side = cuda::get_stream_from_pool(0);
  Tensor b = ones({1 << 22}, TensorOptions().device("cuda:0")).mul(5);
  side.wait_stream(cuda::current_stream(0));
  Tensor c;
  {
    cuda::StreamGuard guard(side);
    c = b.add(1);
    b.record_stream(side);
  }
  b = Tensor();  // its block waits for the side stream's work before reuse
  side.synchronize();
  CHECK(c.sum().item<double>() == Approx(6.0 * (1 << 22)));
}

TEST_CASE("gpu: copies between two GPUs", "[gpu][streams]") {
  if (cuda::device_count() < 2) return;
  Tensor x = arange(0, 1000, 1, TensorOptions(kFloat64).device("cuda:0"));
  Tensor y = x.to(Device("cuda:1"));
  CHECK(y.device() == Device("cuda:1"));
  test::check_equal(y.cpu(), x.cpu());
}
