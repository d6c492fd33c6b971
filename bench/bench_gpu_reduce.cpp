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
#include <string>
#include <vector>

#include "tandem/tandem.h"

using namespace tandem;

namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "bench_gpu_reduce: %s: %s\n", what, cudaGetErrorString(err));
    std::exit(1);
  }
}

// A sample is a batch of calls lasting at least kSampleMs between two
// events, so the events' resolution stays far below a figure.
constexpr float kSampleMs = 1.0f;
constexpr int kSamples = 15;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Seconds per call on cuda:0's current stream: the median of kSamples
// batches after warm-up, the op's and the ceiling's samples alternating so
// that clocks and load move both alike.
class Timer {
 public:
  Timer() : stream_(static_cast<cudaStream_t>(cuda::current_stream(0).handle())) {
    check(cudaEventCreate(&start_), "cudaEventCreate");
    check(cudaEventCreate(&stop_), "cudaEventCreate");
  }
  ~Timer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  cudaStream_t stream() const { return stream_; }

  std::pair<double, double> compare(const std::function<void()>& op, const std::function<void()>& ceiling) {
    const int n_op = calls_per_sample(op), n_ceiling = calls_per_sample(ceiling);
    std::vector<double> a, b;
    for (int s = 0; s < kSamples; ++s) {
      a.push_back(batch_ms(op, n_op) * 1e-3 / n_op);
      b.push_back(batch_ms(ceiling, n_ceiling) * 1e-3 / n_ceiling);
    }
    return {median(a), median(b)};
  }

 private:
  float batch_ms(const std::function<void()>& f, int calls) {
    check(cudaEventRecord(start_, stream_), "cudaEventRecord");
    for (int i = 0; i < calls; ++i) f();
    check(cudaEventRecord(stop_, stream_), "cudaEventRecord");
    check(cudaEventSynchronize(stop_), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    return ms;
  }
  int calls_per_sample(const std::function<void()>& f) {
    for (int i = 0; i < 3; ++i) f();  // warm-up: the allocator's cache, the occupancy queries, clocks
    const float one = std::max(batch_ms(f, 1), 1e-4f);
    return std::max(1, static_cast<int>(kSampleMs / one));
  }

  cudaStream_t stream_;
  cudaEvent_t start_, stop_;
};

struct Case {
  std::string name;
  Tensor input;
  double bytes;  // read + written per call
  std::function<void()> run;
};

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::string filter;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      quick = true;
    } else if (arg == "--filter" && i + 1 < argc) {
      filter = argv[++i];
    } else {
      std::fprintf(stderr, "usage: bench_gpu_reduce [--quick] [--filter SUBSTR]\n");
      return 2;
    }
  }
  if (!cuda::is_available() || cuda::is_emulated()) {
    std::printf("no GPU: bench_gpu_reduce needs a real CUDA device (%s)\n",
                cuda::is_emulated() ? "the cuda devices are emulated" : "cuda::is_available() is false");
    return 0;
  }
  const Device gpu("cuda:0");
  const auto props = cuda::get_device_properties(0);
  std::printf(
      "# %s, %d SMs; GB/s = bytes read + written per call / median time; memcpy = cudaMemcpyAsync D2D of the\n"
      "# input's bytes (read + written); ratio = op / memcpy\n",
      props.name.c_str(), props.multi_processor_count);
  std::printf("%-9s %5s  %-32s %10s %10s %10s %6s\n", "dtype", "n", "op", "time_us", "GB/s", "memcpy", "ratio");

  Timer timer;
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
        const auto [t_op, t_copy] = timer.compare(c.run, memcpy_input);
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
