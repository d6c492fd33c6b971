// bench_gpu_elementwise: Tandem's CUDA elementwise ops on cuda:0 in GB/s (bytes read + written per call / time),
// each beside a cudaMemcpy device-to-device moving the same bytes, measured in the same run, and their ratio.
// Usage: bench_gpu_elementwise [--quick] [--filter SUBSTR]. Without a real GPU it says so and exits 0.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bench/bench_options.h"
#include "bench/gpu_bench.h"
#include "tandem/tandem.h"

using namespace tandem;

using gpu_bench::check;

namespace {

// A sample lasts at least this long on the GPU (a batch of calls between two
// events), so the events' resolution (~0.5 us) stays far below a figure.
constexpr float kSampleMs = 0.5f;
constexpr int kSamples = 15;

struct Case {
  std::string name;
  double bytes;  // read + written per call
  std::function<void()> run;
};

}  // namespace

int main(int argc, char** argv) {
  const bench::Program program{
      .name = "bench_gpu_elementwise",
      .about = "The CUDA elementwise ops on cuda:0 beside a device-to-device cudaMemcpy of the same bytes",
      .quick = "2^20 and 2^24 elements only"};
  bench::CommandLine line;
  if (const std::optional<int> code = bench::read_command_line(program, argc, argv, line)) return *code;
  const bool quick = line.quick;
  const std::string filter = line.filter;
  if (const char* why = gpu_bench::why_no_gpu()) {
    std::printf("no GPU: bench_gpu_elementwise needs a real CUDA device (%s)\n", why);
    return 0;
  }
  const Device gpu("cuda:0");
  auto props = cuda::get_device_properties(0);
  std::printf(
      "# %s, %d SMs; GB/s = bytes read + written per call / median time; memcpy = cudaMemcpyAsync D2D\n"
      "# moving the same bytes (half read, half written); ratio = op / memcpy\n",
      props.name.c_str(), props.multi_processor_count);
  std::printf("%-9s %6s  %-26s %10s %10s %10s %6s\n", "dtype", "n", "op", "time_us", "GB/s", "memcpy", "ratio");

  gpu_bench::EventTimer timer;
  std::vector<int> log_sizes = quick ? std::vector<int>{20, 24} : std::vector<int>{20, 24, 28};
  for (Dtype dt : {kFloat32, kBFloat16, kFloat16}) {
    for (int lg : log_sizes) {
      const int64_t n = int64_t{1} << lg;
      const double s = static_cast<double>(element_size(dt));
      const int64_t side = int64_t{1} << (lg / 2);  // n = side * side for even lg
      const int64_t cols = 1024;
      // The values do not change the time of these kernels.
      Tensor a = full({n}, 0.25, TensorOptions(dt).device(gpu));
      Tensor b = full({n}, -0.5, TensorOptions(dt).device(gpu));
      Tensor row = full({cols}, 1.5, TensorOptions(dt).device(gpu));
      Tensor a2 = a.view({n / cols, cols}), sq = a.view({side, side});
      // Bytes as the data loader delivers images: .to() from an integer type
      // takes the one cast kernel per destination dtype (kernels/cuda/copy.cu).
      Tensor u8 = full({n}, 7, TensorOptions(kUInt8).device(gpu));
      const Dtype other = dt == kFloat32 ? kBFloat16 : kFloat32;
      const double so = static_cast<double>(element_size(other));
      const std::string to_name = std::string(".to(") + std::string(dtype_name(other)) + ")";
      std::vector<Case> cases = {
          {"add", 3 * n * s, [&] { Tensor r = a + b; }},
          {"add_ (in place)", 3 * n * s, [&] { a.add_(b); }},
          {"mul", 3 * n * s, [&] { Tensor r = a * b; }},
          {"relu", 2 * n * s, [&] { Tensor r = relu(a); }},
          {"exp", 2 * n * s, [&] { Tensor r = exp(a); }},
          {"add (N,1024)+(1024)", 2 * n * s + cols * s, [&] { Tensor r = a2 + row; }},
          {"t().contiguous() square", 2 * n * s, [&] { Tensor r = sq.t().contiguous(); }},
          {to_name, n * (s + so), [&] { Tensor r = a.to(other); }},
          {"uint8 .to(" + std::string(dtype_name(dt)) + ")", n * (1 + s), [&] { Tensor r = u8.to(dt); }},
      };
      // One pair of raw buffers for the ceiling, as large as the largest case.
      double max_bytes = 0;
      for (const Case& c : cases) max_bytes = std::max(max_bytes, c.bytes);
      void *src = nullptr, *dst = nullptr;
      const auto half_max = static_cast<size_t>(max_bytes / 2) + 16;
      check(cudaMalloc(&src, half_max), "cudaMalloc");
      check(cudaMalloc(&dst, half_max), "cudaMalloc");
      check(cudaMemset(src, 1, half_max), "cudaMemset");
      for (const Case& c : cases) {
        if (!filter.empty() && c.name.find(filter) == std::string::npos) continue;
        const auto copy_bytes = static_cast<size_t>(c.bytes / 2);
        auto memcpy_same = [&] {
          check(cudaMemcpyAsync(dst, src, copy_bytes, cudaMemcpyDeviceToDevice, timer.stream()), "cudaMemcpyAsync");
        };
        auto [t_op, t_copy] = timer.compare(c.run, memcpy_same, kSampleMs, kSamples);
        const double gbs = c.bytes / t_op * 1e-9, copy_gbs = c.bytes / t_copy * 1e-9;
        std::printf("%-9s %4s%-2d  %-26s %10.1f %10.1f %10.1f %6.2f\n", std::string(dtype_name(dt)).c_str(), "2^", lg,
                    c.name.c_str(), t_op * 1e6, gbs, copy_gbs, gbs / copy_gbs);
        std::fflush(stdout);
      }
      check(cudaFree(src), "cudaFree");
      check(cudaFree(dst), "cudaFree");
    }
  }
  return 0;
}
