// bench_norm: batch norm 2d (N=128, C=32, 28x28) and layer norm (4096x1024), float32, forward and forward+backward,
// on the cpu or a GPU, each beside a copy of the input (x.clone(): one read and one write of its bytes, the memory
// ceiling of one pass) measured in the same run. bench/peer_norm_torch.py prints the same table for PyTorch and, with
// --compare, Tandem's time over torch's per case.
// Usage: bench_norm [--device cpu|cuda|cuda:N] [--quick] [--filter SUBSTR]
#include <cstdint>
#include <cstdio>
#include <functional>
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

const bench::Table table{20, 14, 12, 18};

// One layer: its forward (as in training: batch statistics, running ones
// updated), its forward+backward (autograd::grad of sum(y * seed) for the
// input, weight and bias), and a clone of the input. figure: the bytes the
// pass must move at least (fwd: x read, y written; fwd+bwd: that, then g and
// x read and grad_x written) over the time; reference: the clone's GB/s.
void bench_layer(const Config& cfg, const std::string& section, const std::string& size, const Tensor& x,
                 const std::function<Tensor(const Tensor&)>& layer, const std::vector<Tensor>& params) {
  const std::string fwd = section + " fwd", both = section + " fwd+bwd";
  if (!selected(cfg, section, fwd) && !selected(cfg, section, both)) return;
  Tensor leaf = x.detach().requires_grad_();
  Tensor seed = randn(x.sizes(), TensorOptions().device(cfg.device));
  std::vector<Tensor> wrt{leaf};
  wrt.insert(wrt.end(), params.begin(), params.end());
  std::vector<Fn> fns{
      [&] {
        NoGradGuard no_grad;
        layer(x);
      },
      [&] { autograd::grad({layer(leaf)}, wrt, {seed}); },
      [&] { x.clone(); },
  };
  const std::vector<double> t = time_all(fns, 0.6 * cfg.scale, cfg.device);
  const double bytes = static_cast<double>(x.nbytes());
  const double copy_gbs = 2 * bytes / t[2] / 1e9;
  const std::string thr = std::to_string(cfg.threads), reference = fmt_value(copy_gbs, "GB/s") + " copy";
  const double fwd_gbs = 2 * bytes / t[0] / 1e9, both_gbs = 5 * bytes / t[1] / 1e9;
  if (selected(cfg, section, fwd))
    table.line(thr, fwd, size, fmt_time(t[0]), fmt_value(fwd_gbs, "GB/s"), reference, fmt_ratio(fwd_gbs / copy_gbs));
  if (selected(cfg, section, both))
    table.line(thr, both, size, fmt_time(t[1]), fmt_value(both_gbs, "GB/s"), reference, fmt_ratio(both_gbs / copy_gbs));
}

void run_pass(Config cfg, int threads) {
  cfg.threads = threads;
  cpu::set_num_threads(threads);
  const TensorOptions opts = TensorOptions().device(cfg.device);
  {
    const int64_t N = cfg.quick ? 32 : 128, C = 32;
    Tensor x = randn({N, C, 28, 28}, opts) * 2 + 1;
    Tensor w = ones({C}, opts).requires_grad_(), b = zeros({C}, opts).requires_grad_();
    Tensor rm = zeros({C}, opts), rv = ones({C}, opts);
    bench_layer(cfg, "batch_norm2d", std::to_string(N) + "x32x28x28", x,
                [&](const Tensor& in) { return batch_norm(in, w, b, rm, rv, true, 0.1, 1e-5); }, {w, b});
  }
  {
    const int64_t rows = cfg.quick ? 1024 : 4096, D = 1024;
    Tensor x = randn({rows, D}, opts) * 2 + 1;
    Tensor w = ones({D}, opts).requires_grad_(), b = zeros({D}, opts).requires_grad_();
    bench_layer(cfg, "layer_norm", std::to_string(rows) + "x1024", x,
                [&](const Tensor& in) { return layer_norm(in, {D}, w, b); }, {w, b});
  }
}

void print_preamble(const Config& cfg, int hardware_threads) {
  std::printf("# bench_norm: Tandem %s; %d hardware threads; device %s%s\n", version(), hardware_threads,
              bench::describe(cfg.device).c_str(), cfg.quick ? "; --quick" : "");
  bench::print_emulation_note(cfg.device);
  std::printf(
      "# float32, training mode. time: median per call. fwd: under NoGradGuard; fwd+bwd: the forward recorded,\n");
  std::printf("# then autograd::grad of sum(y * seed) for the input, weight and bias. figure: bytes moved at least\n");
  std::printf(
      "# (fwd 2x the input's, fwd+bwd 5x) / time; reference: x.clone() of the same input, sampled alongside;\n");
  std::printf("# ratio = figure / reference\n");
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  const bench::Program program{
      .name = "bench_norm",
      .about =
          "Batch norm 2d and layer norm, forward and forward + backward, on the cpu or a GPU, each beside a copy "
          "of its input",
      .quick = "Smaller inputs (batch norm N = 32, layer norm 1024 rows) and a quarter of the sampling time"};
  return bench::run_device_bench(program, argc, argv, cfg, [&] {
    const int all = bench::hardware_threads();
    print_preamble(cfg, all);
    table.header();
    run_pass(cfg, 1);
    // On a GPU the host's threads run no kernels: the all-cores pass would repeat the first.
    if (all > 1 && cfg.device.is_cpu()) run_pass(cfg, all);
  });
}
