// bench_ops: CPU timings of Tandem's ops, each beside a ceiling measured in the same run (memcpy bandwidth,
// a hand-written single-pass read loop, a direct cblas call on the same buffers), at one thread and at all
// cores. bench/peer_torch.py prints the same table for PyTorch. Usage: bench_ops [--quick] [--filter SUBSTR]
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench_common.h"
#include "kernels/cpu/parallel.h"
#include "tandem/tandem.h"

#ifdef _OPENMP
#include <omp.h>
#endif

using namespace tandem;

namespace {

using bench::Clock;
using bench::fmt;
using bench::fmt_ratio;
using bench::fmt_time;
using bench::fmt_value;
using bench::Sampler;
using bench::selected;

// The common options, and this program's settings.
struct Config : bench::Options {
  double budget_s = 0.2;  // timed samples per measurement stop after about this long
  int threads = 1;        // threads of the current pass, for Tandem, OpenBLAS and the ceilings
};

// Median seconds per call of f.
template <typename F>
double time_per_call(const F& f, double budget_s) {
  Sampler<F> s(f);
  for (auto start = Clock::now(); !s.enough(start, budget_s);) s.sample();
  return s.median();
}

// Median seconds per call of an op and of its ceiling, their samples
// interleaved so that a change in the machine's load touches both alike.
template <typename F, typename G>
std::pair<double, double> time_pair(const F& op, const G& ceiling, double budget_s) {
  Sampler<F> a(op);
  Sampler<G> b(ceiling);
  for (auto start = Clock::now(); !a.enough(start, budget_s) || !b.enough(start, budget_s);) {
    a.sample();
    b.sample();
  }
  return {a.median(), b.median()};
}

// ---------------------------------------------------------------- ceilings

// Buffers of the memcpy ceiling, grown on demand and touched once so that no
// timed copy pays for first-touch page faults.
std::vector<char> g_src, g_dst;

void parallel_memcpy(char* dst, const char* src, size_t n, int threads) {
#ifdef _OPENMP
  if (threads > 1) {
#pragma omp parallel num_threads(threads)
    {
      size_t t = static_cast<size_t>(omp_get_thread_num()), nt = static_cast<size_t>(omp_get_num_threads());
      size_t chunk = (n + nt - 1) / nt, b = std::min(n, t * chunk), e = std::min(n, b + chunk);
      std::memcpy(dst + b, src + b, e - b);
    }
    return;
  }
#endif
  (void)threads;
  std::memcpy(dst, src, n);
}

// A memcpy moving `traffic` bytes (half read, half written) on the current pass's threads.
auto memcpy_moving(int64_t traffic, int threads) {
  size_t n = static_cast<size_t>(traffic / 2);
  if (g_src.size() < n) {
    g_src.assign(n, 1);
    g_dst.assign(n, 2);
  }
  return [n, threads] { parallel_memcpy(g_dst.data(), g_src.data(), n, threads); };
}

// 32 independent accumulators, so that the compiler vectorizes the loop
// without having to reassociate the float sum.
[[gnu::always_inline]] inline float sum_lanes(const float* p, int64_t n) {
  float acc[32] = {};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int k = 0; k < 32; ++k) acc[k] += p[i + k];
  for (; i < n; ++i) acc[0] += p[i];
  float s = 0;
  for (float a : acc) s += a;
  return s;
}

// The ceiling is the machine's read bandwidth, not the build's: where the CPU
// has AVX2 the loop uses it (Tandem itself is built for baseline x86-64, and
// the SSE2 loop cannot keep up with memory on one core).
#if defined(__x86_64__) && defined(__GNUC__)
[[gnu::target("avx2")]] float sum_run_avx2(const float* p, int64_t n) { return sum_lanes(p, n); }
float sum_run(const float* p, int64_t n) {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2 ? sum_run_avx2(p, n) : sum_lanes(p, n);
}
#else
float sum_run(const float* p, int64_t n) { return sum_lanes(p, n); }
#endif

// The read ceiling of a reduction: one pass over the data, split over the threads.
float read_loop(const float* p, int64_t n, int threads) {
  float total = 0;
#ifdef _OPENMP
  if (threads > 1) {
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {
      int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
      int64_t chunk = (n + nt - 1) / nt, b = std::min(n, t * chunk), e = std::min(n, b + chunk);
      total += sum_run(p + b, e - b);
    }
    return total;
  }
#endif
  (void)threads;
  return sum_run(p, n);
}

volatile float g_sink;  // keeps the read loop's result alive

void gemm(bool ta, bool tb, int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a, lda, b,
              ldb, 0.0f, c, ldc);
}
void gemm(bool ta, bool tb, int m, int n, int k, const double* a, int lda, const double* b, int ldb, double* c,
          int ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0, a, lda, b,
              ldb, 0.0, c, ldc);
}

// ---------------------------------------------------------------- table

// Columns are separated by two or more spaces and no field holds two in a
// row, so peer_torch.py can read the table back.
void print_line(const std::string& thr, const std::string& name, const std::string& size, const std::string& time,
                const std::string& figure, const std::string& ceiling, const std::string& ratio) {
  bench::print_row("%-4s %-26s %-12s %11s %15s %24s %6s\n", thr, name, size, time, figure, ceiling, ratio);
}

void print_header() { print_line("thr", "case", "size", "time", "figure", "ceiling", "ratio"); }

// One table line: `figure` and `ceiling` in `unit`, higher is better; ratio = figure / ceiling.
void report(const Config& cfg, const std::string& name, const std::string& size, double time_s, double figure,
            double ceiling, const char* unit, const char* ceiling_kind) {
  print_line(std::to_string(cfg.threads), name, size, fmt_time(time_s), fmt_value(figure, unit),
             fmt_value(ceiling, unit) + " " + ceiling_kind, fmt_ratio(figure / ceiling));
}

// A memory-bound op moving `traffic` bytes (read + written) per call, against
// memcpy moving as many.
template <typename F>
void bandwidth_case(const Config& cfg, const std::string& section, const std::string& name, const std::string& size,
                    int64_t traffic, const F& op) {
  if (!selected(cfg, section, name)) return;
  auto [t, tc] = time_pair(op, memcpy_moving(traffic, cfg.threads), cfg.budget_s);
  report(cfg, name, size, t, static_cast<double>(traffic) / t * 1e-9, static_cast<double>(traffic) / tc * 1e-9, "GB/s",
         "memcpy");
}

// ---------------------------------------------------------------- cases

const char* size_pow2(int64_t n) { return n == (1 << 16) ? "2^16" : n == (1 << 20) ? "2^20" : "2^24"; }

void bench_small(const Config& cfg) {
  const std::string section = "small";
  Tensor a = randn({10}), b = randn({10});
  // No ceiling here: this is the front end's fixed cost per call (checks,
  // promotion, allocation, dispatch); the peer is torch's in peer_torch.py.
  auto small = [&](const std::string& name, const auto& op) {
    if (!selected(cfg, section, name)) return;
    double t = time_per_call(op, cfg.budget_s);
    print_line(std::to_string(cfg.threads), name, "10", fmt_time(t), fmt("%.2f", t * 1e6, "us/call"), "-", "-");
  };
  small("small add", [&] { return a + b; });
  small("small relu", [&] { return a.relu(); });
  small("small sum", [&] { return a.sum(); });
}

void bench_elementwise(const Config& cfg, int64_t n) {
  const std::string section = "elementwise", size = size_pow2(n);
  const int64_t f4 = 4 * n;  // bytes of one float32 operand
  Tensor a = randn({n}), b = randn({n}), inplace = randn({n});
  constexpr int64_t C = 256;
  Tensor x = randn({n / C, C}), bias = randn({C});
  const int64_t side = std::llround(std::sqrt(static_cast<double>(n)));
  Tensor square = randn({side, side});

  bandwidth_case(cfg, section, "add", size, 3 * f4, [&] { return a + b; });
  bandwidth_case(cfg, section, "mul", size, 3 * f4, [&] { return a * b; });
  bandwidth_case(cfg, section, "add_ (in place)", size, 3 * f4, [&] { inplace.add_(b); });
  bandwidth_case(cfg, section, "exp", size, 2 * f4, [&] { return a.exp(); });
  bandwidth_case(cfg, section, "sigmoid", size, 2 * f4, [&] { return a.sigmoid(); });
  bandwidth_case(cfg, section, "relu", size, 2 * f4, [&] { return a.relu(); });
  bandwidth_case(cfg, section, "add (N,256)+(256)", size, 2 * f4 + 4 * C, [&] { return x + bias; });
  bandwidth_case(cfg, section, "to float16", size, f4 + 2 * n, [&] { return a.to(kFloat16); });
  bandwidth_case(cfg, section, "t().contiguous()", size, 2 * f4, [&] { return square.t().contiguous(); });
}

void bench_reductions(const Config& cfg) {
  const std::string section = "reduction";
  const int64_t rows = cfg.quick ? 1024 : 4096, cols = rows;
  const std::string size = std::to_string(rows) + "x" + std::to_string(cols);
  Tensor x = randn({rows, cols});
  const float* px = x.data_ptr<float>();
  const int64_t bytes = x.numel() * 4;

  // Reductions read their input once: the ceiling is one plain pass over it.
  auto read = [&] { g_sink = read_loop(px, x.numel(), cfg.threads); };
  auto read_case = [&](const std::string& name, const auto& op) {
    if (!selected(cfg, section, name)) return;
    auto [t, t_read] = time_pair(op, read, cfg.budget_s);
    report(cfg, name, size, t, bytes / t * 1e-9, bytes / t_read * 1e-9, "GB/s", "read loop");
  };
  read_case("sum", [&] { return x.sum(); });
  read_case("sum dim 0", [&] { return x.sum({0}); });
  read_case("sum dim 1", [&] { return x.sum({1}); });
  read_case("amax", [&] { return x.amax(); });

  const int64_t classes = 1000;
  Tensor logits = randn({rows, classes});
  bandwidth_case(cfg, section, "softmax dim -1", std::to_string(rows) + "x" + std::to_string(classes),
                 2 * logits.numel() * 4, [&] { return logits.softmax(-1); });
}

// out = op(a) @ op(b) with a stored (M, K) or, when ta, (K, M) and viewed through .t(); the same for b.
template <typename T>
void matmul_case(const Config& cfg, const std::string& name, int64_t M, int64_t K, int64_t N, bool ta, bool tb,
                 const std::string& size) {
  if (!selected(cfg, "matmul", name)) return;
  const Dtype dt = dtype_of<T>;
  Tensor as = ta ? randn({K, M}, dt) : randn({M, K}, dt), bs = tb ? randn({N, K}, dt) : randn({K, N}, dt);
  Tensor a = ta ? as.t() : as, b = tb ? bs.t() : bs;
  Tensor c = empty({M, N}, dt);
  const T *pa = as.data_ptr<T>(), *pb = bs.data_ptr<T>();
  T* pc = c.data_ptr<T>();
  const int m = static_cast<int>(M), n = static_cast<int>(N), k = static_cast<int>(K);
  const int lda = static_cast<int>(as.size(1)), ldb = static_cast<int>(bs.size(1));
  auto blas = [&] { gemm(ta, tb, m, n, k, pa, lda, pb, ldb, pc, n); };

  // A wrong product would make the timing meaningless: check once against the direct call.
  blas();
  double diff = (matmul(a, b) - c).abs().amax().item<double>();
  double scale = c.abs().amax().item<double>();
  if (!(diff <= 1e-4 * scale))
    std::printf("# WARNING: %s %s differs from cblas by %g\n", name.c_str(), size.c_str(), diff);

  auto [t, tc] = time_pair([&] { return matmul(a, b); }, blas, cfg.budget_s);
  double flops = 2.0 * static_cast<double>(M * N * K);
  report(cfg, name, size, t, flops / t * 1e-9, flops / tc * 1e-9, "GFLOP/s", "cblas");
}

void bench_matmul(const Config& cfg) {
  std::vector<int64_t> cubes = cfg.quick ? std::vector<int64_t>{256} : std::vector<int64_t>{256, 1024};
  for (int64_t s : cubes) {
    std::string size = std::to_string(s) + "^3";
    matmul_case<float>(cfg, "matmul f32", s, s, s, false, false, size);
    matmul_case<double>(cfg, "matmul f64", s, s, s, false, false, size);
  }
  // An MLP layer, batch 128, 784 -> 256: the forward x @ W.t() with W (256, 784), as nn.Linear stores it, and the
  // weight gradient g.t() @ x. Sizes are M x K x N.
  matmul_case<float>(cfg, "matmul f32", 128, 784, 256, false, false, "128x784x256");
  matmul_case<double>(cfg, "matmul f64", 128, 784, 256, false, false, "128x784x256");
  matmul_case<float>(cfg, "matmul f32 x@W.t()", 128, 784, 256, false, true, "128x784x256");
  matmul_case<float>(cfg, "matmul f32 g.t()@x", 256, 128, 784, true, false, "256x128x784");
  for (int64_t s : cubes) matmul_case<float>(cfg, "matmul f32 a.t()@b", s, s, s, true, false, std::to_string(s) + "^3");
}

void run_pass(Config cfg, int threads) {
  cfg.threads = threads;
  cpu::set_num_threads(threads);
  openblas_set_num_threads(threads);
  // Small ops first and GEMMs last: OpenBLAS's threads keep spinning a while
  // after a call and would steal a core from the cases that follow.
  bench_small(cfg);
  bench_elementwise(cfg, 1 << 16);
  bench_elementwise(cfg, cfg.quick ? 1 << 20 : 1 << 24);
  bench_reductions(cfg);
  bench_matmul(cfg);
}

}  // namespace

int main(int argc, char** argv) {
  const bench::Program program{
      .name = "bench_ops",
      .about =
          "Tandem's CPU ops beside memcpy, a hand-written read loop and direct cblas calls, at one thread "
          "and at all cores",
      .quick = "Fewer and smaller sizes, shorter sampling: a smoke run (~7 s)"};
  bench::CommandLine line;
  if (const std::optional<int> code = bench::read_command_line(program, argc, argv, line)) return *code;
  Config cfg;
  cfg.quick = line.quick;
  cfg.filter = line.filter;
  if (cfg.quick) cfg.budget_s = 0.05;
  const int all = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  try {
    manual_seed(0);
    std::printf("# bench_ops: Tandem %s, %s; %d hardware threads%s\n", version(), openblas_get_config(), all,
                cfg.quick ? "; --quick" : "");
    std::printf(
        "# time: median per call; ratio = figure / ceiling, both measured in this run (1.00 = at the ceiling)\n");
    std::printf("# memcpy: std::memcpy split over the threads moving the same bytes (read + written); read loop: a\n");
    std::printf(
        "# hand-written single pass over the same data (AVX2 where the CPU has it); cblas: cblas_?gemm on the\n");
    std::printf("# same buffers\n");
    print_header();
    run_pass(cfg, 1);
    if (all > 1) run_pass(cfg, all);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_ops: %s\n", e.what());
    return 1;
  }
  return 0;
}
