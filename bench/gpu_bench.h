// What the GPU benchmarks (bench_gpu_*.cpp) share: exit-on-error checks,
// the median, and GPU time per call through CUDA events. (Their command
// line is bench_options.h's, as every bench's.)
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <utility>
#include <vector>

#include "tandem/tandem.h"

namespace gpu_bench {

// Exits with "<program>: <what>: <error>" when a CUDA call failed.
inline void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what, cudaGetErrorString(err));
    std::exit(1);
  }
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Why there is no real GPU to measure, or nullptr where there is one.
inline const char* why_no_gpu() {
  if (!tandem::cuda::is_available() || tandem::cuda::is_emulated())
    return tandem::cuda::is_emulated() ? "the cuda devices are emulated" : "cuda::is_available() is false";
  return nullptr;
}

// cuda:0's current stream, where Tandem launches.
inline cudaStream_t current_stream() { return static_cast<cudaStream_t>(tandem::cuda::current_stream(0).handle()); }

// GPU time of batches of calls on one stream, between two CUDA events.
class EventTimer {
 public:
  explicit EventTimer(cudaStream_t stream = current_stream()) : stream_(stream) {
    check(cudaEventCreate(&start_), "cudaEventCreate");
    check(cudaEventCreate(&stop_), "cudaEventCreate");
  }
  ~EventTimer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  cudaStream_t stream() const { return stream_; }

  // Milliseconds of `calls` calls of f.
  float batch_ms(const std::function<void()>& f, int calls) {
    check(cudaEventRecord(start_, stream_), "cudaEventRecord");
    for (int i = 0; i < calls; ++i) f();
    check(cudaEventRecord(stop_, stream_), "cudaEventRecord");
    check(cudaEventSynchronize(stop_), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    return ms;
  }

  // Seconds per call of op and of ceiling: each the median of `samples`
  // batches of calls lasting at least sample_ms (so that the events'
  // resolution, ~0.5 us, stays far below a figure), after warm-up calls. The
  // two are sampled alternately, so that clocks and load move both alike.
  std::pair<double, double> compare(const std::function<void()>& op, const std::function<void()>& ceiling,
                                    float sample_ms, int samples) {
    const int n_op = calls_per_sample(op, sample_ms), n_ceiling = calls_per_sample(ceiling, sample_ms);
    std::vector<double> a, b;
    for (int s = 0; s < samples; ++s) {
      a.push_back(batch_ms(op, n_op) * 1e-3 / n_op);
      b.push_back(batch_ms(ceiling, n_ceiling) * 1e-3 / n_ceiling);
    }
    return {median(a), median(b)};
  }

 private:
  int calls_per_sample(const std::function<void()>& f, float sample_ms) {
    for (int i = 0; i < 3; ++i) f();  // warm-up: the allocator's cache, the occupancy queries, clocks
    const float one = std::max(batch_ms(f, 1), 1e-4f);
    return std::max(1, static_cast<int>(sample_ms / one));
  }

  cudaStream_t stream_;
  cudaEvent_t start_, stop_;
};

}  // namespace gpu_bench
