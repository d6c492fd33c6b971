// bench_gpu_reduce: Tandem's CUDA reductions and softmax on cuda:0 in GB/s (bytes read + written per call /
// median time), each beside a cudaMemcpy device-to-device of the input's bytes measured in the same run, and
// their ratio. Usage: bench_gpu_reduce [--quick] [--filter SUBSTR]. Without a real GPU it says so and exits 0.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
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

// A sample is a batch of calls lasting at least kSampleMs between two
// events, so the events' resolution stays far below a figure.
constexpr float kSampleMs = 1.0f;
constexpr int kSamples = 15;

struct Case {
  std::string name;
  Tensor input;
  double bytes;  // read + written per call
  std::function<void()> run;
};

}  // namespace

int main(int argc, char** argv) {
  const bench::Program program{
      .name = "bench_gpu_reduce",
      .about = "The CUDA reductions and softmax on cuda:0 beside a device-to-device cudaMemcpy of the input",
      .quick = "2^24 elements only"};
  bench::CommandLine line;
  if (const std::optional<int> code = bench::read_command_line(program, argc, argv, line)) return *code;
  const bool quick = line.quick;
  const std::string filter = line.filter;
  if (const char* why = gpu_bench::why_no_gpu()) {
    std::printf("no GPU: bench_gpu_reduce needs a real CUDA device (%s)\n", why);
    return 0;
  }
  const Device gpu("cuda:0");
  const auto props = cuda::get_device_properties(0);
  std::printf(
      "# %s, %d SMs; GB/s = bytes read + written per call / median time; memcpy = cudaMemcpyAsync D2D of the\n"
      "# input's bytes (read + written); ratio = op / memcpy\n",
      props.name.c_str(), props.multi_processor_count);
  std::printf("%-9s %5s  %-32s %10s %10s %10s %6s\n", "dtype", "n", "op", "time_us", "GB/s", "memcpy", "ratio");

  gpu_bench::EventTimer timer;
  double log_ratio_sum = 0, lowest = 1e30;
  int lines = 0;
  std::string lowest_name;
  const std::vector<int> log_sizes = quick ? std::vector<int>{24} : std::vector<int>{24, 28};
  for (Dtype dt : {kFloat32, kBFloat16}) {
    for (int lg : log_sizes) {
      const int64_t n = int64_t{1} << lg;
      const auto s = static_cast<double>(element_size(dt));
      const int64_t side = int64_t{1} << (lg / 2);  // n = side * side
      // Values between 0 and 1 (the time does not depend on them, but sums
      // and exps should stay finite).
      const Tensor x = rand({n}, TensorOptions(dt).device(gpu));
      const Tensor sq = x.view({side, side});
      const Tensor rows1k = x.view({n / 1024, 1024}), rows32k = x.view({n / 32768, 32768});
      const std::string sq_name = "(" + std::to_string(side) + ", " + std::to_string(side) + ")";
      const std::vector<Case> cases = {
          {"sum", x, n * s + s, [&] { Tensor r = x.sum(); }},
          {"sum dim -1 " + sq_name, sq, n * s + side * s, [&] { Tensor r = sq.sum({-1}); }},
          {"sum dim 0 " + sq_name, sq, n * s + side * s, [&] { Tensor r = sq.sum({0}); }},
          {"amax", x, n * s + s, [&] { Tensor r = x.amax(); }},
          {"softmax dim -1 rows of 1024", rows1k, 2 * n * s, [&] { Tensor r = rows1k.softmax(-1); }},
          {"softmax dim -1 rows of 32768", rows32k, 2 * n * s, [&] { Tensor r = rows32k.softmax(-1); }},
      };
      void* dst = nullptr;
      const auto in_bytes = static_cast<size_t>(n * s);
      check(cudaMalloc(&dst, in_bytes), "cudaMalloc");
      for (const Case& c : cases) {
        if (!filter.empty() && c.name.find(filter) == std::string::npos) continue;
        auto memcpy_input = [&] {
          check(cudaMemcpyAsync(dst, c.input.data_ptr(), in_bytes, cudaMemcpyDeviceToDevice, timer.stream()),
                "cudaMemcpyAsync");
        };
        const auto [t_op, t_copy] = timer.compare(c.run, memcpy_input, kSampleMs, kSamples);
        const double gbs = c.bytes / t_op * 1e-9, copy_gbs = 2.0 * static_cast<double>(in_bytes) / t_copy * 1e-9;
        std::printf("%-9s %3s%-2d  %-32s %10.1f %10.1f %10.1f %6.2f\n", std::string(dtype_name(dt)).c_str(), "2^", lg,
                    c.name.c_str(), t_op * 1e6, gbs, copy_gbs, gbs / copy_gbs);
        std::fflush(stdout);
        log_ratio_sum += std::log(gbs / copy_gbs);
        ++lines;
        if (gbs / copy_gbs < lowest) {
          lowest = gbs / copy_gbs;
          lowest_name = std::string(dtype_name(dt)) + " 2^" + std::to_string(lg) + " " + c.name;
        }
      }
      check(cudaFree(dst), "cudaFree");
    }
  }
  if (lines > 0)
    std::printf("headline: geometric mean ratio %.2f over %d lines (goal >= 0.80), lowest %.2f (%s)\n",
                std::exp(log_ratio_sum / lines), lines, lowest, lowest_name.c_str());
  return 0;
}
