// bench_nn: conv2d and max_pool2d forward and backward at the sizes of a Fashion-MNIST CNN (batch 128; 1 -> 32
// channels at 28x28 and 32 -> 64 at 14x14, 3x3 kernels with padding 1; 2x2 max pooling after each), on the CPU or a
// GPU. bench/peer_nn_torch.py prints the same table for PyTorch and, with --compare, Tandem's time over torch's.
// Usage: bench_nn [--device cpu|cuda|cuda:N] [--threads N] [--quick] [--filter SUBSTR]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "bench_common.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cuda/conv.h"
#include "tandem/tandem.h"

#if BENCH_HAVE_CBLAS
#include <cblas.h>
extern "C" void openblas_set_num_threads(int);
#endif

using namespace tandem;

namespace {

using bench::fmt_time;
using bench::fmt_value;
using bench::Fn;

// scale: of the sampling time per case (1 s; --quick: 1/4); threads: --threads.
using Config = bench::DeviceOptions;

double time_call(const Fn& f, const Config& cfg) { return bench::time_all({f}, cfg.scale, cfg.device)[0]; }

// Columns separated by two or more spaces, as peer_nn_torch.py reads them back.
void print_line(const std::string& name, const std::string& size, const std::string& time, const std::string& figure,
                const std::string& ceiling = "-", const std::string& ratio = "-") {
  bench::print_row("%-22s  %-30s  %10s  %14s  %22s  %6s\n", name, size, time, figure, ceiling, ratio);
}

// The GEMMs of an im2col convolution without the im2col, the graph or the
// allocations: cblas_sgemm per batch item on buffers of the right sizes.
// forward: (C_out, L) = (C_out, K) @ (K, L); weight gradient: (C_out, K) +=
// (C_out, L) @ (K, L)^T; input gradient: (K, L) = (C_out, K)^T @ (C_out, L).
struct ConvGemms {
  int64_t n, c_out, k, l;
  std::vector<float> w, cols, y, gw;
  ConvGemms(int64_t n_, int64_t c_out_, int64_t k_, int64_t l_)
      : n(n_), c_out(c_out_), k(k_), l(l_), w(c_out * k, 0.01f), cols(k * l, 0.01f), y(c_out * l), gw(c_out * k) {}
#if BENCH_HAVE_CBLAS
  void forward() {
    for (int64_t i = 0; i < n; ++i)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, c_out, l, k, 1, w.data(), k, cols.data(), l, 0, y.data(),
                  l);
  }
  void backward(bool input_grad) {
    for (int64_t i = 0; i < n; ++i) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, c_out, k, l, 1, y.data(), l, cols.data(), l, 1, gw.data(),
                  k);
      if (input_grad)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k, l, c_out, 1, w.data(), k, y.data(), l, 0, cols.data(),
                    l);
    }
  }
#endif
};

TensorOptions on(const Config& cfg) { return TensorOptions(kFloat32).device(cfg.device); }

// One convolution layer: forward without a graph; forward and backward for
// the weight and bias (and the input when it is a hidden activation).
void conv_case(const Config& cfg, const char* name, int64_t n, int64_t c_in, int64_t c_out, int64_t hw,
               bool input_grad) {
  const std::string size = std::to_string(n) + "x" + std::to_string(c_in) + "x" + std::to_string(hw) + "x" +
                           std::to_string(hw) + " -> " + std::to_string(c_out) + ", 3x3 p1";
  const Tensor x = randn({n, c_in, hw, hw}, on(cfg)).requires_grad_(input_grad);
  const Tensor w = (randn({c_out, c_in, 3, 3}, on(cfg)) * 0.1).detach().requires_grad_();
  const Tensor b = zeros({c_out}, on(cfg)).requires_grad_();
  const Tensor seed = randn({n, c_out, hw, hw}, on(cfg));
  const double fwd_flops = 2.0 * n * c_out * c_in * 9 * hw * hw;
  const std::string fwd = std::string(name) + " fwd", both = std::string(name) + " fwd+bwd";
  // The ceiling: cblas on the cpu, none elsewhere.
  [[maybe_unused]] ConvGemms gemms(n, c_out, c_in * 9, hw * hw);
  auto ceiling = [&](double flops, double t, const Fn& f) {
#if BENCH_HAVE_CBLAS
    if (cfg.device.is_cpu()) {
      const double tc = time_call(f, cfg);
      return std::pair{fmt_value(flops / tc * 1e-9, "GFLOP/s cblas"), bench::fmt_ratio(tc / t)};
    }
#endif
    (void)flops, (void)t, (void)f;
    return std::pair<std::string, std::string>{"-", "-"};
  };
  if (bench::selected(cfg, name, fwd)) {
    const double t = time_call(
        [&] {
          NoGradGuard no_grad;
          conv2d(x, w, b, 1, 1);
        },
        cfg);
#if BENCH_HAVE_CBLAS
    const auto [c, r] = ceiling(fwd_flops, t, [&] { gemms.forward(); });
#else
    const auto [c, r] = ceiling(fwd_flops, t, [] {});
#endif
    print_line(fwd, size, fmt_time(t), fmt_value(fwd_flops / t * 1e-9, "GFLOP/s"), c, r);
  }
  if (bench::selected(cfg, name, both)) {
    std::vector<Tensor> leaves{w, b};
    if (input_grad) leaves.push_back(x);
    const double t = time_call([&] { autograd::grad({conv2d(x, w, b, 1, 1)}, leaves, {seed}); }, cfg);
    const double flops = fwd_flops * (input_grad ? 3 : 2);  // + the weight gradient (+ the input gradient)
#if BENCH_HAVE_CBLAS
    const auto [c, r] = ceiling(flops, t, [&] {
      gemms.forward();
      gemms.backward(input_grad);
    });
#else
    const auto [c, r] = ceiling(flops, t, [] {});
#endif
    print_line(both, size, fmt_time(t), fmt_value(flops / t * 1e-9, "GFLOP/s"), c, r);
  }
}

// 2x2 max pooling with stride 2: forward, and forward + backward.
void pool_case(const Config& cfg, const char* name, int64_t n, int64_t c, int64_t hw) {
  const std::string size =
      std::to_string(n) + "x" + std::to_string(c) + "x" + std::to_string(hw) + "x" + std::to_string(hw) + ", 2x2 s2";
  const Tensor x = randn({n, c, hw, hw}, on(cfg)).requires_grad_();
  const Tensor seed = randn({n, c, hw / 2, hw / 2}, on(cfg));
  const double in_bytes = 4.0 * n * c * hw * hw, out_elems = 1.0 * n * c * (hw / 2) * (hw / 2);
  const std::string fwd = std::string(name) + " fwd", both = std::string(name) + " fwd+bwd";
  if (bench::selected(cfg, name, fwd)) {
    const double t = time_call(
        [&] {
          NoGradGuard no_grad;
          max_pool2d(x, 2);
        },
        cfg);
    // The input read, the values and int64 indices written.
    print_line(fwd, size, fmt_time(t), fmt_value((in_bytes + 12 * out_elems) / t * 1e-9, "GB/s"));
  }
  if (bench::selected(cfg, name, both)) {
    const double t = time_call([&] { autograd::grad({max_pool2d(x, 2)}, {x}, {seed}); }, cfg);
    // Forward, then the gradient and the indices read and the input gradient written.
    print_line(both, size, fmt_time(t), fmt_value((2 * in_bytes + 24 * out_elems) / t * 1e-9, "GB/s"));
  }
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  const bench::Program program{
      .name = "bench_nn",
      .about =
          "conv2d and max_pool2d forward and forward + backward at a Fashion-MNIST CNN's sizes on the cpu or a "
          "GPU, the convolutions beside their GEMMs",
      .quick = "A quarter of the sampling time",
      .threads = true};
  return bench::run_device_bench(program, argc, argv, cfg, [&] {
    cpu::set_num_threads(cfg.threads);
#if BENCH_HAVE_CBLAS
    openblas_set_num_threads(cfg.threads);
#endif
    std::printf("# bench_nn: Tandem %s (%s); device %s; %d thread(s); conv2d on cuda: %s\n", version(),
                build_features(), cfg.device.str().c_str(), cfg.threads, cuda::conv2d_implementation());
    std::printf(
        "# time: median per call; fwd runs under NoGradGuard; fwd+bwd = forward + autograd::grad of the layer's\n"
        "# parameters (conv1: weight, bias; conv2: also its input, a hidden activation), or of the pool's input.\n"
        "# conv ceiling: the same GEMMs through cblas_sgemm per batch item, without im2col, graph or allocation;\n"
        "# ratio = ceiling time / time (1.00: as fast as the GEMMs alone)\n");
    print_line("case", "size", "time", "figure", "ceiling", "ratio");
    conv_case(cfg, "conv1", 128, 1, 32, 28, false);
    conv_case(cfg, "conv2", 128, 32, 64, 14, true);
    pool_case(cfg, "maxpool1", 128, 32, 28);
    pool_case(cfg, "maxpool2", 128, 64, 14);
  });
}
