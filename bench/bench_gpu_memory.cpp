// bench_gpu_memory: the cost of device memory and of host-device copies on
// cuda:0, each beside its ceiling in the same run:
//  - allocating and freeing a tensor through Tandem's caching allocator
//    against cudaMalloc + cudaFree of the same size (host time per pair);
//  - host-to-device and device-to-host copies through .to(), from pinned and
//    from pageable memory, against cudaMemcpy from pinned memory (GB/s).
// Usage: bench_gpu_memory [--quick]. Without a real GPU it says so and exits 0.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <vector>

#include "bench/bench_options.h"
#include "bench/gpu_bench.h"
#include "tandem/tandem.h"

using namespace tandem;

using gpu_bench::check;
using gpu_bench::median;

namespace {

// Median seconds per call over samples of `calls` calls each, after a warm-up.
double seconds_per_call(const std::function<void()>& f, int calls, int samples) {
  for (int i = 0; i < calls; ++i) f();
  std::vector<double> t;
  for (int s = 0; s < samples; ++s) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / calls);
  }
  return median(t);
}

}  // namespace

int main(int argc, char** argv) {
  const bench::Program program{
      .name = "bench_gpu_memory",
      .about =
          "Tandem's caching allocator and host-device copies on cuda:0 beside cudaMalloc + cudaFree and "
          "cudaMemcpy from pinned memory",
      .quick = "5 samples per case instead of 15, and fewer cudaMalloc calls per sample",
      .filter = false};
  bench::CommandLine line;
  if (const std::optional<int> code = bench::read_command_line(program, argc, argv, line)) return *code;
  const bool quick = line.quick;
  if (!cuda::is_available() || cuda::is_emulated()) {
    std::printf("bench_gpu_memory: no GPU (%s)\n", cuda::is_emulated() ? "devices are emulated" : "none available");
    return 0;
  }
  std::printf("bench_gpu_memory on %s\n\n", cuda::get_device_name(0).c_str());
  int samples = quick ? 5 : 15;

  std::printf("%-34s %14s %14s %10s\n", "allocate + free", "tandem (us)", "cudaMalloc (us)", "speed-up");
  for (int64_t bytes : {int64_t{4096}, int64_t{1} << 20, int64_t{64} << 20, int64_t{1} << 30}) {
    double ours = seconds_per_call([&] { (void)empty({bytes}, TensorOptions(kUInt8).device("cuda:0")); }, 200, samples);
    double raw = seconds_per_call(
        [&] {
          void* p = nullptr;
          check(cudaMalloc(&p, static_cast<size_t>(bytes)), "cudaMalloc");
          check(cudaFree(p), "cudaFree");
        },
        quick ? 10 : 50, samples);
    char name[64];
    std::snprintf(name, sizeof name, "%lld bytes", static_cast<long long>(bytes));
    std::printf("%-34s %14.3f %14.3f %9.1fx\n", name, ours * 1e6, raw * 1e6, raw / ours);
  }

  std::printf("\n%-34s %14s %14s %10s\n", "copy (256 MiB, float32)", "tandem GB/s", "ceiling GB/s", "ratio");
  int64_t n = int64_t{64} << 20;  // 256 MiB of float32
  double gb = static_cast<double>(n) * 4 / 1e9;
  Tensor pageable = ones({n});
  Tensor pinned = pageable.pin_memory();
  Tensor dev = pageable.to(Device("cuda:0"));
  Tensor host_out = empty({n}, TensorOptions(kFloat32).pinned_memory(true));
  void* raw_host = nullptr;
  check(cudaMallocHost(&raw_host, static_cast<size_t>(n) * 4), "cudaMallocHost");
  double h2d_raw = seconds_per_call(
      [&] { check(cudaMemcpy(dev.data_ptr(), raw_host, static_cast<size_t>(n) * 4, cudaMemcpyHostToDevice), "copy"); },
      3, samples);
  double d2h_raw = seconds_per_call(
      [&] { check(cudaMemcpy(raw_host, dev.data_ptr(), static_cast<size_t>(n) * 4, cudaMemcpyDeviceToHost), "copy"); },
      3, samples);
  struct Case {
    const char* name;
    std::function<void()> f;
    double ceiling;
  };
  std::vector<Case> cases = {
      {"h2d pinned, non_blocking", [&] { dev.copy_(pinned, true), cuda::synchronize(0); }, h2d_raw},
      {"h2d pinned, blocking", [&] { dev.copy_(pinned); }, h2d_raw},
      {"h2d pageable", [&] { dev.copy_(pageable); }, h2d_raw},
      {"d2h into pinned, non_blocking", [&] { host_out.copy_(dev, true), cuda::synchronize(0); }, d2h_raw},
      {"d2h into pageable", [&] { pageable.copy_(dev); }, d2h_raw},
  };
  for (const Case& c : cases) {
    double s = seconds_per_call(c.f, 3, samples);
    std::printf("%-34s %14.1f %14.1f %10.2f\n", c.name, gb / s, gb / c.ceiling, c.ceiling / s);
  }
  cudaFreeHost(raw_host);
  return 0;
}
