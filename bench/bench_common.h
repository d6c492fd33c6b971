// What the benchmarks timed with the host's clock (bench_ops, bench_autograd)
// share: sampling a callable in batches and taking the median, the fields of
// their tables, and their common command-line options.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

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

// One table line: the fields (std::strings) printed with `format`, one %s
// each, and flushed, so that a long run shows each line as it is measured.
template <typename... Fields>
void print_row(const char* format, const Fields&... fields) {
  std::printf(format, fields.c_str()...);
  std::fflush(stdout);
}

// ---------------------------------------------------------------- command line

// The options both take; each program's Config extends them.
struct Options {
  bool quick = false;
  std::string filter;  // run only the cases whose section or name contains it
};

// Reads [--quick] [--filter SUBSTR] into o, and [--device SPEC] into *device
// where device is given (left as it is when the option is absent); exits 2
// with the usage on anything else.
inline void parse_options(int argc, char** argv, Options& o, std::string* device = nullptr) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      o.quick = true;
    } else if (std::strcmp(argv[i], "--filter") == 0 && i + 1 < argc) {
      o.filter = argv[++i];
    } else if (device && std::strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
      *device = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s %s[--quick] [--filter SUBSTR]\n", argv[0],
                   device ? "[--device cpu|cuda|cuda:N] " : "");
      std::exit(2);
    }
  }
}

// Whether --filter selects a case: no filter, or one that is part of the
// case's section or its own name.
inline bool selected(const Options& o, const std::string& section, const std::string& name) {
  return o.filter.empty() || section.find(o.filter) != std::string::npos || name.find(o.filter) != std::string::npos;
}

}  // namespace bench
