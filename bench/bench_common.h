// What the benchmarks timed with the host's clock (bench_ops and the device
// benches bench_autograd, bench_nn, bench_norm, bench_optim) share: sampling a
// callable in batches and taking the median (on a device: ending each batch
// with a synchronisation), the fields and lines of their tables, their common
// options (read by bench_options.h), and the device benches' start-up.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_options.h"
#include "tandem/tandem.h"
#include "tensor/ops/runtime.h"

namespace bench {

using Clock = std::chrono::steady_clock;

// A sample batches calls until it lasts this long, so the clock's own cost
// stays far below the time of a 1 us call.
constexpr double kSampleSeconds = 1e-3;
constexpr size_t kMinSamples = 5, kMaxSamples = 2000;

inline double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// On the CPU a call's work is done when it returns.
struct NoWait {
  void operator()() const {}
};

// Samples of one callable: its first call warms up (page faults, BLAS
// buffers, thread start-up, the caching allocator, the first gradients), its
// second sizes the batch. wait() runs before the clock is read after a call
// or a batch, to end work the calls left queued (a GPU's launches).
template <typename F, typename Wait = NoWait>
struct Sampler {
  const F& f;
  Wait wait;
  int64_t batch = 1;
  std::vector<double> samples;

  explicit Sampler(const F& fn, Wait w = Wait()) : f(fn), wait(w) {
    f();
    wait();
    auto t0 = Clock::now();
    f();
    wait();
    batch = std::max<int64_t>(1, static_cast<int64_t>(kSampleSeconds / std::max(seconds_since(t0), 1e-9)));
  }
  void sample() {
    auto t0 = Clock::now();
    for (int64_t i = 0; i < batch; ++i) f();
    wait();
    samples.push_back(seconds_since(t0) / static_cast<double>(batch));
  }
  bool enough(Clock::time_point start, double budget_s) const {
    return samples.size() >= kMinSamples && (samples.size() >= kMaxSamples || seconds_since(start) >= budget_s);
  }
  double median() {
    auto mid = samples.begin() + static_cast<std::ptrdiff_t>(samples.size() / 2);
    std::nth_element(samples.begin(), mid, samples.end());
    return *mid;
  }
};

using Fn = std::function<void()>;

// A GPU runs a launch after the call that queued it returned: a timed batch
// ends when the device has finished its work, not when the host has queued it.
struct WaitFor {
  tandem::Device device;
  void operator()() const {
    if (device.is_cuda()) tandem::cuda::synchronize(device.index());
  }
};

// Median seconds per call of each callable on device, their samples
// interleaved so that a change in the machine's load touches all of them alike.
inline std::vector<double> time_all(const std::vector<Fn>& fns, double budget_s, tandem::Device device) {
  std::vector<Sampler<Fn, WaitFor>> s;
  s.reserve(fns.size());
  for (const Fn& f : fns) s.emplace_back(f, WaitFor{device});
  auto done = [&](Clock::time_point start) {
    return std::all_of(s.begin(), s.end(), [&](const auto& x) { return x.enough(start, budget_s); });
  };
  for (auto start = Clock::now(); !done(start);)
    for (auto& x : s) x.sample();
  std::vector<double> medians;
  for (auto& x : s) medians.push_back(x.median());
  return medians;
}

// ---------------------------------------------------------------- table fields

// v printed with the printf format f, then " unit".
inline std::string fmt(const char* f, double v, const char* unit) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return std::string(buf) + " " + unit;
}

// Seconds in ns, us, ms or s, whichever keeps the number short.
inline std::string fmt_time(double s) {
  if (s < 1e-6) return fmt("%.1f", s * 1e9, "ns");
  if (s < 1e-3) return fmt("%.2f", s * 1e6, "us");
  if (s < 1) return fmt("%.2f", s * 1e3, "ms");
  return fmt("%.3f", s, "s");
}

// Two decimals below 10, one below 100, none from 100 on.
inline std::string fmt_value(double v, const char* unit) {
  return fmt(v >= 100 ? "%.0f" : v >= 10 ? "%.1f" : "%.2f", v, unit);
}

// A ratio, two decimals.
inline std::string fmt_ratio(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", r);
  return buf;
}

// The columns of a device bench's table: thr, case, size, time, figure,
// reference, ratio, two spaces apart; the widths that differ from bench to
// bench are given. No field holds two spaces in a row, so that the bench's
// torch peer (--compare) can read the table back.
struct Table {
  int name_width, size_width, figure_width, reference_width;

  void line(const std::string& thr, const std::string& name, const std::string& size, const std::string& time,
            const std::string& figure, const std::string& reference, const std::string& ratio) const {
    std::printf("%-4s  %-*s  %-*s  %10s  %*s  %*s  %6s\n", thr.c_str(), name_width, name.c_str(), size_width,
                size.c_str(), time.c_str(), figure_width, figure.c_str(), reference_width, reference.c_str(),
                ratio.c_str());
    std::fflush(stdout);
  }
  void header() const { line("thr", "case", "size", "time", "figure", "reference", "ratio"); }
};

// One table line: the fields (std::strings) printed with `format`, one %s
// each, and flushed, so that a long run shows each line as it is measured.
template <typename... Fields>
void print_row(const char* format, const Fields&... fields) {
  std::printf(format, fields.c_str()...);
  std::fflush(stdout);
}

// ---------------------------------------------------------------- command line

// The options every bench takes (bench_options.h parses them); each
// program's Config extends them.
struct Options {
  bool quick = false;
  std::string filter;  // run only the cases whose section or name contains it
};

// Whether --filter selects a case: no filter, or one that is part of the
// case's section or its own name.
inline bool selected(const Options& o, const std::string& section, const std::string& name) {
  return o.filter.empty() || section.find(o.filter) != std::string::npos || name.find(o.filter) != std::string::npos;
}

// ---------------------------------------------------------------- device benches

// The options of a device bench (bench_autograd, bench_nn, bench_norm,
// bench_optim); each program's Config extends them.
struct DeviceOptions : Options {
  tandem::Device device = tandem::kCPU;  // where the cases' tensors live (resolved: cuda has its index)
  double scale = 1;                      // of each case's sampling budget (--quick: 1/4)
  int threads = 1;                       // threads of the current pass (bench_nn: --threads)
};

// The hardware threads, at least 1.
inline int hardware_threads() { return std::max(1, static_cast<int>(std::thread::hardware_concurrency())); }

// The device as the first comment line names it: "cpu", or "cuda:0 (its name)".
inline std::string describe(tandem::Device device) {
  if (device.is_cpu()) return "cpu";
  return device.str() + " (" + tandem::cuda::get_device_name(device.index()) + ")";
}

// The main of a device bench: reads the command line into o (--device, and
// --threads where program.threads; --help and usage errors return 0 and 2
// before anything runs), scales the sampling down for --quick, resolves
// --device ("cuda" -> cuda:<current>; without a GPU, Tandem's error says why
// and how to emulate one), seeds Tandem's generator with 0 and runs body();
// an exception ends it with "name: what" and exit status 1.
inline int run_device_bench(Program program, int argc, char** argv, DeviceOptions& o,
                            const std::function<void()>& body) {
  program.device = true;  // what makes it a device bench
  CommandLine line;
  if (const std::optional<int> code = read_command_line(program, argc, argv, line)) return *code;
  o.quick = line.quick;
  o.filter = line.filter;
  if (program.threads) o.threads = line.threads;
  if (o.quick) o.scale = 0.25;
  try {
    o.device = tandem::resolve_device(tandem::Device(line.device), "--device");
    tandem::manual_seed(0);
    body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program.name.c_str(), e.what());
    return 1;
  }
  return 0;
}

// The note of a bench run on an emulated cuda device (TANDEM_EMULATE_CUDA).
inline void print_emulation_note(tandem::Device device) {
  if (tandem::cuda::is_emulated() && device.is_cuda())
    std::printf(
        "# note: the cuda devices are emulated (TANDEM_EMULATE_CUDA): host memory and CPU kernels; these\n"
        "# times test the code path and say nothing about a GPU\n");
}

}  // namespace bench
