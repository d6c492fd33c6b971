// bench_autograd: timings of Tandem's autograd on the CPU or a GPU, each beside a reference measured in the same
// run: the same forward without recording (the graph's bookkeeping), and the GEMMs of an MLP without the graph (its
// ceiling: cblas called directly on the CPU, Tandem's own mm on a GPU). bench/peer_autograd_torch.py prints the same
// table for PyTorch.
// Usage: bench_autograd [--device cpu|cuda|cuda:N] [--quick] [--filter SUBSTR]
#if BENCH_HAVE_CBLAS
#include <cblas.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench_common.h"
#include "kernels/cpu/parallel.h"
#include "tandem/tandem.h"

using namespace tandem;

namespace {

using bench::fmt_ratio;
using bench::fmt_time;
using bench::fmt_value;
using bench::Fn;
using bench::selected;
using bench::time_all;

using Config = bench::DeviceOptions;

// ---------------------------------------------------------------- table

// A derived line (a ratio of two timed lines) has "-" for its time.
const bench::Table table{20, 20, 16, 24};

// ---------------------------------------------------------------- cases

// 1. The engine's cost per node: 64 cheap ops on 16 elements, where the
// kernels cost almost nothing and the recording and the backward pass are
// what is timed. The gradient is seeded with ones, so no reduction is needed.
constexpr int kChainOps = 64;

Tensor chain(Tensor y) {
  for (int i = 0; i < kChainOps; ++i) y = i % 3 == 0 ? y * 0.9 : i % 3 == 1 ? y + 0.1 : y.tanh();
  return y;
}

void bench_chain(const Config& cfg) {
  const std::string section = "chain", size = std::to_string(kChainOps) + " ops x 16";
  const char *nograd = "chain fwd no-grad", *record = "chain fwd record", *both = "chain fwd+bwd";
  if (!selected(cfg, section, nograd) && !selected(cfg, section, record) && !selected(cfg, section, both)) return;
  Tensor x = randn({16}).to(cfg.device).requires_grad_(), seed = ones({16}).to(cfg.device);
  std::vector<Fn> fns = {
      [&] {
        NoGradGuard g;
        chain(x);
      },
      [&] { chain(x); },
      [&] {
        x.mutable_grad() = Tensor();
        chain(x).backward(seed);
      },
  };
  std::vector<double> t = time_all(fns, 0.3 * cfg.scale, cfg.device);
  const double n = kChainOps, bwd = t[2] - t[1];
  const std::string thr = std::to_string(cfg.threads);
  if (selected(cfg, section, nograd))
    table.line(thr, nograd, size, fmt_time(t[0]), fmt_value(t[0] / n * 1e6, "us/op"), "-", "-");
  if (selected(cfg, section, record))
    table.line(thr, record, size, fmt_time(t[1]), fmt_value(t[1] / n * 1e6, "us/op"),
               fmt_value(t[0] / n * 1e6, "us/op no-grad"), fmt_ratio(t[1] / t[0]));
  if (selected(cfg, section, both))
    table.line(thr, both, size, fmt_time(t[2]), fmt_value(bwd / n * 1e6, "us/op bwd"),
               fmt_value(t[1] / n * 1e6, "us/op fwd"), fmt_ratio(bwd / t[1]));
}

// 2. An MLP training step, 784-256-128-10 with relu, batch 128, against the
// GEMMs it runs without the graph, on operands of the same sizes.
struct Mlp {
  static constexpr int B = 128, D0 = 784, D1 = 256, D2 = 128, D3 = 10;
  // Weights (in, out), used as x.mm(w) + b; leaves that require grad.
  Tensor w1, b1, w2, b2, w3, b3;
  Tensor x, labels;  // x: (B, D0); labels: (B) int64 in [0, D3)

  explicit Mlp(Device device) {
    auto weight = [&](int64_t in, int64_t out) {
      return (randn({in, out}) * std::sqrt(2.0 / in)).to(device).requires_grad_();
    };
    auto bias = [&](int64_t n) { return zeros({n}, TensorOptions().device(device)).requires_grad_(); };
    w1 = weight(D0, D1), w2 = weight(D1, D2), w3 = weight(D2, D3);
    b1 = bias(D1), b2 = bias(D2), b3 = bias(D3);
    x = randn({B, D0}).to(device);
    labels = randint(D3, {B}).to(device);
  }
  std::vector<Tensor*> params() { return {&w1, &b1, &w2, &b2, &w3, &b3}; }

  // Cross entropy as -log_softmax(logits, 1).gather(1, labels.unsqueeze(1)).mean().
  Tensor loss() const {
    Tensor h1 = (x.mm(w1) + b1).relu();   // (B, D1)
    Tensor h2 = (h1.mm(w2) + b2).relu();  // (B, D2)
    Tensor logits = h2.mm(w3) + b3;       // (B, D3)
    return -logits.log_softmax(1).gather(1, labels.unsqueeze(1)).mean();
  }
  void sgd(double lr) {
    NoGradGuard g;
    for (Tensor* p : params()) {
      p->add_(p->grad(), -lr);
      p->mutable_grad().zero_();
    }
  }
};

// The GEMMs of Mlp's forward (3) and backward (5: every weight gradient, and
// the input gradients of layers 2 and 3; x needs none).
constexpr double mlp_forward_flops() {
  return 2.0 * Mlp::B * (Mlp::D0 * Mlp::D1 + Mlp::D1 * Mlp::D2 + Mlp::D2 * Mlp::D3);
}
constexpr double mlp_backward_flops() {
  return mlp_forward_flops() + 2.0 * Mlp::B * (Mlp::D1 * Mlp::D2 + Mlp::D2 * Mlp::D3);
}

#if BENCH_HAVE_CBLAS
// On the CPU: called directly through cblas, row-major, on preallocated
// buffers with the transpose flags the mm rule passes.
struct MlpGemms {
  static constexpr int B = Mlp::B, D0 = Mlp::D0, D1 = Mlp::D1, D2 = Mlp::D2, D3 = Mlp::D3;
  std::vector<float> x, w1, h1, w2, h2, w3, logits, g3, dw3, dh2, g2, dw2, dh1, g1, dw1;

  MlpGemms() {
    auto buf = [](size_t n) {
      std::vector<float> v(n);
      for (size_t i = 0; i < n; ++i) v[i] = 0.01f * static_cast<float>(static_cast<int>(i % 17) - 8);
      return v;
    };
    x = buf(B * D0), w1 = buf(D0 * D1), h1 = buf(B * D1), w2 = buf(D1 * D2), h2 = buf(B * D2), w3 = buf(D2 * D3);
    logits = buf(B * D3), g3 = buf(B * D3), dw3 = buf(D2 * D3), dh2 = buf(B * D2), g2 = buf(B * D2);
    dw2 = buf(D1 * D2), dh1 = buf(B * D1), g1 = buf(B * D1), dw1 = buf(D0 * D1);
  }
  static void gemm(bool ta, bool tb, int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c,
                   int ldc) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a, lda, b,
                ldb, 0.0f, c, ldc);
  }
  void forward() {
    gemm(false, false, B, D1, D0, x.data(), D0, w1.data(), D1, h1.data(), D1);
    gemm(false, false, B, D2, D1, h1.data(), D1, w2.data(), D2, h2.data(), D2);
    gemm(false, false, B, D3, D2, h2.data(), D2, w3.data(), D3, logits.data(), D3);
  }
  void backward() {
    gemm(true, false, D2, D3, B, h2.data(), D2, g3.data(), D3, dw3.data(), D3);  // dw3 = h2.t() @ g3
    gemm(false, true, B, D2, D3, g3.data(), D3, w3.data(), D3, dh2.data(), D2);  // dh2 = g3 @ w3.t()
    gemm(true, false, D1, D2, B, h1.data(), D1, g2.data(), D2, dw2.data(), D2);  // dw2 = h1.t() @ g2
    gemm(false, true, B, D1, D2, g2.data(), D2, w2.data(), D2, dh1.data(), D1);  // dh1 = g2 @ w2.t()
    gemm(true, false, D0, D1, B, x.data(), D0, g1.data(), D1, dw1.data(), D1);   // dw1 = x.t() @ g1
  }
};
#endif

// Anywhere else (a GPU, or a build without OpenBLAS): Tandem's own mm on the
// device under NoGradGuard, the products the mm rule computes, on the same
// transposed views; each call allocates its output, as the graph's GEMMs do.
struct MlpMm {
  static constexpr int B = Mlp::B, D0 = Mlp::D0, D1 = Mlp::D1, D2 = Mlp::D2, D3 = Mlp::D3;
  // Activations and the gradients at each layer's output: g3 (B, D3), g2 (B, D2), g1 (B, D1).
  Tensor x, w1, h1, w2, h2, w3, g3, g2, g1;

  explicit MlpMm(Device device) {
    auto buf = [&](int64_t rows, int64_t cols) { return (randn({rows, cols}) * 0.01).to(device); };
    x = buf(B, D0), w1 = buf(D0, D1), h1 = buf(B, D1), w2 = buf(D1, D2), h2 = buf(B, D2), w3 = buf(D2, D3);
    g3 = buf(B, D3), g2 = buf(B, D2), g1 = buf(B, D1);
  }
  void forward() const {
    NoGradGuard g;
    x.mm(w1);
    h1.mm(w2);
    h2.mm(w3);
  }
  void backward() const {
    NoGradGuard g;
    h2.t().mm(g3);  // dw3
    g3.mm(w3.t());  // dh2
    h1.t().mm(g2);  // dw2
    g2.mm(w2.t());  // dh1
    x.t().mm(g1);   // dw1
  }
};

// The MLP's ceiling: its GEMMs alone, the forward's 3 and a step's 3 + 5.
struct MlpCeiling {
  const char* name;  // "cblas" or "mm", printed beside its figures
  Fn forward, forward_backward;
};

MlpCeiling mlp_ceiling(Device device) {
#if BENCH_HAVE_CBLAS
  if (device.is_cpu()) {
    auto g = std::make_shared<MlpGemms>();
    return {"cblas", [g] { g->forward(); },
            [g] {
              g->forward();
              g->backward();
            }};
  }
#endif
  auto m = std::make_shared<MlpMm>(device);
  return {"mm", [m] { m->forward(); },
          [m] {
            m->forward();
            m->backward();
          }};
}

void bench_mlp(const Config& cfg) {
  const std::string section = "mlp", size = "b128 784-256-128-10";
  const std::vector<std::string> names = {"mlp fwd no-grad", "mlp fwd record", "mlp fwd+bwd", "mlp step (sgd)",
                                          "mlp (fwd+bwd)/fwd"};
  if (std::none_of(names.begin(), names.end(), [&](const std::string& n) { return selected(cfg, section, n); })) return;
  Mlp net(cfg.device);
  const MlpCeiling ceiling = mlp_ceiling(cfg.device);
  {
    // A step that produced no gradient would make the timings meaningless.
    Tensor loss = net.loss();
    loss.backward();
    for (Tensor* p : net.params())
      if (!p->grad().defined() || !std::isfinite(p->grad().abs().sum().item<double>()))
        std::printf("# WARNING: mlp: a parameter got no finite gradient\n");
    net.sgd(0.0);
  }
  std::vector<Fn> fns = {
      [&] {
        NoGradGuard g;
        net.loss();
      },
      [&] { net.loss(); },
      [&] { net.loss().backward(); },
      [&] {
        net.loss().backward();
        net.sgd(1e-3);
      },
      ceiling.forward,
      ceiling.forward_backward,
  };
  std::vector<double> t = time_all(fns, 1.0 * cfg.scale, cfg.device);
  const double f_fwd = mlp_forward_flops(), f_all = f_fwd + mlp_backward_flops();
  const double t_fwd_ceiling = t[4], t_all_ceiling = t[5];
  const std::string gflops_ceiling = std::string("GFLOP/s ") + ceiling.name,
                    x_ceiling = std::string("x ") + ceiling.name;
  const std::string thr = std::to_string(cfg.threads);
  auto gemm_line = [&](const std::string& name, double time, double flops, double t_ceiling) {
    if (!selected(cfg, section, name)) return;
    table.line(thr, name, size, fmt_time(time), fmt_value(flops / time * 1e-9, "GFLOP/s"),
               fmt_value(flops / t_ceiling * 1e-9, gflops_ceiling.c_str()), fmt_ratio(t_ceiling / time));
  };
  gemm_line(names[0], t[0], f_fwd, t_fwd_ceiling);
  gemm_line(names[1], t[1], f_fwd, t_fwd_ceiling);
  gemm_line(names[2], t[2], f_all, t_all_ceiling);
  gemm_line(names[3], t[3], f_all, t_all_ceiling);
  // What the GEMMs alone give for the same ratio is this net's ideal: the
  // backward runs 5 GEMMs, not 6 (the first layer's input gradient is not needed).
  if (selected(cfg, section, names[4]))
    table.line(thr, names[4], size, "-", fmt_value(t[2] / t[0], "x"),
               fmt_value(t_all_ceiling / t_fwd_ceiling, x_ceiling.c_str()),
               fmt_ratio((t[2] / t[0]) / (t_all_ceiling / t_fwd_ceiling)));
}

// 3. A reduction- and softmax-heavy graph: (softmax(x, 1) * w).sum() with x
// (256, 1024) and w (1024) broadcast over the rows, both leaves.
void bench_softmax(const Config& cfg) {
  const std::string section = "softmax", size = "256x1024";
  const char *nograd = "softmax fwd no-grad", *record = "softmax fwd record", *both = "softmax fwd+bwd";
  if (!selected(cfg, section, nograd) && !selected(cfg, section, record) && !selected(cfg, section, both)) return;
  Tensor x = randn({256, 1024}).to(cfg.device).requires_grad_(), w = randn({1024}).to(cfg.device).requires_grad_();
  auto f = [&] { return (x.softmax(1) * w).sum(); };
  std::vector<Fn> fns = {
      [&] {
        NoGradGuard g;
        f();
      },
      [&] { f(); },
      [&] {
        x.mutable_grad() = Tensor();
        w.mutable_grad() = Tensor();
        f().backward();
      },
  };
  std::vector<double> t = time_all(fns, 0.5 * cfg.scale, cfg.device);
  const double bwd = t[2] - t[1];
  const std::string thr = std::to_string(cfg.threads);
  if (selected(cfg, section, nograd)) table.line(thr, nograd, size, fmt_time(t[0]), "-", "-", "-");
  if (selected(cfg, section, record))
    table.line(thr, record, size, fmt_time(t[1]), fmt_time(t[1]) + " fwd", fmt_time(t[0]) + " no-grad",
               fmt_ratio(t[1] / t[0]));
  if (selected(cfg, section, both))
    table.line(thr, both, size, fmt_time(t[2]), fmt_time(bwd) + " bwd", fmt_time(t[1]) + " fwd", fmt_ratio(bwd / t[1]));
}

void run_pass(Config cfg, int threads) {
  cfg.threads = threads;
  cpu::set_num_threads(threads);
#if BENCH_HAVE_CBLAS
  openblas_set_num_threads(threads);
#endif
  // GEMMs last: OpenBLAS's threads keep spinning a while after a call and
  // would steal a core from the cases that follow.
  bench_chain(cfg);
  bench_softmax(cfg);
  bench_mlp(cfg);
}

void print_preamble(const Config& cfg, int hardware_threads) {
#if BENCH_HAVE_CBLAS
  const std::string blas = openblas_get_config();
#else
  const std::string blas = "no OpenBLAS";
#endif
  std::printf("# bench_autograd: Tandem %s, %s; %d hardware threads; device %s%s\n", version(), blas.c_str(),
              hardware_threads, bench::describe(cfg.device).c_str(), cfg.quick ? "; --quick" : "");
  bench::print_emulation_note(cfg.device);
  std::printf("# time: median per call (one chain, one graph, one step); ratio = figure / reference, both measured\n");
  std::printf("# in this run, a section's samples interleaved. chain, softmax: record = fwd record / fwd no-grad,\n");
  std::printf("# fwd+bwd = backward part (fwd+bwd - fwd record) / fwd record. mlp: fraction of the GEMM ceiling,\n");
  std::printf("# the same GEMMs without the graph (3 forward; 3 + 5 with backward): 'cblas' called directly on the\n");
  std::printf("# cpu, 'mm' Tandem's own mm under NoGradGuard elsewhere; (fwd+bwd)/fwd: Tandem's over the GEMMs'\n");
  std::printf("# own (1.00 = the graph adds nothing to the backward beyond its GEMMs' share)\n");
  if (cfg.device.is_cuda())
    std::printf(
        "# %s: one pass (thr: threads of Tandem's CPU pool; the kernels run on the device); every timed\n"
        "# batch of calls ends with cuda::synchronize, so a time is the device's work, not its launches\n",
        cfg.device.str().c_str());
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  const bench::Program program{
      .name = "bench_autograd",
      .about =
          "Tandem's autograd on the cpu or a GPU beside the same forward without recording and an MLP's GEMMs "
          "without the graph",
      .quick = "A quarter of the sampling time"};
  return bench::run_device_bench(program, argc, argv, cfg, [&] {
    const int all = bench::hardware_threads();
    print_preamble(cfg, all);
    table.header();
    run_pass(cfg, 1);
    // On a GPU the host's threads run no kernels: the all-cores pass would repeat the first.
    if (all > 1 && cfg.device.is_cpu()) run_pass(cfg, all);
  });
}
